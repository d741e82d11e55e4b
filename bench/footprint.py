"""Memory of `make run` once the demo is indexed: every process's PSS (and RSS) by kind, their total, and the venv's size.

Starts `python -m config.serve --demo` (what `make run` runs) in a checkout, on a state directory of its own
(`var/bench-footprint/`: its run directory and its embedded PostgreSQL), waits until the demo's documents are
indexed (`rag.status` says none pending), sends searches from several clients at once so every web worker
has answered some (a worker that never searched would not hold the model yet), then reads
`/proc/<pid>/smaps_rollup` for the supervisor's process tree and the embedded PostgreSQL's.

PSS (proportional set size) charges each shared page to the processes sharing it in equal parts, so the
sum over processes is what the tree holds in memory; RSS counts a shared page in every process that maps
it (the sum over-counts what forked workers share). The venv's size is its disk usage, as `du -s` reports it:
measure a default install (`make install VENV=...`), not a development one.

`--baseline DIR` runs the same on another checkout (a clone of main, with its own venv) in the same run,
alternating with this one, and prints the ratios. Medians over `--runs`.

Takes: about a minute a run and checkout (the first run of a checkout indexes the demo first).

Reproduce:  make install VENV=var/venv-default   (and `make install` in the baseline's clone of main)
            .venv/bin/python bench/footprint.py --venv var/venv-default --baseline ../main-clone --runs 3
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
DEMO_QUERIES = [
    "How many vacation days do I get?",
    "What is the on-call rotation?",
    "How do I request a new laptop?",
    "What is the expense policy for travel?",
    "Who approves production deploys?",
    "What are the office hours?",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def venv_size(venv: Path) -> int:
    """Bytes on disk under `venv` (allocated blocks, as `du -s` counts them; hard links once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for directory, _, files in os.walk(venv):
        for name in files:
            try:
                stat = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            if (stat.st_dev, stat.st_ino) in seen:
                continue
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_blocks * 512
    return total


def has_dev_packages(venv: Path) -> bool:
    return any(venv.glob("lib/python3*/site-packages/pytest"))


@dataclass
class Serve:
    """`python -m config.serve --demo` in `checkout` with `python`, on a state directory of its own under the checkout's var/."""

    checkout: Path
    python: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    token: str = ""
    started_at: float = 0.0

    @property
    def state(self) -> Path:
        return self.checkout / "var" / "bench-footprint"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.state / "serve.log"

    @property
    def pgdata(self) -> Path:
        return self.state / "postgres"

    def env(self) -> dict[str, str]:
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "DJANGO_", "PYTHON"))},
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "CAIRN_RUN_DIR": str(self.state / "run"),
            "CAIRN_EMBEDDED_PGDATA": str(self.pgdata),
            "CELERY_BROKER_URL": "",
            "REDIS_URL": "",
            "DATABASE_URL": "",
            "API_THROTTLE_USER": "1000000/min",
            "API_THROTTLE_RAG": "1000000/min",
            **self.extra_env,
        }

    def start(self) -> Serve:
        """Starts the supervisor (the demo loaded, as `make run` does) and returns at once; `wait_ready` waits."""
        self.state.mkdir(parents=True, exist_ok=True)
        self.started_at = time.perf_counter()
        self.process = subprocess.Popen(
            [str(self.python), "-m", "config.serve", "--demo", "--bind", f"127.0.0.1:{self.port}"],
            cwd=self.checkout,
            env=self.env(),
            start_new_session=True,
            stdout=self.log_path.open("wb"),
            stderr=subprocess.STDOUT,
        )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def demo_token(self, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            found = re.search(r"API token: (\S+)", self.log())
            if found:
                self.token = found.group(1)
                return self.token
            time.sleep(0.05)
        raise SystemExit(f"{self.checkout}: no demo token printed:\n{self.log()[-3000:]}")

    def wait_ready(self, timeout: float = 300) -> float:
        """Seconds from start until /health answers 200."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return time.perf_counter() - self.started_at
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"{self.checkout}: /health did not answer:\n{self.log()[-3000:]}")

    def post(self, path: str, body: dict, timeout: float = 120) -> httpx.Response:
        """One request on a connection of its own (so successive ones may reach different web workers)."""
        return httpx.post(f"{self.url}/api/{path}", json=body, headers={"Authorization": f"Bearer {self.token}"}, timeout=timeout)

    def wait_indexed(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.post("rag.status", {}).json().get("data", {})
            if status.get("documents") and not status.get("pending"):
                return
            time.sleep(0.5)
        raise SystemExit(f"{self.checkout}: the demo was not indexed in {timeout:.0f} s")

    def search(self, query: str) -> float:
        """Milliseconds for one rag.search."""
        started = time.perf_counter()
        response = self.post("rag.search", {"query": query, "limit": 10})
        if response.status_code != 200:
            raise SystemExit(f"rag.search answered {response.status_code}: {response.text[:300]}")
        return (time.perf_counter() - started) * 1000

    def search_from_every_worker(self, clients: int = 6, each: int = 4) -> None:
        """Searches from `clients` threads at once, so that every web worker has answered some."""

        def client(n: int) -> None:
            for i in range(each):
                self.search(DEMO_QUERIES[(n + i) % len(DEMO_QUERIES)])

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise SystemExit(f"{self.checkout}: config.serve exited with {self.process.returncode}:\n{self.log()[-3000:]}")

    def processes(self) -> dict[int, str]:
        """Every process of this run, by pid: the supervisor's tree and the embedded PostgreSQL's, each with its kind."""
        assert self.process is not None
        parents = process_parents()
        kinds = {pid: kind(pid, parents, self.process.pid) for pid in descendants(self.process.pid, parents)}
        postmaster = postmaster_pid(self.pgdata)
        if postmaster:
            kinds.update(dict.fromkeys(descendants(postmaster, parents), "postgresql"))
        return kinds


def process_parents() -> dict[int, int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # The command name, in parentheses, may hold spaces: the fields after its last ")" are fixed.
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def descendants(root: int, parents: dict[int, int]) -> list[int]:
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kind(pid: int, parents: dict[int, int], supervisor: int) -> str:
    command = cmdline(pid)
    child_of_supervisor = parents.get(pid) == supervisor
    if pid == supervisor:
        return "supervisor (config.serve)"
    if "gunicorn" in command:
        return "gunicorn master" if child_of_supervisor else "gunicorn worker"
    if "celery" in command and " beat" in command:
        return "celery beat"
    if "celery" in command and " worker" in command:
        return "celery worker (main)" if child_of_supervisor else "celery worker (child)"
    if "redis" in command:
        return "redis"
    return "other: " + command[:60]


def postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def memory(pid: int) -> tuple[int, int]:
    """(PSS, RSS) in bytes, from /proc/<pid>/smaps_rollup; (0, 0) for a process that is gone."""
    values = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name in ("Pss", "Rss"):
                values[name] = int(rest.split()[0]) * 1024
    except OSError:
        return 0, 0
    return values.get("Pss", 0), values.get("Rss", 0)


@dataclass
class Footprint:
    by_kind: dict[str, tuple[int, int, int]]  # kind -> (processes, PSS, RSS)

    @property
    def pss(self) -> int:
        return sum(p for _, p, _ in self.by_kind.values())

    @property
    def rss(self) -> int:
        return sum(r for _, _, r in self.by_kind.values())

    @property
    def processes(self) -> int:
        return sum(n for n, _, _ in self.by_kind.values())


def measure(serve: Serve) -> Footprint:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for pid, what in serve.processes().items():
        pss, rss = memory(pid)
        totals[what][0] += 1
        totals[what][1] += pss
        totals[what][2] += rss
    return Footprint({k: (v[0], v[1], v[2]) for k, v in sorted(totals.items())})


def footprint_run(checkout: Path, python: Path) -> Footprint:
    serve = Serve(checkout, python).start()
    try:
        serve.demo_token()
        serve.wait_ready()
        serve.wait_indexed()
        serve.search_from_every_worker()
        time.sleep(2)  # the pool's and the allocator's settling after the last answers
        return measure(serve)
    finally:
        serve.stop()


def mb(n: float) -> str:
    return f"{n / 2**20:.0f} MB"


def python_of(checkout: Path, venv: str) -> Path:
    python = checkout / venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"No {python}: make install VENV={venv} in {checkout} first")
    return python


def median_footprint(runs: list[Footprint]) -> Footprint:
    kinds = sorted({k for run in runs for k in run.by_kind})
    return Footprint(
        {
            k: (
                int(statistics.median(run.by_kind.get(k, (0, 0, 0))[0] for run in runs)),
                int(statistics.median(run.by_kind.get(k, (0, 0, 0))[1] for run in runs)),
                int(statistics.median(run.by_kind.get(k, (0, 0, 0))[2] for run in runs)),
            )
            for k in kinds
        }
    )


def report(label: str, runs: list[Footprint], venv: Path) -> tuple[float, float, int]:
    med = median_footprint(runs)
    total_pss = statistics.median(run.pss for run in runs)
    total_rss = statistics.median(run.rss for run in runs)
    size = venv_size(venv)
    print(f"\n{label}: {runs[0].processes} processes; median of {len(runs)} run(s)")
    print(f"  {'kind':28} {'n':>3} {'PSS':>9} {'RSS':>9}")
    for what, (n, pss, rss) in med.by_kind.items():
        print(f"  {what:28} {n:>3} {mb(pss):>9} {mb(rss):>9}")
    print(
        f"  {'total':28} {'':>3} {mb(total_pss):>9} {mb(total_rss):>9}   (each run's PSS: {', '.join(mb(r.pss) for r in runs)})"
    )
    dev = " (holds development packages: not a default install)" if has_dev_packages(venv) else ""
    print(f"  venv {venv}: {mb(size)}{dev}")
    return total_pss, total_rss, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout measured (default: this one)")
    parser.add_argument("--baseline", type=Path, help="another checkout (a clone of main) measured in the same run")
    parser.add_argument("--venv", default=".venv", help="its venv, relative to it (default: %(default)s)")
    parser.add_argument("--baseline-venv", default=".venv", help="the baseline's venv, relative to it (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M')}")
    checkouts = {"this": args.checkout.resolve()}
    venvs = {"this": args.venv}
    if args.baseline:
        checkouts["baseline"] = args.baseline.resolve()
        venvs["baseline"] = args.baseline_venv
    pythons = {label: python_of(path, venvs[label]) for label, path in checkouts.items()}
    results: dict[str, list[Footprint]] = {label: [] for label in checkouts}
    for run in range(1, args.runs + 1):
        for label in reversed(list(checkouts)):  # the baseline first, then this checkout
            result = footprint_run(checkouts[label], pythons[label])
            results[label].append(result)
            print(f"run {run} {label}: PSS {mb(result.pss)}, RSS {mb(result.rss)}, {result.processes} processes", flush=True)
    figures = {
        label: report(f"{label} ({checkouts[label]})", results[label], checkouts[label] / venvs[label]) for label in checkouts
    }
    if "baseline" in figures:
        (pss, rss, size), (base_pss, base_rss, base_size) = figures["this"], figures["baseline"]
        print(
            f"\nthis / baseline: PSS {pss / base_pss:.2f} ({mb(pss)} / {mb(base_pss)}), "
            f"RSS {rss / base_rss:.2f}, venv {size / base_size:.2f} ({mb(size)} / {mb(base_size)})"
        )


if __name__ == "__main__":
    main()
