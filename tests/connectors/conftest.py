"""Fixtures of the connectors tests: an allowed root on disk, the imports storage in tmp_path, embedding calls."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from connectors.models import SourceSync, SyncedSource
from connectors.sync import source_sync
from rag.providers.embeddings import get_embedding_provider
from rag.providers.fakes import FakeEmbeddingProvider


@pytest.fixture(autouse=True)
def import_storage(settings: Settings, tmp_path: Path) -> Path:
    location = tmp_path / "imports"
    settings.STORAGES = {
        **settings.STORAGES,
        "imports": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(location)}},
    }
    return location


@pytest.fixture
def root(settings: Settings, tmp_path: Path) -> Path:
    """A folder the server may read (CONNECTORS_LOCAL_ROOTS)."""
    allowed = tmp_path / "exports"
    allowed.mkdir()
    settings.CONNECTORS_LOCAL_ROOTS = [str(allowed)]
    return allowed


def embedded_texts() -> list[str]:
    provider = get_embedding_provider()
    assert isinstance(provider, FakeEmbeddingProvider), "the autouse fake_providers fixture selects the fake"
    return [text for batch in provider.calls for text in batch]


SyncAndIndex = Callable[[SyncedSource], SourceSync]


@pytest.fixture
def sync_and_index(django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks) -> SyncAndIndex:
    """Sync the source in this process and index what it wrote, as the worker would after commit."""

    def run(source: SyncedSource) -> SourceSync:
        with django_capture_on_commit_callbacks(execute=True):
            sync = source_sync(source=source)
        return sync

    return run


def write(folder: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
