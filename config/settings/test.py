"""Fast, deterministic tests: fake providers, MD5 hasher, eager tasks unless a test runs a worker."""
from __future__ import annotations

import os

os.environ.setdefault("RAG_EMBEDDING_PROVIDER", "fake")
os.environ.setdefault("CAIRN_EMBEDDED_PGDATA", str(__import__("pathlib").Path(__file__).resolve().parents[2] / "var" / "test-postgres"))

from .base import *  # noqa: E402,F401,F403

SECRET_KEY = "test-secret-key"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://"
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "cairn-tests"}}
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"user": "100000/min", "anon": "100000/min", "rag": "100000/min"}}  # noqa: F405
# Tests never reach a real LLM: answers come from the fake provider, switched on by naming a model
# (tests set RAG_LLM_MODEL; a server started by a test gets CAIRN_TEST_LLM_MODEL).
RAG_LLM_PROVIDER = "fake"
RAG_LLM_MODEL = os.environ.get("CAIRN_TEST_LLM_MODEL", "")
RAG_RERANK_MODEL = ""
