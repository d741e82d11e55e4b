"""schemathesis over the OpenAPI schema against gunicorn: no 5xx, and every error in the one JSON shape."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
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


def test_a_thousand_generated_requests_to_every_endpoint_get_no_server_error_and_only_json_errors(
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
    events = tmp_path / "events.ndjson"
    try:
        result = subprocess.run(
            [
                sys.executable,
                "bench/fuzz.py",
                "--url",
                server.url,
                "--token",
                token,
                "--max-examples",
                "25",
                "--report",
                str(events),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout[-4000:]
    statuses = Counter(int(code) for code in re.findall(r'"status_code":\s*(\d+)', events.read_text()))
    print(json.dumps(sorted(statuses.items())))
    assert sum(statuses.values()) >= 1000, statuses
    assert not [code for code in statuses if code >= 500], statuses
