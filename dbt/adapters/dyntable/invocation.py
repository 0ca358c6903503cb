"""What a dbt invocation would cost its models once per process, paid off them
(docs/ARCHITECTURE.md, "Cost of a refresh"): the first model's one-time compilation, done ahead
on a thread of its own, and the collector's full passes over dbt's parsed project, frozen out."""

from __future__ import annotations

import gc
import threading
from typing import Any

from dbt.adapters.events.logging import AdapterLogger

from dbt.adapters.dyntable.dynamic_table.refresh.deltalake_writer import datafusion_sql
from dbt.adapters.dyntable.vocabulary import DYNAMIC_TABLE

logger = AdapterLogger("dyntable")


def compile_ahead(manifest: Any, project_name: str, adapter_type: str) -> None:
    """What is compiled once per process, at the first model that needs it: sqlparse's lexer
    (about 50 regular expressions) and the dynamic_table materialization's Jinja, into dbt's
    template cache, and sqlglot's Spark dialect and the SQL deltalake's MERGE reads, which sqlglot
    loads at their first use. Started when dbt hands over its parsed project, it runs while the
    engine starts, which leaves this process's CPU mostly idle."""
    try:
        from dbt_common.clients.jinja import template_cache
        from sqlparse.lexer import Lexer

        Lexer.get_default_instance()  # type: ignore[no-untyped-call]
        macro = manifest.find_materialization_macro_by_name(project_name, DYNAMIC_TABLE, adapter_type)
        if macro is not None:
            template_cache.get_node_template(macro)
        datafusion_sql("t.`k` <=> s.`k`")
    except Exception as exc:  # noqa: BLE001 - the first model compiles it and reports any error
        logger.debug(f"Compiling ahead of the first dynamic table failed: {exc}")


class ParsedProjectFreeze:
    """dbt's parsed project (manifest, macros), which lives until the invocation ends, hidden
    from the collector's full passes: a pass over it cost whichever model it landed in 100-200
    ms, often the first. A process that froze objects itself is left alone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Whether this invocation froze the process's objects (and so unfreezes them).
        self._froze = False
        #: Whether this invocation has decided to freeze or not (once, not at every refresh).
        self._decided = False

    def freeze(self) -> None:
        with self._lock:
            if self._decided:
                return
            self._decided = True
            # Counting frozen objects walks them all, except where there are none: asked once,
            # before freezing. Counted after freezing and again at the end, they took 18 ms each
            # in a process that had only imported dbt, 7% of the embedded test process's samples.
            self._froze = gc.get_freeze_count() == 0
            if self._froze:
                gc.freeze()

    def thaw(self) -> None:
        """The invocation's end: a process running several invocations collects each one's
        garbage. Unfreezing is all or nothing: whatever froze more since is unfrozen too, which
        only hands objects back to the collector's oldest generation."""
        with self._lock:
            if self._froze:
                gc.unfreeze()
            self._froze, self._decided = False, False
