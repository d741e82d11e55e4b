"""The S3 connector against moto's S3 server on loopback: listing, versions, limits, errors."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import boto3
import httpx
import pytest
from moto.server import ThreadedMotoServer
from pytest_django import Settings

from connectors.base import ItemError, SourceError, SourceItem
from connectors.kinds.s3 import S3Connector
from connectors.models import SourceSync
from connectors.services import source_create
from documents.models import Document
from tests.conftest import Cast
from tests.connectors.conftest import SyncAndIndex, embedded_texts

SECRETS = {"access_key_id": "cairn-test", "secret_access_key": "cairn-test-secret"}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """An S3 server of this module's own (moto), as tests/test_deploy.py starts one."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3(endpoint: str) -> Any:
    return boto3.resource(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=SECRETS["access_key_id"],
        aws_secret_access_key=SECRETS["secret_access_key"],
    )


@pytest.fixture
def bucket(s3: Any, request: pytest.FixtureRequest) -> Any:
    """An empty bucket of this test's own, named after it."""
    name = "t-" + request.node.name.replace("_", "-").lower()[:50].strip("-")
    created = s3.Bucket(name)
    created.create()
    return created


def connector(endpoint: str, bucket: Any, **config: Any) -> S3Connector:
    return S3Connector.from_config({"endpoint_url": endpoint, "bucket": bucket.name, "region": "us-east-1", **config}, SECRETS)


def counts(sync: SourceSync) -> tuple[int, int, int, int, int, int]:
    return (sync.seen, sync.created, sync.changed, sync.unchanged, sync.deleted, sync.failed)


def listing(source: S3Connector) -> dict[str, SourceItem]:
    return {item.key: item for item in source.items({})}


def test_it_lists_the_objects_under_the_prefix_with_their_etags_and_sizes(endpoint: str, bucket: Any) -> None:
    bucket.put_object(Key="docs/guide.md", Body=b"# Guide\n")
    bucket.put_object(Key="docs/", Body=b"")
    bucket.put_object(Key="other/readme.md", Body=b"# Other\n")

    items = listing(connector(endpoint, bucket, prefix="docs/"))

    guide = items["docs/guide.md"]
    etag = bucket.Object("docs/guide.md").e_tag.strip('"')
    assert (list(items), guide.name, guide.version, guide.size, guide.origin) == (
        ["docs/guide.md"],
        "guide.md",
        etag,
        8,
        f"{endpoint}/{bucket.name}/docs/guide.md",
    )


