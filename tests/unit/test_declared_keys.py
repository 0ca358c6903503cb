"""Which declarations in a dbt flat graph key a dynamic table and the relations it reads."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from dbt.adapters.dyntable.dynamic_table.declared_keys import declared_keys, node_relation_name


def model(uid: str, parents: List[str], **extra: Any) -> Dict[str, Any]:
    name = uid.split(".")[-1]
    return {
        "unique_id": uid,
        "resource_type": "model",
        "schema": "s",
        "alias": name,
        "name": name,
        "depends_on": {"nodes": parents},
        "columns": {},
        **extra,
    }


def generic_test(
    uid: str,
    tested: List[str],
    name: str,
    column: Optional[str] = None,
    namespace=None,
    kwargs=None,
    **config: Any,
) -> Dict[str, Any]:
    return {
        "unique_id": uid,
        "resource_type": "test",
        "column_name": column,
        "test_metadata": {"name": name, "namespace": namespace, "kwargs": kwargs or {}},
        "config": {"severity": "ERROR", "where": None, **config},
        "depends_on": {"nodes": tested},
    }


SOURCE = {"resource_type": "source", "schema": "raw", "identifier": "orders", "name": "orders", "columns": {}}


def graph(*nodes: Dict[str, Any]) -> Dict[str, Any]:
    return {"nodes": {n["unique_id"]: n for n in nodes}, "sources": {"source.p.raw.orders": SOURCE}}


def test_tests_and_constraints_through_views_to_sources() -> None:
    flat = graph(
        model("model.p.v", ["source.p.raw.orders"]),  # a view the DT reads: its source counts
        model(
            "model.p.dt",
            ["model.p.v"],
            constraints=[{"type": "primary_key", "columns": ["id"]}],
            columns={"email": {"name": "email", "constraints": [{"type": "unique"}]}},
        ),
        generic_test("test.p.u1", ["source.p.raw.orders"], "unique", "order_id"),
        generic_test(
            "test.p.u2",
            ["source.p.raw.orders"],
            "unique_combination_of_columns",
            namespace="dbt_utils",
            kwargs={"combination_of_columns": ["day", "Region"]},
        ),
        generic_test("test.p.nn", ["source.p.raw.orders"], "not_null", "order_id"),
    )
    assert declared_keys(flat, "model.p.dt") == {
        "s.dt": [["id"], ["email"]],
        "raw.orders": [["order_id"], ["day", "region"]],
    }


def test_what_declares_nothing() -> None:
    flat = graph(
        model("model.p.dt", ["source.p.raw.orders"]),
        generic_test("test.p.where", ["source.p.raw.orders"], "unique", "a", where="a > 0"),
        generic_test("test.p.warn", ["source.p.raw.orders"], "unique", "b", severity="warn"),
        generic_test("test.p.expression", ["source.p.raw.orders"], "unique", "lower(c)"),
        generic_test("test.p.unrelated", ["model.p.other"], "unique", "d"),
        generic_test("test.p.relationship", ["source.p.raw.orders", "model.p.dt"], "unique", "e"),
    )
    assert declared_keys(flat, "model.p.dt") == {}


def test_relation_names_of_dicts_and_objects() -> None:
    class Node:
        schema, alias, name = "S", "Dt", "dt"

    assert node_relation_name(Node()) == "s.dt" == node_relation_name({"schema": "S", "alias": "Dt"})
    assert node_relation_name(SOURCE) == "raw.orders"
