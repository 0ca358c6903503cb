"""Property: for random queries over 2-4 tables and random DML histories, state(v0) ⊎ Δ == Q(v1).

Queries come from a small grammar whose every relation has the columns (k, v, s), so operators
nest freely: tables and nested views, filters, projections, inner/left/right/full and non-equi
joins, self-joins of CTEs,
[NOT] EXISTS, [NOT] IN (with NULLs), UNION [ALL], INTERSECT, EXCEPT, DISTINCT, GROUP BY with HAVING, global
aggregates, windows and the top-1-per-partition pattern. Values come from tiny domains so keys
collide, duplicate and go NULL. Each example sets the tables' v0 contents itself (INSERT
OVERWRITE), so a failure reproduces and shrinks; the assertion message is the reproduction.
Every example hands the query's v0 result to ``differentiate`` as the DT's stored rows; two
smaller runs aim at the rules reading them: the first row per partition under inserts, and a
window keeping its input's columns under any DML.

Profiles (see conftest.py): ``fast`` by default, ``long`` (5,000 cases) with
``DYNTABLE_HYPOTHESIS_PROFILE=long`` or ``--hypothesis-profile=long``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Callable, Dict, List, Sequence, Set, Tuple

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from dbt.adapters.dyntable.differentiation import aggregate
from dbt.adapters.dyntable.engines.base import Engine
from tests.functional.differentiation.harness import Warehouse

TABLES = ("t0", "t1", "t2", "t3")
COLUMNS = "k bigint, v bigint, s string"
NO_CHECKPOINTS = "tblproperties ('delta.checkpointInterval' = '1000000000')"
# Without checkpoints every write and read replays the whole log: at 1,600 commits a write takes
# 1 s instead of 0.02 s, which made 5,000 cases take hours. Tables past this many commits are
# recreated empty; each example sets its own contents, so nothing else changes.
LOG_LIMIT = 60

keys = st.sampled_from(["null", "0", "1", "2"])
values = st.sampled_from(["null", "0", "1", "2", "3"])
strings = st.sampled_from(["null", "'a'", "'b'"])
rows = st.tuples(keys, values, strings).map(lambda r: f"({', '.join(r)})")
contents = st.lists(rows, max_size=6)


def view_definitions(schema: str) -> Dict[str, str]:
    """Views over the first two tables, one reading the other, created in the engine and handed
    to the planner to inline."""
    return {
        f"{schema}.v_kept": f"select k, v, s from {schema}.t0 where v is not null or s = 'a'",
        f"{schema}.v_joined": (
            f"select a.k, b.v, a.s from {schema}.v_kept a left join {schema}.t1 b on a.k = b.k"
        ),
    }


WINDOW_FUNCTIONS = [
    "sum(v) over (partition by k)",
    "count(*) over (partition by k)",
    "rank() over (partition by k order by v)",
    "lag(v) over (partition by k order by v, s)",
    "dense_rank() over (partition by s order by k)",
]
window_functions = st.sampled_from(WINDOW_FUNCTIONS)
#: What :meth:`Grammar.global_` draws: one row.
GLOBAL = "select count(*) as k, sum(v) as v, max(s) as s from "


def windows_one_row(relation: str) -> bool:
    """Whether ``relation`` is a window straight over a global aggregate: a window over it, ordered
    by its window's column, is a query Sail 0.7 fails to plan (test_engine_conformance.py,
    test_window_ordered_by_a_window_over_one_row), so none is drawn."""
    return any(relation.startswith(f"select k, {f} as v, s from ({GLOBAL}") for f in WINDOW_FUNCTIONS)


#: The aggregates :meth:`Grammar.group` draws when it counts rows.
COUNTED = "count(*) as v, max(s) as s"


def counts_groups(relation: str) -> bool:
    """Whether ``relation`` is a grouped count(*): Sail 0.7 may answer it from Delta statistics,
    and an aggregate straight over it then fails to plan (test_engine_conformance.py,
    test_aggregate_over_a_grouped_count), so none is drawn."""
    return relation.startswith(f"select k, {COUNTED} from ")


class Grammar:
    """Draws relations (SQL text with columns k, v, s) over ``tables`` and ``views``."""

    def __init__(self, draw: Callable, tables: Sequence[str], views: Sequence[str]) -> None:
        self.draw = draw
        self.tables = tables
        self.views = views
        self.aliases = 0

    def alias(self) -> str:
        self.aliases += 1
        return f"r{self.aliases}"

    def predicate(self, a: str) -> str:
        return self.draw(
            st.sampled_from(
                [
                    f"{a}.k = 1",
                    f"{a}.v > 1",
                    f"{a}.s is null",
                    f"{a}.k is not null and {a}.v <= 2",
                    f"{a}.s like 'a%'",
                    f"{a}.v between 1 and 2",
                    f"{a}.k in (0, 2)",
                    f"coalesce({a}.v, 0) < 2",
                ]
            )
        )

    def relation(self, depth: int) -> str:
        if depth == 0 or self.draw(st.integers(0, 3)) == 0:
            relations = list(self.tables) + list(self.views)
            return f"select k, v, s from {self.draw(st.sampled_from(relations))}"
        kind = self.draw(
            st.sampled_from(
                [
                    "filter",
                    "project",
                    "join",
                    "join",
                    "exists",
                    "in_",
                    "union",
                    "distinct",
                    "group",
                    "global_",
                    "window",
                    "top1",
                    "cte",
                ]
            )
        )
        return getattr(self, kind)(depth - 1)

    def sub(self, depth: int) -> Tuple[str, str]:
        a = self.alias()
        return f"({self.relation(depth)}) {a}", a

    def aggregated(self, depth: int) -> Tuple[str, str]:
        """A :meth:`sub` an aggregate reads."""
        a, relation = self.alias(), self.relation(depth)
        assume(not counts_groups(relation))
        return f"({relation}) {a}", a

    def filter(self, depth: int) -> str:
        src, a = self.sub(depth)
        return f"select {a}.k, {a}.v, {a}.s from {src} where {self.predicate(a)}"

    def project(self, depth: int) -> str:
        src, a = self.sub(depth)
        projection = self.draw(
            st.sampled_from(
                [
                    f"{a}.k, {a}.v + 1 as v, upper({a}.s) as s",
                    f"{a}.k % 2 as k, case when {a}.v > 1 then 1 else 0 end as v, concat(coalesce({a}.s, 'n'), 'x') as s",
                    f"coalesce({a}.k, -1) as k, {a}.v, {a}.s",
                ]
            )
        )
        return f"select {projection} from {src}"

    def join(self, depth: int) -> str:
        left, a = self.sub(depth)
        right, b = self.sub(depth)
        kind = self.draw(st.sampled_from(["join", "left join", "right join", "full outer join"]))
        condition = self.draw(
            st.sampled_from(
                [
                    f"{a}.k = {b}.k",
                    f"{a}.k = {b}.k and {a}.v < {b}.v",
                    f"{a}.v >= {b}.k",
                    f"{a}.s = {b}.s",
                ]
            )
        )
        key = self.draw(st.sampled_from([f"coalesce({a}.k, {b}.k)", f"{a}.k", f"{b}.k"]))
        return f"select {key} as k, {b}.v as v, {a}.s as s from {left} {kind} {right} on {condition}"

    def exists(self, depth: int) -> str:
        outer, a = self.sub(depth)
        inner, b = self.sub(depth)
        negation = self.draw(st.sampled_from(["", "not "]))
        return (
            f"select {a}.k, {a}.v, {a}.s from {outer} "
            f"where {negation}exists (select 1 from {inner} where {b}.k = {a}.k)"
        )

    def in_(self, depth: int) -> str:
        outer, a = self.sub(depth)
        inner, b = self.sub(depth)
        negation = self.draw(st.sampled_from(["", "not "]))
        return f"select {a}.k, {a}.v, {a}.s from {outer} where {a}.k {negation}in (select {b}.v from {inner})"

    def union(self, depth: int) -> str:
        operator = self.draw(st.sampled_from(["union all", "union", "intersect", "except"]))
        return (
            f"select k, v, s from ({self.relation(depth)} {operator} {self.relation(depth)}) {self.alias()}"
        )

    def distinct(self, depth: int) -> str:
        src, a = self.sub(depth)
        return f"select distinct {a}.k, {a}.v, {a}.s from {src}"

    def group(self, depth: int) -> str:
        src, a = self.aggregated(depth)
        # HAVING names the input columns qualified: Sail resolves a bare `v` to the output alias.
        aggregates = self.draw(
            st.sampled_from(
                [
                    COUNTED,
                    "sum(v) as v, min(s) as s",
                    "count(distinct v) as v, cast(bool_or(s = 'a') as string) as s",
                    "cast(avg(v) * 2 as bigint) as v, cast(count(s) as string) as s",
                ]
            )
        )
        having = self.draw(st.sampled_from(["", " having count(*) > 1", f" having sum({a}.v) is not null"]))
        return f"select k, {aggregates} from {src} group by k{having}"

    def global_(self, depth: int) -> str:
        src, _ = self.aggregated(depth)
        return f"{GLOBAL}{src}"

    def window(self, depth: int) -> str:
        a, relation = self.alias(), self.relation(depth)
        assume(not windows_one_row(relation))
        return f"select k, {self.draw(window_functions)} as v, s from ({relation}) {a}"

    def cte(self, depth: int) -> str:
        """A CTE read twice: inlined at each reference, a self-join of the same subplan."""
        name = self.alias()
        # Wrapped in a subquery: Spark does not take WITH as an operand of UNION.
        return (
            f"select k, v, s from (with {name} as ({self.relation(depth)}) "
            f"select a.k, b.v, a.s from {name} a join {name} b on a.k = b.k and a.v <=> b.v) {self.alias()}"
        )

    def top1(self, depth: int) -> str:
        src, _ = self.sub(depth)
        return (
            f"select k, v, s from (select k, v, s, row_number() over (partition by k order by v, s) "
            f"as rn from {src}) {self.alias()} where rn = 1"
        )


def dml_for(table: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(rows, min_size=1, max_size=3).map(lambda rs: f"insert into {table} values {', '.join(rs)}"),
        st.tuples(st.sampled_from(["k", "v"]), values).map(
            lambda c: f"delete from {table} where {c[0]} = {c[1]}"
        ),
        st.just(f"delete from {table} where s is null"),
        st.tuples(keys, values).map(lambda c: f"update {table} set v = {c[1]} where k = {c[0]}"),
        st.tuples(values, keys).map(lambda c: f"update {table} set k = {c[1]} where v = {c[0]}"),
        st.just(f"update {table} set s = 'b' where s = 'a'"),
    )


@st.composite
def scenarios(draw: Callable, schema: str) -> Tuple[str, Dict[str, List[str]], List[str], str]:
    count = draw(st.integers(2, 4))
    tables = [f"{schema}.{t}" for t in TABLES[:count]]
    query = Grammar(draw, tables, list(view_definitions(schema))).relation(draw(st.integers(1, 3)))
    initial = {t: draw(contents) for t in tables}
    history: List[str] = []
    for _ in range(draw(st.integers(0, 4))):
        history.append(draw(dml_for(draw(st.sampled_from(tables)))))
    resolver = draw(st.sampled_from(["except-all", "grouped-counts", "file-sets"]))
    return query, initial, history, resolver


@st.composite
def first_row_scenarios(draw: Callable, schema: str) -> Tuple[str, Dict[str, List[str]], List[str], str]:
    """The first row per partition over a random relation, under inserts only: the histories that
    fold into the DT's stored first rows (top_one.py), which the general scenarios rarely draw."""
    tables = [f"{schema}.{t}" for t in TABLES[:2]]
    src = Grammar(draw, tables, list(view_definitions(schema))).relation(draw(st.integers(0, 2)))
    partition = draw(st.sampled_from(["k", "s", "k, s"]))
    order = draw(st.sampled_from(["v, s, k", "v desc, s, k", "v nulls last, k desc, s"]))
    query = (
        f"select k, v, s from (select k, v, s, row_number() over (partition by {partition} order by {order}) "
        f"as rn from ({src}) r0) r1 where rn = 1"
    )
    initial = {t: draw(contents) for t in tables}
    history = [
        f"insert into {draw(st.sampled_from(tables))} values {', '.join(draw(st.lists(rows, min_size=1, max_size=4)))}"
        for _ in range(draw(st.integers(1, 3)))
    ]
    resolver = draw(st.sampled_from(["except-all", "grouped-counts", "file-sets"]))
    return query, initial, history, resolver


