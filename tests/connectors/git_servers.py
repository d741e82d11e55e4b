"""Git repositories the tests make and serve on loopback: `git daemon` (git://), and `git http-backend`
behind a WSGI server that asks for a token (http://)."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Tester",
    "GIT_AUTHOR_EMAIL": "tester@example.com",
    "GIT_COMMITTER_NAME": "Tester",
    "GIT_COMMITTER_EMAIL": "tester@example.com",
}


def git(*args: str, cwd: Path, stdin: bytes | None = None) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, env=_ENV, input=stdin, capture_output=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr.decode()}")
    return result.stdout.decode().strip()


class GitRepo:
    """A working repository whose commits are pushed to a bare one under `root` (what the servers export)."""

    def __init__(self, root: Path, name: str = "project.git") -> None:
        self.root = root
        self.bare = root / name
        self.work = root / f"{name}-work"
        git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare), cwd=root)
        git("init", "--quiet", "--initial-branch=main", str(self.work), cwd=root)
        # http-backend serves a repository only when asked to (or with GIT_HTTP_EXPORT_ALL).
        git("config", "http.receivepack", "false", cwd=self.bare)

    def write(self, path: str, content: str | bytes) -> None:
        target = self.work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)

    def remove(self, path: str) -> None:
        git("rm", "--quiet", path, cwd=self.work)

    def rename(self, old: str, new: str) -> None:
        (self.work / new).parent.mkdir(parents=True, exist_ok=True)
        git("mv", old, new, cwd=self.work)

    def commit(self, message: str, *, branch: str = "main", force: bool = False) -> str:
        git("add", "--all", cwd=self.work)
        git("commit", "--quiet", "--allow-empty", "-m", message, cwd=self.work)
        self.push(branch, force=force)
        return git("rev-parse", "HEAD", cwd=self.work)

    def push(self, branch: str, *, force: bool = False) -> None:
        git("push", "--quiet", *(["--force"] if force else []), str(self.bare), f"HEAD:refs/heads/{branch}", cwd=self.work)

    def checkout(self, branch: str, *, new: bool = False) -> None:
        git("checkout", "--quiet", *(["-b"] if new else []), branch, cwd=self.work)

    def reset_hard(self, revision: str) -> None:
        git("reset", "--quiet", "--hard", revision, cwd=self.work)

    def fast_import(self, files: Iterable[tuple[str, bytes]], *, branch: str = "main", message: str = "Many files") -> None:
        """One commit of many files at once, through `git fast-import` (thousands a second)."""
        stream = bytearray(f"commit refs/heads/{branch}\ncommitter Tester <tester@example.com> 0 +0000\n".encode())
        stream += f"data {len(message)}\n{message}\n".encode()
        for path, data in files:
            stream += f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n"
        git("fast-import", "--quiet", cwd=self.bare, stdin=bytes(stream))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


class GitDaemon:
    """`git daemon` exporting every repository under `root` at git://127.0.0.1:<port>/<name>."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> GitDaemon:
        self.process = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                f"--base-path={self.root}",
                str(self.root),
            ],
            env=_ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)
        return self

    def url(self, name: str = "project.git") -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class TokenGitServer:
    """`git http-backend` (smart HTTP) for repositories under `root`, for requests carrying the token only."""

    def __init__(self, root: Path, *, token: str, username: str = "x-access-token") -> None:
        self.root = root
        self.expected = "Basic " + base64.b64encode(f"{username}:{token}".encode()).decode()
        self.authorizations: list[str] = []
        self.server: WSGIServer | None = None

    def app(self, environ: dict, start_response) -> list[bytes]:
        given = environ.get("HTTP_AUTHORIZATION", "")
        self.authorizations.append(given)
        if given != self.expected:
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"'), ("Content-Length", "0")])
            return [b""]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        cgi_env = {
            **_ENV,
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": environ["REQUEST_METHOD"],
            "PATH_INFO": environ.get("PATH_INFO", ""),
            "QUERY_STRING": environ.get("QUERY_STRING", ""),
            "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
        }
        if environ.get("HTTP_GIT_PROTOCOL"):
            cgi_env["GIT_PROTOCOL"] = environ["HTTP_GIT_PROTOCOL"]
        output = subprocess.run(["git", "http-backend"], env=cgi_env, input=body, capture_output=True, check=False).stdout
        head, _, payload = output.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        start_response(status, headers)
        return [payload]

    def start(self) -> TokenGitServer:
        self.server = make_server("127.0.0.1", 0, self.app, handler_class=_QuietHandler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def url(self, name: str = "project.git") -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_port}/{name}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
