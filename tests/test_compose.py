"""docker-compose.yml, checked without a Docker engine: against the compose specification's JSON schema, then
for what a working deploy needs (one imports storage for web and worker, health checks, start order)."""

from __future__ import annotations

import json
import re
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parent.parent
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
CAIRN = ("migrate", "web", "worker", "beat")  # the services built from this repository's Dockerfile
# The compose-spec project's schema, as check-jsonschema vendors it (check-compose-spec); Apache-2.0.
SCHEMA = json.loads((resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text())


def test_docker_compose_follows_the_compose_specification() -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in Draft202012Validator(SCHEMA).iter_errors(COMPOSE)]
    assert not errors, errors


def test_the_schema_check_refuses_a_misspelt_key() -> None:
    broken = {**COMPOSE, "services": {**SERVICES, "web": {**SERVICES["web"], "healtcheck": SERVICES["web"]["healthcheck"]}}}
    assert not Draft202012Validator(SCHEMA).is_valid(broken)


def test_web_and_worker_mount_one_imports_volume_where_the_settings_put_the_storage() -> None:
    directory = SERVICES["web"]["environment"]["IMPORT_STORAGE_DIR"]
    for service in ("web", "worker"):
        assert SERVICES[service]["environment"]["IMPORT_STORAGE_DIR"] == directory
        assert f"imports:{directory}" in SERVICES[service]["volumes"], f"{service} does not mount the imports volume"
    assert "imports" in COMPOSE["volumes"]
    # The volume takes its owner from the image's folder on first mount: the Dockerfile makes it for the app's user.
    dockerfile = (ROOT / "Dockerfile").read_text()
    workdir = re.search(r"^WORKDIR (\S+)", dockerfile, re.M)
    assert workdir and directory.startswith(workdir.group(1) + "/")
    assert f"mkdir -p {directory.removeprefix(workdir.group(1) + '/')}" in dockerfile
    assert re.search(r"mkdir -p \S+ && useradd .* && chown -R cairn /app", dockerfile), "the folder is made before the chown"


def test_every_service_that_uses_the_imports_storage_gets_its_s3_settings() -> None:
    for service in ("web", "worker"):
        env = SERVICES[service]["environment"]
        assert {"IMPORT_STORAGE_URL", "IMPORT_S3_ENDPOINT_URL", "IMPORT_S3_REGION", "IMPORT_S3_ACCESS_KEY_ID"} <= set(env)
        assert "IMPORT_S3_SECRET_ACCESS_KEY" in env


def test_every_long_running_service_has_a_health_check_the_image_can_run() -> None:
    for name in ("postgres", "redis", "web", "worker", "beat", "minio"):
        assert SERVICES[name].get("healthcheck", {}).get("test"), f"{name} has no health check"
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.startswith("FROM python:"), "the checks below run python, which the image is built on"
    for name in ("web", "worker", "beat"):
        test = " ".join(SERVICES[name]["healthcheck"]["test"])
        assert "curl" not in test and "wget" not in test, "python:*-slim has neither curl nor wget"
        for module in re.findall(r"python -m ([\w.]+)", test):
            assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), f"{name}'s check runs a module that does not exist"
    assert "config.healthcheck web" in " ".join(SERVICES["web"]["healthcheck"]["test"])
    assert "celery -A config inspect ping" in " ".join(SERVICES["worker"]["healthcheck"]["test"])
    beat_check = " ".join(SERVICES["beat"]["healthcheck"]["test"])
    assert "config.healthcheck beat" in beat_check
    schedule = re.search(r"--schedule (\S+)", SERVICES["beat"]["command"])
    assert schedule and f"--schedule {schedule.group(1)}" in beat_check, "beat's check reads the schedule file beat writes"


def test_services_start_after_what_they_need() -> None:
    for name, service in SERVICES.items():
        for needed, condition in service.get("depends_on", {}).items():
            assert needed in SERVICES, f"{name} depends on an unknown service {needed}"
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES[needed], f"{name} waits for {needed} to be healthy, which it never reports"
    for name in ("web", "worker", "beat"):
        depends = SERVICES[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}, f"{name} may start on an old schema"
        assert depends["redis"]["condition"] == "service_healthy"
    for name in ("web", "worker"):
        assert SERVICES[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
        # The bucket exists before the first upload, with --profile s3; without it, nothing to wait for.
        assert SERVICES[name]["depends_on"]["minio-init"] == {"condition": "service_completed_successfully", "required": False}
    assert SERVICES["migrate"]["command"] == "python manage.py migrate --noinput"
    assert "migrate" not in SERVICES["web"]["command"], "web no longer migrates: migrate does, once"


def test_minio_runs_only_with_the_s3_profile() -> None:
    profiled = {name for name, service in SERVICES.items() if service.get("profiles") == ["s3"]}
    assert profiled == {"minio", "minio-init"}
    assert "ports" not in SERVICES["minio"], "the bucket is reached only from inside the compose network"


def test_milvus_standalone_runs_only_with_the_milvus_profile_and_the_app_can_reach_it() -> None:
    profiled = {name for name, service in SERVICES.items() if service.get("profiles") == ["milvus"]}
    assert profiled == {"milvus", "milvus-etcd", "milvus-minio"}
    assert {name for name, service in SERVICES.items() if service.get("profiles")} == profiled | {"minio", "minio-init"}
    for name in profiled:
        assert SERVICES[name]["healthcheck"]["test"], f"{name} has no health check"
    milvus = SERVICES["milvus"]
    assert milvus["environment"]["ETCD_ENDPOINTS"].split(":")[0] == "milvus-etcd"
    assert milvus["environment"]["MINIO_ADDRESS"].split(":")[0] == "milvus-minio"
    for name in ("web", "worker"):
        assert SERVICES[name]["depends_on"]["milvus"] == {"condition": "service_healthy", "required": False}
        env = SERVICES[name]["environment"]
        assert env["RAG_VECTOR_BACKEND"] == "${RAG_VECTOR_BACKEND:-pgvector}", "pgvector stays the default"
        assert "RAG_MILVUS_URI" in env


def run_minio_init(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """minio-init's script as its shell runs it (compose turns `$$` into `$`), with an `mc` that prints its arguments."""
    script = SERVICES["minio-init"]["command"][0].replace("$$", "$")
    assert SERVICES["minio-init"]["entrypoint"] == ["/bin/sh", "-c"]
    return subprocess.run(
        ["/bin/sh", "-c", 'mc() { echo "mc $*"; }\n' + script], env=env, capture_output=True, text=True, timeout=10
    )


def test_minio_init_creates_the_bucket_the_storage_url_names() -> None:
    keys = {"IMPORT_S3_ACCESS_KEY_ID": "cairn", "IMPORT_S3_SECRET_ACCESS_KEY": "a-long-secret"}
    result = run_minio_init({"IMPORT_STORAGE_URL": "s3://team-files/cairn/imports", **keys})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "mc alias set cairn http://minio:9000 cairn a-long-secret",
        "mc mb --ignore-existing cairn/team-files",
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"IMPORT_S3_ACCESS_KEY_ID": "cairn", "IMPORT_S3_SECRET_ACCESS_KEY": "a-long-secret"}, "needs IMPORT_STORAGE_URL"),
        ({"IMPORT_STORAGE_URL": "s3://team-files"}, "needs IMPORT_S3_ACCESS_KEY_ID and IMPORT_S3_SECRET_ACCESS_KEY"),
    ],
)
def test_minio_init_says_which_setting_the_s3_profile_lacks(env: dict[str, str], message: str) -> None:
    result = run_minio_init(env)
    assert result.returncode == 1 and message in result.stderr
