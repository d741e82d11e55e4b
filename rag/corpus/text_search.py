"""How text becomes keywords: one PostgreSQL text search configuration for the chunks' keyword columns and for queries."""

from __future__ import annotations

# The chunks' postings (rag.indexing.keyword_postings), the title links of the graph
# (rag.indexing.graph_extraction) and BM25 queries (rag.retrieval.keyword) must all use this one.
TEXT_SEARCH_CONFIG = "english"
