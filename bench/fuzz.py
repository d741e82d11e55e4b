"""Fuzz a running Cairn: every endpoint from the OpenAPI schema, /mcp's JSON-RPC, and malformed HTTP on raw sockets.

Three phases, each checking every response: no 5xx, and every error under /api/ (and /mcp, and every
refusal gunicorn makes itself) JSON with an `X-Request-ID`:

- the API: schemathesis over /api/schema (examples, coverage and fuzzing phases, seed 1), with the
  checks of bench/fuzz_checks.py, its events written to `--report`;
- /mcp: `--mcp-cases` generated bodies (tool calls with generated arguments, other and malformed
  messages, batches, nesting up to 200,000 levels, bytes that are not JSON) under varied Accept and
  Content-Type headers; a 200 hiding a tool's `server_error` fails too (bench/fuzz_wire.py);
- the wire: `--wire-cases` requests gunicorn must refuse or survive (headers over its limits, control
  characters, bad request lines, invalid chunked encoding and framing), each on its own socket.

It prints each phase's cases and statuses, the total, and the command, and exits 1 on any failure.
Start the server with throttles raised, or 429s crowd out the rest; `--demo` prints alice's token:

    API_THROTTLE_USER=1000000/min API_THROTTLE_RAG=1000000/min API_THROTTLE_ANON=1000000/min \
      .venv/bin/python -m config.serve --demo --bind 127.0.0.1:8765

Data: whatever the server holds (the demo documents). Takes: about two minutes at the defaults.

Reproduce:  .venv/bin/python bench/fuzz.py --url http://127.0.0.1:8765 --token cairn_... --max-examples 150 --mcp-cases 2000 --wire-cases 2000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fuzz_wire import Tally, fuzz_mcp, fuzz_wire  # noqa: E402  (a sibling script's module, found through sys.path)


def fuzz_api(url: str, token: str, max_examples: int, report: Path) -> Tally:
    """schemathesis over the schema: its tally, the statuses read from its events; its failures' output."""
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "fuzz_checks", "PYTHONPATH": str(HERE)}
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{url}/api/schema",
        "--url",
        url,
        "-H",
        f"Authorization: Bearer {token}",
        "--checks",
        "not_a_server_error,error_has_the_one_json_shape",
        "--max-examples",
        str(max_examples),
        "--phases",
        "examples,coverage,fuzzing",
        "--seed",
        "1",
        "--continue-on-failure",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    tally = Tally()
    text = report.read_text() if report.exists() else ""
    tally.statuses = Counter(int(code) for code in re.findall(r'"status_code":\s*(\d+)', text))
    tally.cases = sum(tally.statuses.values())
    if result.returncode != 0:
        tally.failures.append(result.stdout[-4000:])
    return tally


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--token", required=True)
    parser.add_argument("--max-examples", type=int, default=60, help="schemathesis: generated cases per endpoint and phase")
    parser.add_argument("--mcp-cases", type=int, default=1000, help="generated /mcp bodies")
    parser.add_argument("--wire-cases", type=int, default=1000, help="generated malformed requests on raw sockets")
    parser.add_argument(
        "--report", default=str(HERE.parent / "var" / "fuzz-events.ndjson"), help="schemathesis's events, one JSON a line"
    )
    args = parser.parse_args()
    report = Path(args.report)
    report.parent.mkdir(parents=True, exist_ok=True)

    phases: dict[str, Tally] = {}
    for name, run in [
        ("api", lambda: fuzz_api(args.url, args.token, args.max_examples, report)),
        ("mcp", lambda: fuzz_mcp(args.url, args.token, args.mcp_cases)),
        ("wire", lambda: fuzz_wire(args.url, args.token, args.wire_cases)),
    ]:
        started = time.monotonic()
        phases[name] = run()
        phases[name].seconds = time.monotonic() - started
    for name, tally in phases.items():
        print(f"{name}: {json.dumps(tally.summary())}")
        for failure in tally.failures[:10]:
            print(f"  FAILED {failure}")
    total = sum(tally.cases for tally in phases.values())
    server_errors = sum(count for tally in phases.values() for status, count in tally.statuses.items() if status >= 500)
    failures = sum(len(tally.failures) for tally in phases.values())
    shown = [arg if arg != args.token else "cairn_..." for arg in sys.argv[1:]]
    print(f"command: .venv/bin/python bench/fuzz.py {shlex.join(shown)}")
    print(
        json.dumps(
            {"total": total, "server_errors": server_errors, "failures": failures, **{k: v.summary() for k, v in phases.items()}}
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