@st.composite
def stored_window_scenarios(draw: Callable, schema: str) -> Tuple[str, Dict[str, List[str]], List[str], str]:
    """A window keeping its input's columns over a random relation, under any DML: the DT stores
    the window's rows, so the old side of the touched partitions is read from them (window.py);
    the general scenarios' windows replace ``v`` and so never store theirs."""
    tables = [f"{schema}.{t}" for t in TABLES[:2]]
    src = Grammar(draw, tables, list(view_definitions(schema))).relation(draw(st.integers(0, 2)))
    assume(not windows_one_row(src))
    query = f"select k, v, s, {draw(window_functions)} as w from ({src}) r0"
    initial = {t: draw(contents) for t in tables}
    history = [draw(dml_for(draw(st.sampled_from(tables)))) for _ in range(draw(st.integers(1, 3)))]
    resolver = draw(st.sampled_from(["except-all", "grouped-counts", "file-sets"]))
    return query, initial, history, resolver


@st.composite
def changed_input_scenarios(
    draw: Callable, schema: str
) -> Tuple[str, Dict[str, List[str]], List[str], List[str]]:
    """A GROUP BY over an inner join of two tables of which the DML changes one, the other
    written in more files (the larger by bytes): where a group key is a column of the changed
    table, the touched groups are read off its change (changed_input.py). Returns the query,
    the initial rows, the unchanged table's further inserts, and the DML."""
    tables = [f"{schema}.{t}" for t in TABLES[:2]]
    changed, unchanged = draw(st.permutations(tables))
    sides = [
        draw(st.sampled_from([f"select k, v, s from {t}", f"select k, v, s from {t} where v is not null"]))
        for t in tables
    ]
    condition = draw(st.sampled_from(["a.k = b.k", "a.k = b.k and a.v < b.v", "a.s = b.s", "a.v >= b.k"]))
    key = draw(st.sampled_from(["a.k", "b.k"]))
    join = f"select {key} as k, b.v as v, a.s as s from ({sides[0]}) a join ({sides[1]}) b on {condition}"
    by = draw(st.sampled_from(["k", "k, s"]))
    aggregates = draw(st.sampled_from(["count(*) as n, sum(v) as sv", "max(v) as hi, avg(v) as mean"]))
    query = f"select {by}, {aggregates} from ({join}) r0 group by {by}"
    initial = {t: draw(contents) for t in tables}
    more = st.lists(rows, min_size=1, max_size=3).map(
        lambda rs: f"insert into {unchanged} values {', '.join(rs)}"
    )
    extra = draw(st.lists(more, min_size=2, max_size=3))
    history = [draw(dml_for(changed)) for _ in range(draw(st.integers(1, 2)))]
    return query, initial, extra, history


