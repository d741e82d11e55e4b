"""What a serving process loads before it serves, and what the default install leaves out (config.warmup, rag.warmup).

The servers' hooks themselves run in tests/test_serve.py, on `make run`'s real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.core.cache import cache
from django.db import connection

import config.gunicorn
from config import metrics, warmup
from rag.indexing.pipeline import index_documents
from rag.retrieval.concurrency import close_background_connections
from tests.factories import DocumentFactory

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("litellm", "boto3", "botocore", "storages")


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local", **env}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120)


def requirement_names(path: Path) -> set[str]:
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return {line.split("==")[0].split("[")[0].lower() for line in lines if line and not line.startswith("-")}


def test_gunicorn_loads_the_app_in_its_master_and_warms_each_worker_before_it_serves() -> None:
    assert config.gunicorn.preload_app is True
    assert callable(config.gunicorn.when_ready) and callable(config.gunicorn.post_worker_init)


def test_the_default_install_leaves_litellm_and_s3_to_their_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    default = {requirement.split("==")[0].split("[")[0].lower() for requirement in project["dependencies"]}
    assert default == requirement_names(ROOT / "requirements" / "base.txt")
    assert not default & {"litellm", "boto3", "django-storages"}
    extras = project["optional-dependencies"]
    assert requirement_names(ROOT / "requirements" / "llm.txt") == {"litellm"} == {r.split("==")[0] for r in extras["llm"]}
    assert requirement_names(ROOT / "requirements" / "s3.txt") == {"django-storages", "boto3"}
    assert {r.split("==")[0].split("[")[0] for r in extras["s3"]} == {"django-storages", "boto3"}


@pytest.mark.slow_model
def test_the_web_app_and_its_preload_import_no_optional_package_nor_onnxruntime_before_the_fork() -> None:
    # What gunicorn's master runs before it forks: onnxruntime imported there makes every worker abort as it
    # exits, and a thread there would not exist in the workers.
    result = run_python(
        "import json, sys, threading, config.wsgi\n"
        "from config import warmup\n"
        "warmup.preload()\n"
        "print(json.dumps({'modules': sorted(m for m in (*sys.argv[1:], 'onnxruntime') if m in sys.modules),"
        " 'threads': threading.active_count(), 'steps': [s.name for s in warmup._steps]}))\n"
        "warmup.warm_up('test')\n"
        "print(json.dumps(warmup.state()))",
        RAG_EMBEDDING_PROVIDER="local",
        DATABASE_URL="postgres://nobody@127.0.0.1:1/none",  # no connection is opened
    )
    assert result.returncode == 0, result.stderr[-3000:]
    before_fork, after_warm_up = (json.loads(line) for line in result.stdout.splitlines()[-2:])
    assert before_fork == {"modules": [], "threads": 1, "steps": ["templates", "models", "search connections"]}
    assert after_warm_up == {"models": "loaded (all-MiniLM-L6-v2)"}


def on_each_thread(pool: ThreadPoolExecutor, threads: int, fn):
    """`fn()` once on each of the pool's `threads` threads (a barrier keeps each task on a thread of its own)."""
    barrier = threading.Barrier(threads)

    def run():
        barrier.wait(timeout=10)
        return fn()

    return [future.result() for future in [pool.submit(run) for _ in range(threads)]]


@pytest.mark.django_db(transaction=True)
def test_warming_a_workers_request_threads_opens_each_ones_connection_with_search_prepared_on_it(cast):
    doc = DocumentFactory.create(collection=cast.handbook, created_by=cast.alice, title="Warm", text="Kept warm by the worker.")
    index_documents(document_ids=[doc.pk])
    cache.clear()  # the warm-up's query is embedded, not found in the query cache
    searches = metrics.SEARCH_SECONDS.labels("hybrid")._sum.get()
    embeddings = metrics.PROVIDER_CALLS.labels("embedding", "fake-embedding", "ok")._value.get()

    def opened_and_prepared() -> tuple[int, bool, int]:
        opened = connection.connection is not None  # read before the query below would open one
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            return threading.get_ident(), opened, cursor.fetchone()[0]

    pool = ThreadPoolExecutor(max_workers=3)
    try:
        cold = on_each_thread(pool, 3, opened_and_prepared)
        on_each_thread(pool, 3, lambda: connection.close())
        assert [prepared for _, _, prepared in cold] == [0, 0, 0]

        warmup.warm_threads(pool, 3, "test")
        warm = on_each_thread(pool, 3, opened_and_prepared)
        assert len({thread for thread, _, _ in warm}) == 3
        assert all(opened and prepared > 0 for _, opened, prepared in warm), warm
        # The warm-up's searches are nobody's: the metrics do not count them.
        assert metrics.SEARCH_SECONDS.labels("hybrid")._sum.get() == searches
        assert metrics.PROVIDER_CALLS.labels("embedding", "fake-embedding", "ok")._value.get() == embeddings
    finally:
        on_each_thread(pool, 3, lambda: connection.close())
        pool.shutdown()
        close_background_connections()


def test_a_model_through_litellm_without_the_llm_extra_fails_at_start_with_how_to_install_it() -> None:
    # sys.modules[name] = None is how Python marks a module absent: find_spec then finds none.
    result = run_python(
        "import sys; sys.modules['litellm'] = None\nimport django; django.setup()",
        RAG_LLM_MODEL="openai/gpt-4o-mini",
        DATABASE_URL="postgres://nobody@127.0.0.1:1/none",
    )
    assert result.returncode != 0
    assert "RAG_LLM_MODEL need(s) LiteLLM, which this install lacks: pip install -r requirements/llm.txt" in result.stderr


def test_a_celery_pool_process_embeds_on_its_share_of_the_cores(settings) -> None:
    from config.celery import _warm_up

    settings.RAG_LOCAL_ENCODER_THREADS, settings.RAG_LOCAL_ENCODER_WORKER_THREADS = 2, 1
    _warm_up()  # what worker_process_init runs in each pool process
    assert settings.RAG_LOCAL_ENCODER_THREADS == 1
