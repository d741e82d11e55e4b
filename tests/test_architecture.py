"""The house rules on imports (pyproject.toml, [tool.importlinter]): one-way apps, rag's wings, no circles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_code_keeps_every_import_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_cycle_contract_catches_two_modules_importing_each_other(tmp_path):
    # The same contract type as ours, on a package with a circle three levels down.
    package = tmp_path / "house" / "wing"
    package.mkdir(parents=True)
    (tmp_path / "house" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from house.wing import b\n")
    (package / "b.py").write_text("from house.wing import a\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = house\n\n"
        "[importlinter:contract:cycles]\nname = No circles\ntype = acyclic_siblings\nancestors = house\n"
    )
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "No circles BROKEN" in result.stdout