#: Aggregates a checked fold takes (aggregate.fold_checked), each with what the oracle below
#: needs of it: (kind, input column index in (k, v, s), whether its sum is a double).
FOLDED_AGGREGATES = {
    "count(*) as n, sum(v) as sv, max(v) as hi, min(s) as lo": [
        ("count_star", 0, False),
        ("sum", 1, False),
        ("max", 1, False),
        ("min", 2, False),
    ],
    "sum(v) as sv, max(s) as hi": [("sum", 1, False), ("max", 2, False)],  # no count(*)
    "count(*) as n, count(v) as nv, sum(cast(v as double)) as dv, min(v) as lo": [
        ("count_star", 0, False),
        ("count", 1, False),
        ("sum", 1, True),
        ("min", 1, False),
    ],
}


@st.composite
def folded_group_scenarios(
    draw: Callable, schema: str
) -> Tuple[str, str, str, Dict[str, List[str]], List[str], str]:
    """A GROUP BY k of aggregates a checked fold takes, over a random relation, under any DML:
    the DT stores the groups and AUTO may recompute (aggregate.fold_checked)."""
    tables = [f"{schema}.{t}" for t in TABLES[:2]]
    src = Grammar(draw, tables, list(view_definitions(schema))).relation(draw(st.integers(0, 2)))
    assume(not counts_groups(src))
    aggregates = draw(st.sampled_from(sorted(FOLDED_AGGREGATES)))
    query = f"select k, {aggregates} from ({src}) r0 group by k"
    initial = {t: draw(contents) for t in tables}
    history = [draw(dml_for(draw(st.sampled_from(tables)))) for _ in range(draw(st.integers(1, 3)))]
    resolver = draw(st.sampled_from(["except-all", "grouped-counts", "file-sets"]))
    return query, src, aggregates, initial, history, resolver


