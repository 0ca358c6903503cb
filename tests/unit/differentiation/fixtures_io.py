"""Reading the fixture files: blocks separated by blank lines, each an optional ``--`` comment,
one SQL statement ending in ``;`` and the expected lines after it."""

from __future__ import annotations

from pathlib import Path
from typing import List, NamedTuple

FIXTURES = Path(__file__).parent / "fixtures"


class Fixture(NamedTuple):
    title: str
    sql: str
    expected: List[str]


def read_fixtures(name: str) -> List[Fixture]:
    fixtures = []
    title = ""
    for block in (FIXTURES / name).read_text().strip().split("\n\n"):
        lines = block.splitlines()
        comments = [line[2:].strip() for line in lines if line.startswith("--")]
        body = [line for line in lines if not line.startswith("--")]
        title = " ".join(comments) or title
        end = next(i for i, line in enumerate(body) if line.rstrip().endswith(";"))
        sql = "\n".join(body[: end + 1]).rstrip().rstrip(";")
        fixtures.append(Fixture(title, sql, body[end + 1 :]))
    return fixtures
