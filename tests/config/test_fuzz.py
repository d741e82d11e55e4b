"""bench/fuzz.py against gunicorn (the API from its schema, /mcp, malformed HTTP): no 5xx, every error in the one JSON shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from permissions.models import TokenScope
from permissions.services import api_token_create
from rag.indexing.pipeline import index_documents
from tests.conftest import Cast
from tests.factories import DocumentFactory
from tests.servers import GunicornServer

pytestmark = [pytest.mark.serve, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def test_a_thousand_generated_requests_to_the_api_mcp_and_the_wire_get_no_server_error_and_only_json_errors(
    cast: Cast, tmp_path: Path
) -> None:
    documents = [
        DocumentFactory.create(
            collection=cast.handbook, created_by=cast.alice, title=f"Owls {n}", text=f"# Owls {n}\n\nOwls hunt at night."
        )
        for n in range(3)
    ]
    index_documents(document_ids=[d.pk for d in documents])
    token = api_token_create(user=cast.alice, scope=TokenScope.WRITE).plaintext
    server = GunicornServer(log_path=tmp_path / "gunicorn.log").start()
    try:
        # A sample of bench/fuzz.py's run (docs/benchmarks.md has the full one's figures).
        result = subprocess.run(
            [
                sys.executable,
                "bench/fuzz.py",
                *("--url", server.url, "--token", token, "--report", str(tmp_path / "events.ndjson")),
                *("--max-examples", "10", "--mcp-cases", "300", "--wire-cases", "300"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        server.stop()
    print(result.stdout[-6000:])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["total"] >= 1000, summary
    assert (summary["server_errors"], summary["failures"]) == (0, 0), summary
    assert summary["mcp"]["cases"] >= 300 and summary["wire"]["cases"] >= 300, summary
