"""The Redis cache, made to miss rather than fail: a cache that is down must not take requests down with it.

Every read answers as a miss and every write is skipped while Redis cannot be reached (logged once a
minute), so search, answers and throttling go on (the throttles then count nothing) until it is back.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError, TimeoutError

logger = logging.getLogger("cairn.cache")
_UNREACHABLE = (ConnectionError, TimeoutError, OSError)
_last_warning = 0.0


def _warn(exc: Exception) -> None:
    global _last_warning
    if time.monotonic() - _last_warning > 60:
        _last_warning = time.monotonic()
        logger.warning("cache unreachable, serving without it: %s", exc)


class TolerantRedisCache(RedisCache):
    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        try:
            return super().get(key, default, version)
        except _UNREACHABLE as exc:
            _warn(exc)
            return default

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        try:
            return super().get_many(keys, version)
        except _UNREACHABLE as exc:
            _warn(exc)
            return {}

    def has_key(self, key: Any, version: int | None = None) -> bool:
        try:
            return super().has_key(key, version)
        except _UNREACHABLE as exc:
            _warn(exc)
            return False

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        try:
            super().set(key, value, timeout, version)
        except _UNREACHABLE as exc:
            _warn(exc)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        try:
            return super().add(key, value, timeout, version)
        except _UNREACHABLE as exc:
            _warn(exc)
            return False

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list[Any]:
        try:
            return super().set_many(data, timeout, version)
        except _UNREACHABLE as exc:
            _warn(exc)
            return list(data)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        try:
            return super().incr(key, delta, version)
        except _UNREACHABLE as exc:
            _warn(exc)
            return delta

    def delete(self, key: Any, version: int | None = None) -> bool:
        try:
            return super().delete(key, version)
        except _UNREACHABLE as exc:
            _warn(exc)
            return False

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        try:
            return super().touch(key, timeout, version)
        except _UNREACHABLE as exc:
            _warn(exc)
            return False
