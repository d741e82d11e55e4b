"""The corpus: the rules indexing writes by and retrieval reads by, in one place both import.

How entity names are keyed (names), how text is split into keywords (text_search), which embedding
model a team's chunks are searched with (serving_model), the vector indexes' DDL (vector_index),
and the token that changes whenever a team's retrievable content may have (cache_token).
"""
