"""Fuzz every endpoint from the OpenAPI schema with schemathesis against a running Cairn.

Passes when no response is a 5xx and every error is `{"error", "message"}` JSON with an
`X-Request-ID` (bench/fuzz_checks.py). Start the server with throttles raised, or 429s crowd out
the rest; `--demo` prints alice's token:

    API_THROTTLE_USER=1000000/min API_THROTTLE_RAG=1000000/min API_THROTTLE_ANON=1000000/min \
      .venv/bin/python -m config.serve --demo --bind 127.0.0.1:8765

Data: whatever the server holds (the demo documents); the requests are generated from /api/schema
(seed 1), and their events written to `--report` (default var/fuzz-events.ndjson).
Takes: about a minute with `--max-examples 150` (4,107 requests).

Reproduce:  .venv/bin/python bench/fuzz.py --url http://127.0.0.1:8765 --token cairn_... --max-examples 150
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", required=True)
    parser.add_argument("--max-examples", type=int, default=60, help="generated cases per endpoint and phase")
    parser.add_argument("--report", default=str(HERE.parent / "var" / "fuzz-events.ndjson"), help="events, one JSON a line")
    args = parser.parse_args()
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "fuzz_checks", "PYTHONPATH": str(HERE)}
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{args.url}/api/schema",
        "--url",
        args.url,
        "-H",
        f"Authorization: Bearer {args.token}",
        "--checks",
        "not_a_server_error,error_has_the_one_json_shape",
        "--max-examples",
        str(args.max_examples),
        "--phases",
        "examples,coverage,fuzzing",
        "--seed",
        "1",
        "--continue-on-failure",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        args.report,
    ]
    return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
