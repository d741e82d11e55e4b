"""Answering: passages, prompt, generation or extraction, citations and rendering."""
