"""Ingestion of files and folders: type detection, parsers per format, archive expansion, import jobs.

Reading order: `detect.py` (what a file is, from its bytes) → `parsers.py` (bytes to markdown text
and a page map) → `archives.py` (ZIP entries, within the limits) → `jobs.py` (an import job: each
file becomes a new document, a new version, or nothing when unchanged).
"""
