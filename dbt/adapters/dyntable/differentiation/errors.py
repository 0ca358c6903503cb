"""The one error the differentiation engine raises for queries it cannot maintain incrementally."""

from __future__ import annotations


class NotIncrementalizable(ValueError):
    """The query (or a part of it) has no derivative this engine can compute.

    ``operator`` names the relational operator or construct (``limit``, ``window``, ``function``...),
    ``fragment`` is the SQL text of the offending part, ``reason`` says why in words a data
    engineer can act on. AUTO refresh mode falls back to FULL refreshes; INCREMENTAL mode fails.
    """

    def __init__(self, operator: str, fragment: str, reason: str) -> None:
        super().__init__(f"{operator}: {reason} (in: {fragment})")
        self.operator = operator
        self.fragment = fragment
        self.reason = reason
