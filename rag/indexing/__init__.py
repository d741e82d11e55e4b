"""Indexing: chunk documents, embed what is new, keep keyword postings, reconcile and clean up."""