def test_it_reads_every_page_of_a_long_listing(endpoint: str, bucket: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(S3Connector, "page_size", 2)
    for n in range(5):
        bucket.put_object(Key=f"n{n}.txt", Body=f"note {n}".encode())

    assert len(listing(connector(endpoint, bucket))) == 5


def test_an_edited_object_gets_a_new_version_and_a_deleted_one_is_no_longer_listed(endpoint: str, bucket: Any) -> None:
    bucket.put_object(Key="a.md", Body=b"first")
    bucket.put_object(Key="b.md", Body=b"second")
    source = connector(endpoint, bucket)
    before = listing(source)
    bucket.put_object(Key="a.md", Body=b"first, edited")
    bucket.Object("b.md").delete()

    after = listing(source)

    assert (list(after), after["a.md"].version != before["a.md"].version, after["a.md"].fetch()) == (
        ["a.md"],
        True,
        b"first, edited",
    )


def test_an_object_over_the_size_limit_is_an_item_error_without_a_download(
    endpoint: str, bucket: Any, settings: Settings
) -> None:
    settings.IMPORT_MAX_FILE_SIZE = 10
    bucket.put_object(Key="big.txt", Body=b"x" * 11)
    big = listing(connector(endpoint, bucket))["big.txt"]
    bucket.Object("big.txt").delete()  # a download would now fail differently

    with pytest.raises(ItemError, match="is 11 bytes, over IMPORT_MAX_FILE_SIZE"):
        big.fetch()


def test_an_object_changed_since_the_listing_is_not_read_under_the_old_version(endpoint: str, bucket: Any) -> None:
    bucket.put_object(Key="a.md", Body=b"listed")
    listed = listing(connector(endpoint, bucket))["a.md"]
    bucket.put_object(Key="a.md", Body=b"written after the listing")

    with pytest.raises(ItemError, match="changed while the sync ran"):
        listed.fetch()


def test_a_missing_bucket_is_a_source_error_naming_it(endpoint: str) -> None:
    source = S3Connector.from_config({"endpoint_url": endpoint, "bucket": "no-such-bucket"}, SECRETS)

    with pytest.raises(SourceError, match="there is no bucket 'no-such-bucket'"):
        list(source.items({}))


def test_bad_credentials_are_a_source_error_about_the_keys(endpoint: str, bucket: Any) -> None:
    source = S3Connector.from_config(
        {"endpoint_url": endpoint, "bucket": bucket.name}, {"access_key_id": "AKIAWRONG", "secret_access_key": "wrong"}
    )
    # moto checks keys once told to (for every request after the next 0): for this test only.
    httpx.post(f"{endpoint}/moto-api/reset-auth", content=b"0").raise_for_status()
    try:
        with pytest.raises(SourceError, match="refused the credentials.*InvalidAccessKeyId"):
            list(source.items({}))
    finally:
        httpx.post(f"{endpoint}/moto-api/reset-auth", content=b"inf").raise_for_status()


def test_an_unreachable_endpoint_is_a_transient_source_error(bucket: Any) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    source = S3Connector.from_config({"endpoint_url": f"http://127.0.0.1:{port}", "bucket": bucket.name}, SECRETS)

    with pytest.raises(SourceError, match="Cannot reach") as raised:
        list(source.items({}))
    assert raised.value.transient


def test_an_endpoint_in_a_blocked_network_is_refused(endpoint: str, settings: Settings) -> None:
    settings.CONNECTORS_BLOCKED_NETWORKS = ["127.0.0.0/8"]
    source = S3Connector.from_config({"endpoint_url": endpoint, "bucket": "anything"}, SECRETS)

    with pytest.raises(SourceError, match="in a network Cairn does not connect to"):
        list(source.items({}))


@pytest.mark.parametrize(
    ("config", "secrets", "message"),
    [
        ({"bucket": ""}, SECRETS, "bucket: a bucket name"),
        ({"bucket": "a/b"}, SECRETS, "bucket: a bucket name"),
        ({"bucket": "docs", "endpoint_url": "ftp://minio"}, SECRETS, "endpoint_url: 'ftp://minio' is not an http"),
        ({"bucket": "docs", "path": "x"}, SECRETS, "Unknown field for an S3 source: path"),
        ({"bucket": "docs"}, {"access_key_id": "only-one"}, "Give both secrets"),
        ({"bucket": "docs"}, {"password": "x"}, "Unknown secret for an S3 source: password"),
    ],
)
def test_a_bad_configuration_is_a_source_error_naming_the_field(
    config: dict[str, Any], secrets: Mapping[str, str], message: str
) -> None:
    with pytest.raises(SourceError, match=message):
        S3Connector.from_config(config, secrets)


# End to end: an S3 source syncing into a collection.


def test_an_s3_source_creates_updates_and_archives_its_objects_and_an_unchanged_resync_reads_nothing(
    cast: Cast, endpoint: str, bucket: Any, sync_and_index: SyncAndIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket.put_object(Key="handbook/guide.md", Body=b"# Guide\n\nHow to deploy.\n")
    bucket.put_object(Key="handbook/faq.txt", Body=b"Questions and answers.\n")
    bucket.put_object(Key="handbook/old.md", Body=b"# Old\n\nGone soon.\n")
    bucket.put_object(Key="elsewhere/skip.md", Body=b"# Not under the prefix\n")
    source = source_create(
        by=cast.alice,
        name="Bucket",
        kind="s3",
        config={"endpoint_url": endpoint, "bucket": bucket.name, "prefix": "handbook/", "region": "us-east-1"},
        secrets=SECRETS,
        collection=cast.handbook,
        sync=False,
    )
    downloads: list[str] = []
    read = S3Connector._fetcher

    def counted(self: S3Connector, client: Any, key: str, etag: str, size: int) -> Callable[[], bytes]:
        fetch = read(self, client, key, etag, size)

        def fetch_counted() -> bytes:
            downloads.append(key)
            return fetch()

        return fetch_counted

    monkeypatch.setattr(S3Connector, "_fetcher", counted)

    first = sync_and_index(source)
    assert counts(first) == (3, 3, 0, 0, 0, 0)
    guide = Document.objects.get(collection=cast.handbook, title="Guide")
    assert guide.origin == f"{endpoint}/{bucket.name}/handbook/guide.md"

    embedded, downloaded = len(embedded_texts()), len(downloads)
    again = sync_and_index(source)
    assert counts(again) == (3, 0, 0, 3, 0, 0)
    assert (len(embedded_texts()), len(downloads)) == (embedded, downloaded), "an unchanged re-sync reads and embeds nothing"

    bucket.put_object(Key="handbook/guide.md", Body=b"# Guide\n\nHow to deploy, and roll back.\n")
    bucket.Object("handbook/questions.txt").copy_from(CopySource={"Bucket": bucket.name, "Key": "handbook/faq.txt"})
    bucket.Object("handbook/faq.txt").delete()
    bucket.Object("handbook/old.md").delete()
    bucket.put_object(Key="handbook/new.md", Body=b"# New\n\nFresh.\n")
    changed = sync_and_index(source)
    assert counts(changed) == (3, 2, 1, 0, 2, 0)
    guide.refresh_from_db()
    assert (guide.version, "roll back" in guide.text) == (2, True)
    archived = set(Document.objects.filter(collection=cast.handbook, archived_at__isnull=False).values_list("title", flat=True))
    assert archived == {"faq", "Old"}
