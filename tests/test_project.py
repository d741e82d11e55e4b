"""Configuration, deployment files, health and the token command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
BASE_SETTINGS = (ROOT / "config" / "settings" / "base.py").read_text()
ALL_SETTINGS = "\n".join(path.read_text() for path in sorted((ROOT / "config" / "settings").glob("*.py")))


def run_settings(module: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": module, **env}
    return subprocess.run(
        [sys.executable, "-c", "import django; from django.conf import settings; django.setup(); print(settings.DEBUG)"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_licence_in_pyproject_is_the_licence_file():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()
    assert "(LICENSE)" in (ROOT / "README.md").read_text()


def test_docker_compose_parses_and_wires_the_settings_the_app_reads():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(compose["services"])
    assert "pgvector" in compose["services"]["postgres"]["image"]
    assert "gunicorn" in compose["services"]["web"]["command"]
    assert "celery" in compose["services"]["worker"]["command"]
    for service in ("web", "worker", "beat"):
        env = compose["services"][service]["environment"]
        for name in env:
            if name == "DJANGO_SETTINGS_MODULE":
                continue
            assert f'"{name}"' in BASE_SETTINGS or f'env("{name}"' in BASE_SETTINGS, f"{name} is not read by settings"
        assert env["DATABASE_URL"].startswith("postgres://") and env["CELERY_BROKER_URL"].startswith("redis://")


def test_every_gunicorn_command_leaves_the_worker_class_to_config_gunicorn() -> None:
    # A --worker-class on the command line replaces config.gunicorn's, whose worker answers gunicorn's own refusals in JSON.
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    commands = {
        "docker-compose.yml": compose["services"]["web"]["command"],
        "Dockerfile": (ROOT / "Dockerfile").read_text(),
        "config/serve.py": (ROOT / "config" / "serve.py").read_text(),
    }
    for where, command in commands.items():
        assert "python:config.gunicorn" in command and "worker-class" not in command, where


def test_every_configuration_variable_is_documented_in_the_operations_guide():
    operations = (ROOT / "docs" / "operations.md").read_text()
    # Every variable a settings module reads from the environment (env(...), env.int(...), _bool(...), ...).
    names = set(
        re.findall(r'(?:\benv(?:\.\w+)?|_env_value|_bounded_float|_positive_int|_bool)\(\s*"([A-Z][A-Z0-9_]*)"', ALL_SETTINGS)
    )
    assert {"DATABASE_URL", "RAG_EMBEDDING_MODEL", "SESSION_COOKIE_SECURE"} <= names, "the pattern no longer finds the settings"
    missing = sorted(n for n in names if f"| `{n}` |" not in operations)
    assert not missing, f"docs/operations.md's configuration table lacks: {missing}"


def test_production_refuses_to_start_without_a_secret_key():
    result = run_settings("config.settings.production", SECRET_KEY="", DATABASE_URL="postgres://x@127.0.0.1:1/x")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("RAG_CHUNK_SIZE", "lots", "RAG_CHUNK_SIZE has an invalid value"),
        ("RAG_SIMILARITY_THRESHOLD", "1.5", "RAG_SIMILARITY_THRESHOLD must be between"),
        ("RAG_EMBEDDING_PROVIDER", "magic", "RAG_EMBEDDING_PROVIDER must be"),
        ("RAG_HYBRID_WEIGHTS", "1,2,3,4", "RAG_HYBRID_WEIGHTS must be"),
        ("RAG_HYBRID_WEIGHTS", "0,0,0", "not all zero"),
        ("CELERY_TASK_SOFT_TIME_LIMIT", "700", "CELERY_TASK_SOFT_TIME_LIMIT (700) must be below CELERY_TASK_TIME_LIMIT (660)"),
        ("WEB_WORKERS", "0", "WEB_WORKERS must be at least 1"),
        ("LOGIN_MAX_FAILURES", "many", "LOGIN_MAX_FAILURES has an invalid value"),
        ("TRUSTED_PROXY_COUNT", "-1", "TRUSTED_PROXY_COUNT must be at least 0"),
        ("CAIRN_OIDC_ISSUER", "https://id.example.com", "set CAIRN_OIDC_CLIENT_ID and CAIRN_OIDC_CLIENT_SECRET too"),
    ],
)
def test_a_bad_setting_fails_at_start_up_with_a_clear_message(name, value, message):
    result = run_settings("config.settings.local", DATABASE_URL="postgres://x@127.0.0.1:1/x", **{name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_health_reports_database_and_broker(client, db):
    body = client.get("/health").json()
    assert body["status"] == "ok"
    assert body["database"] == "ok"
    assert body["broker"].startswith("in-process")


def test_setup_demo_creates_the_cast_and_prints_a_token(db, capsys):
    call_command("setup_demo")
    out = capsys.readouterr().out
    token = next(line for line in out.splitlines() if line.startswith("API token: ")).split(": ", 1)[1]
    from tests.conftest import Api

    titles = {d["title"] for d in Api(token).post("documents.list").json()["data"]}
    assert "Deploying the API" in titles and "Globex strategy 2027" not in titles
    call_command("setup_demo")  # idempotent
    assert "0 new document(s)" in capsys.readouterr().out


def test_setup_demo_revokes_the_token_it_printed_last_time(db, capsys):
    from tests.conftest import Api

    def printed_token() -> str:
        out = capsys.readouterr().out
        return next(line for line in out.splitlines() if line.startswith("API token: ")).split(": ", 1)[1]

    call_command("setup_demo")
    first = printed_token()
    call_command("setup_demo")
    second = printed_token()
    assert Api(first).post("documents.list").status_code == 401
    assert Api(second).post("documents.list").status_code == 200


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="only the embedded server is configured by Cairn")
def test_the_embedded_postgres_runs_with_the_configured_shared_buffers(db):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_size_bytes(current_setting('shared_buffers')) = pg_size_bytes(%s)",
            [connection.settings_dict["OPTIONS"]["shared_buffers"]],
        )
        assert cursor.fetchone()[0]


def test_the_wsgi_application_loads_its_views_and_freezes_startup_objects():
    script = (
        "import gc, sys; import config.wsgi; "
        "assert 'rag.api.search' in sys.modules and 'documents.apis' in sys.modules; assert gc.get_freeze_count() > 10000"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True, timeout=120)


@pytest.mark.server
@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="only the embedded server is started by the tests")
def test_a_test_run_stops_the_embedded_postgres_it_started(tmp_path):
    from config.embedded_db.server import server_running

    data_dir = tmp_path / "pg"
    env = {**os.environ, "CAIRN_EMBEDDED_PGDATA": str(data_dir), "DATABASE_URL": ""}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_project.py::test_health_reports_database_and_broker",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (data_dir / "PG_VERSION").exists(), "the run did not use its own server"
    assert not server_running(str(data_dir)), "the run left its PostgreSQL running"