def unfoldable(aggregates: str, before: Counter, after: Counter) -> List[object]:
    """The groups (keys) whose new row a checked fold cannot tell from the stored row and the
    change of the input rows ``before`` -> ``after``: a delete takes away the extreme and nothing
    as far is inserted, the last non-null summand (or any, of a double) goes with none inserted,
    or, without count(*), a group gains no row."""
    found = []
    for key in {row[0] for row in before + after}:
        old = [r for r in before.elements() if r[0] == key]
        inserted = list((Counter(r for r in after.elements() if r[0] == key) - Counter(old)).elements())
        deleted = list((Counter(old) - Counter(r for r in after.elements() if r[0] == key)).elements())
        if not inserted and not deleted:
            continue
        specs = FOLDED_AGGREGATES[aggregates]
        counted = any(kind == "count_star" for kind, _, _ in specs)
        if counted and len(old) + len(inserted) - len(deleted) == 0:
            continue  # the group goes away
        if not counted and not inserted:
            found.append(key)
            continue
        for kind, column, double in specs:
            gone = [r[column] for r in deleted if r[column] is not None]
            new = [r[column] for r in inserted if r[column] is not None]
            held = [r[column] for r in old if r[column] is not None]
            if kind == "sum" and gone and (double or not new):
                found.append(key)
            elif kind in ("min", "max") and gone:
                pick = max if kind == "max" else min
                stored, removed = pick(held), pick(gone)
                beyond = (removed < stored) if kind == "max" else (removed > stored)
                replaced = bool(new) and pick(new + [removed]) == pick(new)
                if not beyond and not replaced:
                    found.append(key)
    return found


