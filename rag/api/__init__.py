"""The rag.* API endpoints."""
