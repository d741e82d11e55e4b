"""Retrieval: permission-filtered vector, keyword and hybrid ranking of chunks."""
