"""Container health checks (docker-compose.yml): `python -m config.healthcheck web|beat`, exit 0 when healthy.

Each check runs in a fresh process every few seconds, so it loads no settings and opens no connection but the one it checks.
The worker's check is Celery's own, `celery inspect ping`: it answers only when the worker reads the broker.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def host_header(allowed_hosts: str) -> str:
    """A host name ALLOWED_HOSTS accepts (its first entry), so the check is not refused as a foreign host."""
    first = next((h.strip() for h in allowed_hosts.split(",") if h.strip()), "localhost")
    return "localhost" if first == "*" else first.lstrip(".")


def web(url: str) -> str | None:
    """None when /health answers 200 (database reachable, broker reachable when one is configured), else why not."""
    host = host_header(os.environ.get("ALLOWED_HOSTS", "localhost"))
    request = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return None if response.status == 200 else f"{url} answered {response.status}"
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}: {exc.read()[:300].decode(errors='replace')}"
    except OSError as exc:
        return f"{url} did not answer: {exc}"


def beat(schedule: Path, max_age: float) -> str | None:
    """None when beat wrote its schedule file in the last `max_age` seconds.

    Beat sends the recovery passes every IMPORT_RECOVER_INTERVAL / RAG_RECOVER_INTERVAL seconds (15) and
    writes its schedule file at most every 3 minutes while it does; a beat that is stuck stops writing it.
    The file may carry a suffix its database module adds (`.db`, `.dat`).
    """
    files = [p for p in schedule.parent.glob(f"{schedule.name}*") if p.is_file()]
    if not files:
        return f"no schedule file at {schedule} yet"
    age = time.time() - max(p.stat().st_mtime for p in files)
    return None if age <= max_age else f"{schedule} was last written {age:.0f} s ago (more than {max_age:.0f} s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m config.healthcheck", description=__doc__.splitlines()[0] if __doc__ else None
    )
    checks = parser.add_subparsers(dest="check", required=True)
    web_check = checks.add_parser("web", help="GET /health")
    web_check.add_argument("--url", default="http://127.0.0.1:8000/health")
    beat_check = checks.add_parser("beat", help="beat's schedule file is fresh")
    beat_check.add_argument("--schedule", type=Path, required=True)
    beat_check.add_argument("--max-age", type=float, default=300, help="seconds")
    args = parser.parse_args(argv)
    problem = web(args.url) if args.check == "web" else beat(args.schedule, args.max_age)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
