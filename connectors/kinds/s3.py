"""An S3-compatible bucket (AWS, MinIO, Ceph, R2...): every object under a prefix, read only when its ETag changed.

The listing gives each object's ETag and size, so an unchanged object is never downloaded and an object over
IMPORT_MAX_FILE_SIZE is refused without being read. The access key pair is the source's secret.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

from django.conf import settings

from connectors.base import ConfigField, ItemError, PreviousItem, SourceError, SourceItem
from connectors.network import check_host

_CONFIG_FIELDS = {"bucket", "prefix", "endpoint_url", "region"}
_SECRET_FIELDS = {"access_key_id", "secret_access_key"}
# Error codes S3 (and the compatible servers) answer a wrong key pair, or a key without rights, with.
_CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken", "403"}
_MISSING_BUCKET_CODES = {"NoSuchBucket", "404"}
# One boto3 session for the process: it keeps botocore's service models loaded, so a client costs
# milliseconds instead of the third of a second a fresh session takes to read them. Credentials are
# always the source's own (or none, unsigned): never the session's, which would be the server's.
_SESSION: Any = None
_SESSION_LOCK = threading.Lock()


class S3Connector:
    """Objects under a prefix of one bucket."""

    kind: ClassVar[str] = "s3"
    label: ClassVar[str] = "S3 bucket"
    fields: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField("bucket", "Bucket", required=True),
        ConfigField("prefix", "Prefix", help="Only keys that start with it, e.g. handbook/; empty: the whole bucket."),
        ConfigField(
            "endpoint_url",
            "Endpoint URL",
            help="For an S3-compatible server (MinIO, Ceph, R2...), e.g. https://minio.example.com; empty: AWS.",
        ),
        ConfigField("region", "Region", help="e.g. eu-west-1; empty: the endpoint's default."),
    )
    secret_fields: ClassVar[tuple[ConfigField, ...]] = (
        ConfigField("access_key_id", "Access key id"),
        ConfigField("secret_access_key", "Secret access key"),
    )
    # Keys per listing request (S3's own maximum).
    page_size: ClassVar[int] = 1000

    def __init__(
        self,
        *,
        bucket: str,
        prefix: str = "",
        endpoint_url: str = "",
        region: str = "",
        access_key_id: str = "",
        secret_access_key: str = "",
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint_url = endpoint_url
        self.region = region
        self._access_key_id = access_key_id
        self._secret_access_key = secret_access_key
        self._cursor = ""
        self._s3: Any = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> S3Connector:
        # boto3 is an extra of the install (requirements/s3.txt): say so when the source is saved, not at its sync.
        if importlib.util.find_spec("boto3") is None:
            raise SourceError("S3 sources need boto3, which this install lacks: pip install -r requirements/s3.txt.")
        unknown = sorted(set(config) - _CONFIG_FIELDS)
        if unknown:
            raise SourceError(f"Unknown field for an S3 source: {', '.join(unknown)}.")
        unknown_secrets = sorted(set(secrets) - _SECRET_FIELDS)
        if unknown_secrets:
            raise SourceError(
                f"Unknown secret for an S3 source: {', '.join(unknown_secrets)} (expected access_key_id, secret_access_key)."
            )
        values = {name: config.get(name, "") for name in _CONFIG_FIELDS}
        for name, value in values.items():
            if not isinstance(value, str):
                raise SourceError(f"{name}: must be text.")
        bucket = values["bucket"].strip()
        # S3's bucket naming rules, loosely: compatible servers allow a little more (upper case, underscores).
        if (
            not 3 <= len(bucket) <= 255
            or "/" in bucket
            or not bucket.replace("-", "").replace(".", "").replace("_", "").isalnum()
        ):
            raise SourceError("bucket: a bucket name (3 to 255 letters, digits, dots, hyphens) is required.")
        endpoint_url = values["endpoint_url"].strip().rstrip("/")
        if endpoint_url:
            parts = urlsplit(endpoint_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise SourceError(f"endpoint_url: {endpoint_url!r} is not an http:// or https:// address.")
        access_key_id = secrets.get("access_key_id", "")
        secret_access_key = secrets.get("secret_access_key", "")
        if bool(access_key_id) != bool(secret_access_key):
            raise SourceError("Give both secrets, access_key_id and secret_access_key, or neither (a public bucket).")
        return cls(
            bucket=bucket,
            prefix=values["prefix"].strip().lstrip("/"),
            endpoint_url=endpoint_url,
            region=values["region"].strip(),
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
        )

    @property
    def cursor(self) -> str:
        return self._cursor

    def items(self, previous: Mapping[str, PreviousItem]) -> Iterator[SourceItem]:
        from botocore.exceptions import BotoCoreError, ClientError

        if self.endpoint_url:
            check_host(urlsplit(self.endpoint_url).hostname or "")
        client = self._client()
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        count = 0
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix, PaginationConfig={"PageSize": self.page_size}
        )
        try:
            # An error on any page of the listing stops the sync (SourceError): ending the listing early
            # would archive every object not listed yet.
            for listing in pages:
                for entry in listing.get("Contents", ()):
                    key = entry["Key"]
                    if key.endswith("/"):
                        continue  # a "folder" marker some consoles create, not a file
                    count += 1
                    yield self._item(client, key, entry["ETag"].strip('"'), int(entry.get("Size", 0)))
        except ClientError as exc:
            raise self._source_error(exc) from exc
        except BotoCoreError as exc:
            raise SourceError(f"Cannot reach {self._where()}: {exc}", transient=True) from exc
        self._cursor = f"listed {count} object{'s' if count != 1 else ''} at {started}"

    def _item(self, client: Any, key: str, etag: str, size: int) -> SourceItem:
        return SourceItem(
            key=key,
            name=key.rsplit("/", 1)[-1],
            version=etag,
            origin=self._origin(key),
            fetch=self._fetcher(client, key, etag, size),
            size=size,
        )

    def _fetcher(self, client: Any, key: str, etag: str, size: int) -> Callable[[], bytes]:
        def fetch() -> bytes:
            from botocore.exceptions import BotoCoreError, ClientError

            limit = settings.IMPORT_MAX_FILE_SIZE
            if size > limit:
                raise ItemError(key, f"is {size:,} bytes, over IMPORT_MAX_FILE_SIZE ({limit:,})")
            try:
                # IfMatch: the object as listed, not a newer one written since (whose ETag would not be stored).
                body = client.get_object(Bucket=self.bucket, Key=key, IfMatch=f'"{etag}"')["Body"]
                data = body.read(limit + 1)
                body.close()
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code in ("NoSuchKey", "404"):
                    raise ItemError(key, "was deleted while the sync ran") from exc
                if code in ("PreconditionFailed", "412"):
                    raise ItemError(key, "changed while the sync ran; the next sync reads it") from exc
                raise ItemError(key, f"cannot be read: {code or exc}") from exc
            except BotoCoreError as exc:
                raise ItemError(key, f"cannot be read: {exc}") from exc
            if len(data) > limit:
                raise ItemError(key, f"is over IMPORT_MAX_FILE_SIZE ({limit:,} bytes)")
            return data

        return fetch

    def _client(self) -> Any:
        """One client for this connector's life (building one reads botocore's service models, a third of a second)."""
        if self._s3 is None:
            self._s3 = self._new_client()
        return self._s3

    def _new_client(self) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(
            connect_timeout=settings.CONNECTORS_TIMEOUT,
            read_timeout=settings.CONNECTORS_TIMEOUT,
            retries={"max_attempts": 2, "mode": "standard"},
            # Path-style addressing works with every S3-compatible server; virtual hosts need DNS for each bucket.
            s3={"addressing_style": "path"} if self.endpoint_url else {},
        )
        credentials: dict[str, Any] = {}
        if self._access_key_id:
            credentials = {"aws_access_key_id": self._access_key_id, "aws_secret_access_key": self._secret_access_key}
        else:
            from botocore import UNSIGNED

            config = config.merge(Config(signature_version=UNSIGNED))
        with _SESSION_LOCK:  # a session is not thread-safe; the clients it makes are
            global _SESSION
            if _SESSION is None:
                _SESSION = boto3.session.Session()
            return _SESSION.client(
                "s3",
                endpoint_url=self.endpoint_url or None,
                region_name=self.region or None,
                config=config,
                **credentials,
            )

    def _source_error(self, exc: Any) -> SourceError:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in _MISSING_BUCKET_CODES:
            return SourceError(f"bucket: there is no bucket {self.bucket!r} at {self._where()}.")
        if code in _CREDENTIAL_CODES:
            return SourceError(
                f"{self._where()} refused the credentials for bucket {self.bucket!r} ({code}): check the access key id and secret key, and that the key may list and read it."
            )
        return SourceError(
            f"{self._where()} answered {code or status}: {error.get('Message', '')}".strip(), transient=status >= 500
        )

    def _where(self) -> str:
        return self.endpoint_url or "S3"

    def _origin(self, key: str) -> str:
        if self.endpoint_url:
            return f"{self.endpoint_url}/{self.bucket}/{quote(key)}"
        return f"s3://{self.bucket}/{key}"
