"""Fixtures of the ingestion tests: a storage of their own, uploads through the API, folders on disk."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from documents.models import Collection, ImportJob
from permissions.models import User
from tests.conftest import ApiFor


@pytest.fixture(autouse=True)
def import_storage(settings: Settings, tmp_path: Path) -> Path:
    """Originals and uploads go to this test's own folder."""
    location = tmp_path / "imports"
    settings.STORAGES = {
        **settings.STORAGES,
        "imports": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(location)}},
    }
    return location


class Upload(Protocol):
    """The `upload` fixture."""

    def __call__(
        self,
        user: User,
        collection: Collection,
        files: dict[str, bytes],
        *,
        publish: bool = ...,
        scope: str = ...,
        status: int = ...,
    ) -> dict[str, Any]: ...


@pytest.fixture
def upload(api_for: ApiFor, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks) -> Upload:
    """POST files to documents.import as `user` and run the job as the worker would; the response's JSON."""

    def post(
        user: User,
        collection: Collection,
        files: dict[str, bytes],
        *,
        publish: bool = True,
        scope: str = "write",
        status: int = 200,
    ) -> dict[str, Any]:
        api = api_for(user, scope)
        body = {
            "collectionId": str(collection.pk),
            "publish": "true" if publish else "false",
            "files": [SimpleUploadedFile(name, data) for name, data in files.items()],
        }
        with django_capture_on_commit_callbacks(execute=True):
            response = api.client.post("/api/documents.import", body, format="multipart")
        assert response.status_code == status, response.content
        return response.json()

    return post


JobInfo = Callable[[User, uuid.UUID | str], dict[str, Any]]


@pytest.fixture
def job_info(api_for: ApiFor) -> JobInfo:
    def info(user: User, job_id: uuid.UUID | str) -> dict[str, Any]:
        response = api_for(user).post("jobs.info", {"id": str(job_id)})
        assert response.status_code == 200, response.content
        return response.json()["data"]

    return info


def outcomes(job: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["outcome"] for f in job["files"]}


def reasons(job: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["reason"] for f in job["files"] if f["outcome"] == "failed"}


def latest_job() -> ImportJob:
    job = ImportJob.objects.order_by("-created_at").first()
    assert job is not None
    return job
