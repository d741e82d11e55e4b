"""Milvus Lite as a server of its own: one process that every Cairn process shares (RAG_VECTOR_BACKEND=milvus).

Milvus Lite (the `milvus-lite` wheel) keeps its data in a directory that one process at a time may open (it
holds a lock on it), so gunicorn's workers and Celery cannot each open it. `make run` (config.serve) starts this
server when the backend is milvus and RAG_MILVUS_URI is unset, and hands its address to every child (another
supervisor does the same with `EmbeddedMilvus(directory, port=...)`: `argv()`, `start()`, `uri`). `python -m config.milvus_lite --data-dir DIR --port PORT` runs it by
hand (Ctrl-C or SIGTERM stops it, closing the data directory cleanly).
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType


class EmbeddedMilvus:
    """`python -m config.milvus_lite` on 127.0.0.1:<port> over <directory>; `uri` is what RAG_MILVUS_URI takes."""

    def __init__(self, directory: Path | str, *, port: int) -> None:
        self.directory = Path(directory).absolute()
        self.port = port

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "config.milvus_lite", "--data-dir", str(self.directory), "--port", str(self.port)]

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def start(self, *, log: Path | None = None, timeout: float = 60) -> subprocess.Popen:
        """Start the server in its own session and wait until it answers; the caller stops it (SIGTERM)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        out = log.open("ab") if log else subprocess.DEVNULL
        root = Path(__file__).resolve().parent.parent
        process = subprocess.Popen(self.argv(), cwd=root, stdout=out, stderr=out, start_new_session=True)
        self.wait_ready(process, timeout=timeout)
        return process

    def wait_ready(self, process: subprocess.Popen, *, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"Milvus Lite exited with {process.returncode} (directory {self.directory})")
            if self.answers():
                return
            time.sleep(0.1)
        raise RuntimeError(f"Milvus Lite did not answer on port {self.port} within {timeout} s")


def serve_in_thread(directory: Path | str) -> tuple[str, Callable[[], None]]:
    """Milvus Lite served by threads of this process on a free loopback port: its URI, and what stops it.

    For the tests and the benchmarks, which run in one process: no second interpreter to start (importing
    Milvus Lite and its dependencies again costs seconds).
    """
    from milvus_lite.adapter.grpc.server import start_server_in_thread

    Path(directory).mkdir(parents=True, exist_ok=True)
    server, db, port = start_server_in_thread(data_dir=str(directory), host="127.0.0.1", port=0)

    def stop() -> None:
        server.stop(grace=1).wait()
        db.close()

    return f"http://127.0.0.1:{port}", stop


def free_port() -> int:
    """A TCP port no one listens on now (for the tests' and benchmarks' own servers)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m config.milvus_lite", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--data-dir", required=True, help="Milvus Lite's data directory (created if missing)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=19530)
    args = parser.parse_args(argv)

    from milvus_lite.adapter.grpc.server import start_server_in_thread

    Path(args.data_dir).mkdir(parents=True, exist_ok=True)
    server, db, port = start_server_in_thread(data_dir=args.data_dir, host=args.host, port=args.port)
    print(f"Milvus Lite listening on {args.host}:{port} (data {args.data_dir})", flush=True)
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while not stopping:
            time.sleep(0.2)
    finally:
        # Requests in flight finish; the data directory's lock is released and its write-ahead log closed.
        server.stop(grace=5).wait()
        db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