SCHEMA = f"dd_prop_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def property_warehouse(engine: Engine) -> Warehouse:
    warehouse = Warehouse(engine, schema=SCHEMA)
    for table in TABLES:
        create_source(warehouse, table)
    for view, sql in view_definitions(SCHEMA).items():
        warehouse.view(view.split(".")[1], sql)
    return warehouse


def create_source(warehouse: Warehouse, table: str) -> None:
    # Sail 0.7.2 cannot read VERSION AS OF a version older than the latest checkpoint
    # ("Missing commit file"), so the sources take none.
    warehouse.table(table, COLUMNS, properties=NO_CHECKPOINTS)


def with_short_log(warehouse: Warehouse, qualified: str) -> None:
    if warehouse.version(qualified) > LOG_LIMIT:
        warehouse.engine.execute(f"drop table {qualified}")
        create_source(warehouse, qualified.split(".")[1])


def only_inserts(history: Sequence[str], tables: Sequence[str]) -> Set[str]:
    """Tables that every statement touching them inserts into: the resolver may treat them as
    append-only, which switches on the insert-only specialisations."""
    return {
        t for t in tables if all(s.startswith(f"insert into {t} ") for s in history if f" {t} " in f" {s} ")
    }


@given(scenario=scenarios(SCHEMA))
def test_derivative_matches_recomputation(property_warehouse: Warehouse, scenario) -> None:
    check_scenario(property_warehouse, scenario)


