"""Run one import job as a worker does, in this process, under a memory limit: `python -m` this module.

Arguments: the job's id and the headroom in bytes. Once Django has started and the parsing libraries
are loaded, the address space is limited (RLIMIT_AS) to what the process already has plus the
headroom, so a bomb meets a MemoryError here instead of the host's out-of-memory killer. Prints, as
JSON, how far the resident set's peak grew above where it was when the job started.
"""

from __future__ import annotations

import json
import resource
import sys


def _status(field: str) -> int:
    """A size from /proc/self/status, in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def main() -> None:
    job_id, headroom = sys.argv[1], int(sys.argv[2])
    import django

    django.setup()
    import bs4  # noqa: F401  (what a warm worker has loaded: the limit is for the import's own work)
    import docx  # noqa: F401
    import markdownify  # noqa: F401
    import pypdf  # noqa: F401
    from django.db import connection

    from documents.ingestion.jobs import import_uploads

    connection.ensure_connection()
    limit = _status("VmSize") + headroom
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak (VmHWM) starts again from here, not from start-up's
    resident = _status("VmRSS")
    import_uploads(job_id=job_id)
    print(json.dumps({"rss_growth": max(0, _status("VmHWM") - resident)}))


if __name__ == "__main__":
    main()
