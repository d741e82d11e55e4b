"""STORAGES["imports"] from IMPORT_STORAGE_URL and IMPORT_S3_*: a folder by default, an S3 bucket when a URL names one."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings.base import _import_storage

S3_VARIABLES = ("IMPORT_S3_ENDPOINT_URL", "IMPORT_S3_REGION", "IMPORT_S3_ACCESS_KEY_ID", "IMPORT_S3_SECRET_ACCESS_KEY")


@pytest.fixture(autouse=True)
def no_s3_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in S3_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_without_a_url_the_imports_storage_is_the_folder() -> None:
    assert _import_storage("", "/srv/cairn/imports") == {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": "/srv/cairn/imports"},
    }


def test_an_s3_url_names_the_bucket_and_the_prefix_and_the_endpoint_is_addressed_by_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMPORT_S3_ENDPOINT_URL", "http://minio:9000")
    monkeypatch.setenv("IMPORT_S3_ACCESS_KEY_ID", "cairn")
    monkeypatch.setenv("IMPORT_S3_SECRET_ACCESS_KEY", "a-long-secret")
    storage = _import_storage("s3://team-files/cairn/imports/", "/unused")
    assert storage["BACKEND"] == "storages.backends.s3.S3Storage"
    options = storage["OPTIONS"]
    assert (options["bucket_name"], options["location"]) == ("team-files", "cairn/imports")
    assert (options["endpoint_url"], options["addressing_style"]) == ("http://minio:9000", "path")
    assert (options["access_key"], options["secret_key"]) == ("cairn", "a-long-secret")


def test_on_aws_without_keys_the_sdk_finds_its_own_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMPORT_S3_REGION", "eu-west-1")
    options = _import_storage("s3://team-files", "/unused")["OPTIONS"]
    assert (options["location"], options["endpoint_url"], options["addressing_style"]) == ("", None, None)
    assert options["region_name"] == "eu-west-1"
    assert "access_key" not in options and "secret_key" not in options


@pytest.mark.parametrize(
    "url", ["https://team-files/imports", "s3://", "s3:///imports", "s3://team-files:9000/x", "s3://k@team-files"]
)
def test_a_url_that_is_not_an_s3_bucket_stops_start_up(url: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="IMPORT_STORAGE_URL must be s3://bucket"):
        _import_storage(url, "/unused")


def test_one_key_without_the_other_stops_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMPORT_S3_ACCESS_KEY_ID", "cairn")
    with pytest.raises(ImproperlyConfigured, match="set together"):
        _import_storage("s3://team-files", "/unused")
