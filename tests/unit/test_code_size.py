"""The guide's size limits: no function over 60 lines, no class over 300, no module over 600.

``oversized(folder)`` names every offender under a folder; the package and the benchmarks are held
to it here. ``python tests/unit/test_code_size.py <folder>...`` lists a folder's offenders.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import List, Union

import pytest

MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 300
MAX_MODULE_LINES = 600

ROOT = Path(__file__).resolve().parents[2]


Definition = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef]


def _span(node: Definition) -> int:
    """Lines from a definition's first decorator (or its ``def``/``class``) to its last line."""
    first = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
    return (node.end_lineno or node.lineno) - first + 1


def oversized(folder: Path) -> List[str]:
    """One line per module, class or function under ``folder`` over its limit, as
    ``path:line kind name (lines > limit)``, paths from the repository's root (or from
    ``folder``'s parent for a folder outside it)."""
    base = ROOT if folder.is_relative_to(ROOT) else folder.parent
    offenders: List[str] = []
    for path in sorted(folder.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = path.relative_to(base).as_posix()
        module_lines = len(source.splitlines())
        if module_lines > MAX_MODULE_LINES:
            offenders.append(f"{where}:1 module ({module_lines} lines > {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                kind, limit = "function", MAX_FUNCTION_LINES
            elif isinstance(node, ast.ClassDef):
                kind, limit = "class", MAX_CLASS_LINES
            else:
                continue
            lines = _span(node)
            if lines > limit:
                offenders.append(f"{where}:{node.lineno} {kind} {node.name} ({lines} lines > {limit})")
    return offenders


@pytest.mark.parametrize("folder", ["dbt/adapters/dyntable", "benchmarks"])
def test_the_code_keeps_the_size_limits(folder: str) -> None:
    offenders = oversized(ROOT / folder)
    assert not offenders, "over the guide's size limits:\n" + "\n".join(offenders)


def test_what_is_over_a_limit_is_named_and_what_is_at_it_is_not(tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(59))
    (folder / "fits.py").write_text(f"def at_the_limit():\n{body}")  # 60 lines
    (folder / "long.py").write_text(f"@staticmethod\ndef too_long():\n{body}")  # 61 with its decorator
    methods = "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(101))
    (folder / "wide.py").write_text(f"class Wide:\n{methods}" + "\n" * 298)  # 303 lines, 601 in all
    assert oversized(folder) == [
        "pkg/long.py:2 function too_long (61 lines > 60)",
        "pkg/wide.py:1 module (601 lines > 600)",
        "pkg/wide.py:1 class Wide (303 lines > 300)",
    ]


if __name__ == "__main__":
    found = [line for arg in sys.argv[1:] for line in oversized(Path(arg).resolve())]
    print("\n".join(found) or "none over the limits")
    sys.exit(1 if found else 0)
