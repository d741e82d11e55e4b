"""Fast, deterministic tests: fake providers, MD5 hasher, eager tasks unless a test runs a worker."""

from __future__ import annotations

from .base import *
from .base import (
    BASE_DIR,
    DATABASES,
    EMBEDDED_DATABASE,
    REST_FRAMEWORK,
    STORAGES,
    _embedded_data_dir,
    env,
)

if EMBEDDED_DATABASE:
    # The tests' own server: a test run never touches the data under var/postgres.
    DATABASES["default"]["OPTIONS"]["data_dir"] = _embedded_data_dir(BASE_DIR / "var" / "test-postgres")

SECRET_KEY = "test-secret-key"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://"
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "cairn-tests"}}
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"user": "100000/min", "anon": "100000/min", "rag": "100000/min"}}
# Base settings validated the variable when it is set; unset, tests embed with the fake provider.
RAG_EMBEDDING_PROVIDER = env("RAG_EMBEDDING_PROVIDER", default="fake")
# Tests never reach a real LLM: answers come from the fake provider, switched on by naming a model
# (tests set RAG_LLM_MODEL; a server started by a test gets CAIRN_TEST_LLM_MODEL).
RAG_LLM_PROVIDER = "fake"
RAG_LLM_MODEL = env("CAIRN_TEST_LLM_MODEL", default="")
RAG_RERANK_MODEL = ""
# Originals and uploads of the tests' imports (a server started by a test is handed its own folder);
# tests that import files point it at their own tmp_path.
STORAGES = {
    **STORAGES,
    "imports": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": env("IMPORT_STORAGE_DIR", default=str(BASE_DIR / "var" / "test-imports"))},
    },
}
# The test client loads the middleware again for every client it makes, and WhiteNoise would list every
# static file each time; in autorefresh mode it finds a file when a request asks for one.
WHITENOISE_AUTOREFRESH = True