@settings(max_examples=max(25, settings.default.max_examples // 4))
@given(scenario=first_row_scenarios(SCHEMA))
def test_first_rows_fold_inserts_like_recomputation(property_warehouse: Warehouse, scenario) -> None:
    check_scenario(property_warehouse, scenario)


@settings(max_examples=max(25, settings.default.max_examples // 4))
@given(scenario=stored_window_scenarios(SCHEMA))
def test_stored_windows_read_old_partitions_like_recomputation(
    property_warehouse: Warehouse, scenario
) -> None:
    check_scenario(property_warehouse, scenario)


@settings(max_examples=max(25, settings.default.max_examples // 4))
@given(scenario=folded_group_scenarios(SCHEMA))
def test_checked_folds_match_recomputation_or_refuse_exactly_where_they_cannot_tell(
    property_warehouse: Warehouse, scenario
) -> None:
    """The checked fold's delta equals the recomputation's, or the query fails its check; it
    fails exactly where some group's new row cannot be told from its stored row and the change."""
    query, src, aggregates, initial, history, resolver = scenario
    set_contents(property_warehouse, initial)
    before = property_warehouse.rows(src)
    reproduction = f"initial rows: {initial}\nresolver: {resolver}\nquery: {query}\nDML: {history}\n"
    try:
        property_warehouse.check(
            query, history, views=view_definitions(SCHEMA), resolver=resolver, stored=True, checked_fold=True
        )
        refused = False
    except AssertionError as error:
        raise AssertionError(reproduction + str(error)) from None
    except Exception as error:  # noqa: BLE001 - the engine's error, whichever class its client raises
        if aggregate.UNFOLDABLE not in str(error):
            raise
        refused = True
    untold = unfoldable(aggregates, before, property_warehouse.rows(src))
    event("refused" if refused else "folded")
    assert refused == bool(untold), reproduction + f"refused: {refused}; groups it cannot tell: {untold}"


@settings(max_examples=max(25, settings.default.max_examples // 4))
@given(scenario=changed_input_scenarios(SCHEMA))
def test_groups_over_a_join_read_off_its_changed_input_match_recomputation(
    property_warehouse: Warehouse, scenario
) -> None:
    query, initial, extra, history = scenario
    set_contents(property_warehouse, initial)
    for statement in extra:
        property_warehouse.engine.execute(statement)
    reproduction = f"initial rows: {initial}\nthen: {extra}\n"
    try:
        outcome = property_warehouse.check(query, history, resolver="file-sets", stored=True)
    except AssertionError as error:
        raise AssertionError(reproduction + str(error)) from None
    narrowed = aggregate.STORED_NARROWED_RULE in outcome.delta.applied.values()
    event("touched groups read off the changed input" if narrowed else "touched groups read off ΔQ")


def set_contents(property_warehouse: Warehouse, initial: Dict[str, List[str]]) -> None:
    for table, table_rows in initial.items():
        with_short_log(property_warehouse, table)
        if table_rows:
            property_warehouse.engine.execute(f"insert overwrite {table} values {', '.join(table_rows)}")
        else:
            property_warehouse.engine.execute(f"insert overwrite {table} select * from {table} where false")


def check_scenario(property_warehouse: Warehouse, scenario) -> None:
    query, initial, history, resolver = scenario
    set_contents(property_warehouse, initial)
    reproduction = f"initial rows: {initial}\nresolver: {resolver}\n"
    try:
        outcome = property_warehouse.check(
            query,
            history,
            views=view_definitions(SCHEMA),
            insert_only=only_inserts(history, list(initial)),
            resolver=resolver,
            stored=True,  # the query's result before the history, as a DT holds it
        )
    except AssertionError as error:
        raise AssertionError(reproduction + str(error)) from None
    narrowed = {aggregate.NARROWED_RULE, aggregate.STORED_NARROWED_RULE}
    if narrowed & set(outcome.delta.applied.values()):
        event("touched groups read off a join's changed input")
