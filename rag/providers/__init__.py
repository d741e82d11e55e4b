"""Embedding, LLM and rerank providers behind small interfaces, with one retry layer."""
