"""Cairn's own PostgreSQL with pgvector, used when DATABASE_URL is unset.

A Django database backend (ENGINE "config.embedded_db"): the first connection a process opens
starts the server (or reuses a running one), gives it the configured shared_buffers and creates
the database, so importing settings starts nothing.
"""
