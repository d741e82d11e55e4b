"""The benchmarks, one a script: what each measures and the commands that reproduce its figures.

Reads each script's docstring (its first line, and its "Reproduce:" lines) without importing it, so it
needs neither Django nor a dataset. The figures, and how each benchmark works, are in docs/benchmarks.md.

Reproduce:  .venv/bin/python -m bench      (or: make bench)
"""

from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).resolve().parent


def reproduce_lines(docstring: str) -> list[str]:
    """The docstring's "Reproduce:" section: its first line and the indented lines that follow."""
    lines = docstring.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Reproduce:"):
            commands = [line.removeprefix("Reproduce:").strip()]
            commands += [following.strip() for following in lines[i + 1 :] if following.startswith(" ")]
            return commands
    return []


def main() -> None:
    for path in sorted(HERE.glob("*.py")):
        if path.name == "__main__.py":
            continue
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        commands = reproduce_lines(docstring)
        if not commands:  # a helper of another script (fuzz_checks.py)
            continue
        print(f"bench/{path.name}: {docstring.splitlines()[0]}")
        for command in commands:
            print(f"    {command}")
        print()
    print("Figures against the targets, and how each benchmark works: docs/benchmarks.md")


if __name__ == "__main__":
    main()
