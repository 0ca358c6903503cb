"""The dynamic_table materialization through dbt, on the embedded engine.

A three-DT chain over two raw Delta tables: a join, an aggregate over it, and a filter over that.
After every kind of change each DT must equal its query at its recorded data timestamp.
"""

from __future__ import annotations

import gc
import json
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from dbt.task.compile import CompileRunner
from dbt.tests.util import run_dbt, run_dbt_and_capture, write_file
from dbt_common.clients import jinja
from deltalake import DeltaTable

from dbt.adapters.dyntable.dynamic_table.refresh.pipeline import EMPTY_KEPT
from dbt.adapters.dyntable.impl import DyntableAdapter
from tests.functional.dynamic_table.dvs import assert_dvs, history, metadata, project_engine
from tests.functional.runner.test_runner import dyntable
from tests.functional.sources import raw_sources

pytestmark = pytest.mark.jvm_ci

ORDERS_DT = """
{{ config(materialized='dynamic_table', target_lag='1 minute', refresh_mode='incremental') }}
select o.order_id, o.customer_id, o.amount, c.name, c.country
from {{ source('raw', 'orders') }} as o
join {{ source('raw', 'customers') }} as c on o.customer_id = c.customer_id
"""

REVENUE_DT = """
{{ config(materialized='dynamic_table', target_lag='downstream', refresh_mode='incremental') }}
select country, count(*) as orders, sum(amount) as revenue
from {{ ref('orders_dt') }}
group by country
"""

BIG_DT = """
{{ config(materialized='dynamic_table', target_lag='5 minutes') }}
select country, revenue from {{ ref('revenue_dt') }} where revenue > 100
"""

SOURCES = raw_sources("orders", "customers")

MODELS = ["orders_dt", "revenue_dt", "big_dt"]


@pytest.fixture(scope="class")
def models():
    return {
        "orders_dt.sql": ORDERS_DT,
        "revenue_dt.sql": REVENUE_DT,
        "big_dt.sql": BIG_DT,
        "sources.yml": SOURCES,
    }


@pytest.fixture(scope="class")
def raw(project):
    schema = f"{project.test_schema}_raw"
    project.run_sql(f"create schema if not exists {schema}")
    project.run_sql(
        f"create table {schema}.customers (customer_id bigint, name string, country string) using delta"
    )
    project.run_sql(
        f"create table {schema}.orders (order_id bigint, customer_id bigint, amount double) using delta"
    )
    project.run_sql(
        f"insert into {schema}.customers values (1, 'ada', 'GB'), (2, 'grace', 'US'), "
        "(3, 'edsger', 'NL'), (4, 'barbara', 'US')"
    )
    project.run_sql(
        f"insert into {schema}.orders values (10, 1, 50.0), (11, 1, 70.0), (12, 2, 30.0), "
        "(13, 3, 200.0), (14, 3, 200.0), (15, null, 5.0)"
    )
    yield schema
    project.run_sql(f"drop schema if exists {schema} cascade")


def assert_all_dvs(project, warehouse):
    for model in MODELS:
        assert_dvs(project, warehouse, model)


def last_actions(warehouse, project):
    return {m: history(warehouse, f"{project.test_schema}.{m}")[-1].refresh_action for m in MODELS}


def write_with_hook(project, hook: str, statement: str) -> None:
    """Rewrite revenue_dt with ``hook`` (pre_hook, post_hook) running ``statement``."""
    model = "{{ config(" + hook + '="' + statement + '") }}' + REVENUE_DT
    write_file(model, project.project_root, "models", "revenue_dt.sql")


class TestDynamicTableChain:
    def test_create_then_changes_then_no_data(self, project, raw, dyntable_warehouse):
        results = run_dbt(["run"])
        assert len(results) == 3
        assert_all_dvs(project, dyntable_warehouse)
        assert set(last_actions(dyntable_warehouse, project).values()) == {"REINITIALIZE"}
        first = history(dyntable_warehouse, f"{project.test_schema}.orders_dt")[-1]
        assert first.refresh_trigger == "CREATION"

        # inserts, an update that moves a customer to another group, deletes, a duplicate row
        project.run_sql(f"insert into {raw}.orders values (16, 4, 500.0), (14, 3, 200.0), (17, 9, 1.0)")
        project.run_sql(f"update {raw}.customers set country = 'GB' where customer_id = 2")
        project.run_sql(f"delete from {raw}.orders where order_id = 10")
        run_dbt(["run"])
        assert_all_dvs(project, dyntable_warehouse)
        actions = last_actions(dyntable_warehouse, project)
        assert actions["orders_dt"] == "INCREMENTAL"
        assert actions["revenue_dt"] == "INCREMENTAL"

        # nothing changed: every DT records NO_DATA and no DT gets a new Delta version
        versions = {m: assert_dvs(project, dyntable_warehouse, m).dt_version for m in MODELS}
        run_dbt(["run"])
        assert set(last_actions(dyntable_warehouse, project).values()) == {"NO_DATA"}
        assert {m: assert_dvs(project, dyntable_warehouse, m).dt_version for m in MODELS} == versions

    def test_a_dt_selected_without_its_upstream_says_what_holds_it_back(
        self, project, raw, dyntable_warehouse
    ):
        run_dbt(["run"])
        project.run_sql(f"insert into {raw}.orders values (18, 1, 900.0)")
        _, output = run_dbt_and_capture(["run", "--select", "revenue_dt"])
        upstream = f"{project.test_schema}.orders_dt"
        row = history(dyntable_warehouse, f"{project.test_schema}.revenue_dt")[-1]
        assert row.refresh_action == "NO_DATA"
        assert row.reason.startswith("no source changed as of ")
        assert row.reason.endswith(
            f"the data timestamp of upstream dynamic table {upstream}, which was not refreshed past it"
        )
        assert f"upstream dynamic table {upstream} was not refreshed in this run" in output
        assert "dbt run --select +revenue_dt" in output
        assert_all_dvs(project, dyntable_warehouse)

    def test_no_data_refresh_runs_no_engine_statement(self, project, raw, dyntable_warehouse):
        """NO_DATA is decided from Delta log metadata alone (docs/ARCHITECTURE.md, "Reading sources")."""
        from datetime import datetime, timezone

        from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
        from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
        from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService

        run_dbt(["run"])
        engine = project_engine(project)
        service = DynamicTableService(engine, dyntable_warehouse, "dyntable_meta")
        frontier = assert_dvs(project, dyntable_warehouse, "orders_dt")
        dt = DynamicTable.from_node(
            {
                "schema": project.test_schema,
                "name": "orders_dt",
                "compiled_code": frontier.definition,
                "config": {"target_lag": "1 minute", "refresh_mode": "incremental"},
            }
        )
        before = engine.statements_run
        result = service.refresh(dt, RefreshRequest(datetime.now(timezone.utc), Trigger.MANUAL))
        assert result.action == "NO_DATA"
        assert engine.statements_run == before

    def test_an_incremental_refresh_reads_each_change_of_the_log_once(
        self, project, raw, dyntable_warehouse, monkeypatch
    ):
        """The interval a refresh reads to decide is the one it differentiates over: the log
        is not diffed again to derive the delta (docs/ARCHITECTURE.md, "Deriving")."""
        from dbt.adapters.dyntable.delta_log import DeltaLog

        run_dbt(["run"])
        project.run_sql(f"insert into {raw}.orders values (19, 2, 40.0)")
        project.run_sql(f"insert into {raw}.customers values (9, 'Ines', 'PT')")
        reads = []
        read_interval = DeltaLog.interval

        def counted(log, v0, v1, **kwargs):
            reads.append((str(log.location), v0, v1))
            return read_interval(log, v0, v1, **kwargs)

        monkeypatch.setattr(DeltaLog, "interval", counted)
        run_dbt(["run", "--select", "orders_dt"])
        assert last_actions(dyntable_warehouse, project)["orders_dt"] == "INCREMENTAL"
        changed = [read for read in reads if read[1] != read[2]]
        assert len(changed) == 2
        assert len(set(changed)) == len(changed), changed
        assert_dvs(project, dyntable_warehouse, "orders_dt")

    def test_a_query_reading_the_clock_equals_it_at_each_data_timestamp(
        self, project, raw, dyntable_warehouse
    ):
        """The clock a query reads is its data timestamp: a later T with no source changed
        recomputes it (docs/ARCHITECTURE.md, "Queries that read the clock")."""
        from datetime import datetime, timedelta, timezone

        from dbt.adapters.dyntable.dynamic_table.lifecycle import RefreshRequest, Trigger
        from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
        from dbt.adapters.dyntable.dynamic_table.service import DynamicTableService

        now = datetime.now(timezone.utc)
        closes = int((now + timedelta(minutes=30)).timestamp() * 1_000_000)
        dt = DynamicTable.from_node(
            {
                "schema": project.test_schema,
                "name": "open_orders_dt",
                "compiled_code": (
                    f"select order_id, amount from {raw}.orders "
                    f"where current_timestamp() < timestamp_micros({closes})"
                ),
                "config": {"target_lag": "1 minute"},
            }
        )
        service = DynamicTableService(project_engine(project), dyntable_warehouse, "dyntable_meta")
        built = service.refresh(dt, RefreshRequest(now, Trigger.MANUAL))
        assert built.action == "REINITIALIZE"
        assert project.run_sql(f"select count(*) from {dt.relation}", fetch="one")[0] > 0
        assert_dvs(project, dyntable_warehouse, "open_orders_dt")

        later = service.refresh(dt, RefreshRequest(now + timedelta(hours=1), Trigger.MANUAL))
        assert (later.action, later.reason) == (
            "FULL",
            "no source changed, but the query reads the clock (current_timestamp()): recomputed as "
            "of the new data timestamp",
        )
        assert project.run_sql(f"select count(*) from {dt.relation}", fetch="one")[0] == 0
        assert assert_dvs(project, dyntable_warehouse, "open_orders_dt").data_timestamp == now + timedelta(
            hours=1
        )

    def test_a_delta_failing_an_engine_check_commits_nothing_and_leaves_no_intent(
        self, project, raw, dyntable_warehouse, monkeypatch
    ):
        """A rule that yields a bad delta (here: each group's new row twice, its order count
        differing) is caught by the checks of the delta's key, which the engine runs inside the
        MERGE or this process runs on the staged delta (on delta-spark, for a small DT;
        docs/ARCHITECTURE.md, "Applying"): nothing is committed, the intent is withdrawn, and the
        run fails naming the model; the next run refreshes the DT from where it was."""
        from dbt.adapters.dyntable.dynamic_table.refresh import immutable_rows

        project.run_sql(f"insert into {raw}.orders values (50, 1, 5.0)")
        run_dbt(["run"])
        name = f"{project.test_schema}.revenue_dt"
        before = assert_dvs(project, dyntable_warehouse, "revenue_dt")
        mutable_delta = immutable_rows.mutable_delta

        @contextmanager
        def doubling(engine, dt, delta_sql, data_timestamp):
            with mutable_delta(engine, dt, delta_sql, data_timestamp) as (sql, ignored):
                if not dt.name.lower().endswith("revenue_dt"):
                    yield sql, ignored
                    return
                inserts = f"SELECT country, orders + 1, revenue, _dyn_weight FROM ({sql}) AS d WHERE _dyn_weight > 0"
                yield f"SELECT * FROM ({sql}) AS d UNION ALL {inserts}", ignored

        monkeypatch.setattr(immutable_rows, "mutable_delta", doubling)
        # An update, so the groups' delta is merged on their key (inserts alone are accumulated).
        project.run_sql(f"update {raw}.orders set amount = 6.0 where order_id = 50")
        _, output = run_dbt_and_capture(["run"], expect_pass=False)
        assert "revenue_dt" in output and "would hold two rows" in output
        failed = history(dyntable_warehouse, name)[-1]
        assert (failed.state, failed.refresh_action) == ("FAILED", "INCREMENTAL")
        frontier = metadata(dyntable_warehouse).frontier(name.lower())
        assert frontier is not None and frontier.pending is None
        assert frontier.dt_version == before.dt_version
        location = project_engine(project).table_location(project.test_schema, "revenue_dt")
        assert DeltaTable(location).version() == before.dt_version

        monkeypatch.undo()
        run_dbt(["run"])
        assert last_actions(dyntable_warehouse, project)["revenue_dt"] == "INCREMENTAL"
        assert "RECOVERY" not in {row.refresh_trigger for row in history(dyntable_warehouse, name)}
        assert_all_dvs(project, dyntable_warehouse)

    def test_full_refresh_reinitializes(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        project.run_sql(f"delete from {raw}.customers where customer_id = 3")
        run_dbt(["run", "--full-refresh"])
        assert set(last_actions(dyntable_warehouse, project).values()) == {"REINITIALIZE"}
        reasons = {history(dyntable_warehouse, f"{project.test_schema}.{m}")[-1].reason for m in MODELS}
        assert reasons == {"--full-refresh"}
        assert_all_dvs(project, dyntable_warehouse)

    def test_write_during_run_is_not_half_visible(self, project, raw, dyntable_warehouse):
        """A source write landing between two DTs of one run is seen by neither of them."""
        run_dbt(["run"])
        write_with_hook(project, "pre_hook", f"insert into {raw}.orders values (99, 4, 1000.0)")
        project.run_sql(f"insert into {raw}.orders values (40, 2, 10.0)")
        run_dbt(["run"])
        # all three share one data timestamp, and the hook's row is in none of them
        stamps = {assert_dvs(project, dyntable_warehouse, m).data_timestamp for m in MODELS}
        assert len(stamps) == 1
        seen = project.run_sql(
            f"select count(*) from {project.test_schema}.orders_dt where order_id = 99", fetch="one"
        )[0]
        assert seen == 0
        write_file(REVENUE_DT, project.project_root, "models", "revenue_dt.sql")
        run_dbt(["run"])  # the next run picks the row up
        assert_all_dvs(project, dyntable_warehouse)
        assert (
            project.run_sql(
                f"select count(*) from {project.test_schema}.orders_dt where order_id = 99", fetch="one"
            )[0]
            == 1
        )

    def test_a_post_hook_runs_after_the_refresh(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        write_with_hook(project, "post_hook", f"insert into {raw}.orders values (98, 4, 5.0)")
        run_dbt(["run"])
        assert project.run_sql(f"select count(*) from {raw}.orders where order_id = 98", fetch="one")[0] == 1
        assert_all_dvs(project, dyntable_warehouse)

    def test_docs_show_dynamic_tables_in_lineage_with_lag_and_mode(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        catalog = run_dbt(["docs", "generate", "--write-json"])
        manifest = json.loads((Path(project.project_root) / "target" / "manifest.json").read_text())
        revenue = "model.test.revenue_dt"
        assert manifest["parent_map"][revenue] == ["model.test.orders_dt"]
        assert manifest["child_map"][revenue] == ["model.test.big_dt"]
        assert manifest["nodes"][revenue]["config"]["target_lag"] == "downstream"
        table = catalog.nodes[revenue]
        assert table.metadata.type == "dynamic table"
        assert table.stats["target_lag"].value == "downstream"
        assert table.stats["refresh_mode"].value == "incremental"
        stamp = assert_dvs(project, dyntable_warehouse, "revenue_dt").data_timestamp
        assert table.stats["data_timestamp"].value == stamp
        assert catalog.nodes["model.test.big_dt"].stats["target_lag"].value == "5 minutes"

    def test_dbt_run_empty_refreshes_nothing_and_creates_a_missing_dt_empty(
        self, project, raw, dyntable_warehouse
    ):
        """`--empty` reads every source as 0 rows: a DT is not rebuilt to 0 rows (auto), nor
        refused as a changed definition (on_configuration_change: fail) or a query that cannot
        be differentiated (incremental); a missing one is created empty for its readers."""
        run_dbt(["run"])
        project.run_sql(f"insert into {raw}.orders values (50, 2, 300.0)")
        fresh = ORDERS_DT.replace("refresh_mode='incremental'", "on_configuration_change='fail'")
        write_file(fresh, project.project_root, "models", "fresh_dt.sql")
        try:
            before = {m: assert_dvs(project, dyntable_warehouse, m) for m in MODELS}
            _, log = run_dbt_and_capture(["run", "--empty"])
            assert "dbt --empty: not refreshed" in log and "dbt --empty: created empty" in log
            for model, frontier in before.items():
                assert assert_dvs(project, dyntable_warehouse, model) == frontier  # untouched
                last = history(dyntable_warehouse, f"{project.test_schema}.{model}")[-1]
                assert (last.state, last.state_message) == ("SKIPPED", EMPTY_KEPT)
            created = f"{project.test_schema}.fresh_dt"
            assert project.run_sql(f"select count(*) from {created}", fetch="one")[0] == 0
            columns = [
                c.name
                for c in project.adapter.get_columns_in_relation(
                    project.adapter.get_relation(None, project.test_schema, "fresh_dt")
                )
            ]
            assert columns == ["order_id", "customer_id", "amount", "name", "country"]
            assert metadata(dyntable_warehouse).frontier(created) is None

            run_dbt(["run"])  # the first run without --empty builds fresh_dt and refreshes the rest
            assert_all_dvs(project, dyntable_warehouse)
            assert_dvs(project, dyntable_warehouse, "fresh_dt")
            assert history(dyntable_warehouse, created)[-1].refresh_action == "REINITIALIZE"
        finally:
            Path(project.project_root, "models", "fresh_dt.sql").unlink()


class TestAppends:
    """Inserts through a join are appended by the engine (docs/ARCHITECTURE.md, "Applying"):
    duplicate rows go in as often as inserted, and the history counts what was appended."""

    @pytest.fixture(scope="class")
    def models(self):
        return {"orders_dt.sql": ORDERS_DT, "sources.yml": SOURCES}

    def test_inserts_with_duplicates_are_appended_exactly(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        name = f"{project.test_schema}.orders_dt"
        project.run_sql(
            f"insert into {raw}.orders values (20, 2, 1.0), (20, 2, 1.0), (20, 2, 1.0), (21, 9, 4.0)"
        )
        project.run_sql(f"insert into {raw}.orders values (22, 4, 2.5)")
        run_dbt(["run"])
        assert_dvs(project, dyntable_warehouse, "orders_dt")
        last = history(dyntable_warehouse, name)[-1]
        # order 21 has no customer 9, so the join drops it: four rows reach the DT
        assert (last.refresh_action, last.rows_inserted, last.rows_deleted) == ("INCREMENTAL", 4, 0)
        project.run_sql(f"insert into {raw}.orders values (23, 9, 3.0)")
        run_dbt(["run"])
        last = history(dyntable_warehouse, name)[-1]
        assert (last.refresh_action, last.rows_inserted) == ("INCREMENTAL", 0)
        assert last.reason == "sources changed; the query's result did not"
        assert_dvs(project, dyntable_warehouse, "orders_dt")

    def test_the_invocation_unfreezes_what_it_froze(self, project, raw, monkeypatch):
        """dbt's parsed project is frozen from the collector during a run (docs/ARCHITECTURE.md,
        "Cost of a refresh") before its first model compiles, where a full collection landed,
        and given back when it ends: a process may run many."""
        events = []
        freeze, compile_node = gc.freeze, CompileRunner.compile
        monkeypatch.setattr(gc, "freeze", lambda: (events.append("freeze"), freeze()))
        monkeypatch.setattr(
            CompileRunner,
            "compile",
            lambda runner, manifest: (events.append("compile"), compile_node(runner, manifest))[1],
        )
        run_dbt(["run"])
        assert events.count("freeze") == 1 and events.index("freeze") < events.index("compile")
        assert gc.get_freeze_count() == 0

    def test_the_materialization_compiles_before_the_first_model(self, project, raw, monkeypatch):
        """dbt compiles the materialization's Jinja once per process, at the first model: the
        adapter compiles it into dbt's template cache on a thread of its own as soon as dbt hands
        over the parsed project, while the engine starts (docs/ARCHITECTURE.md, "Cost of a
        refresh"), and the models then find it there."""
        handed = []
        set_macro_resolver = DyntableAdapter.set_macro_resolver
        monkeypatch.setattr(
            DyntableAdapter,
            "set_macro_resolver",
            lambda adapter, manifest: (
                handed.append((adapter, manifest)),
                set_macro_resolver(adapter, manifest),
            )[1],
        )
        run_dbt(["run"])
        adapter, manifest = handed[-1]
        macro = manifest.find_materialization_macro_by_name(
            adapter.config.project_name, "dynamic_table", adapter.type()
        )
        jinja.template_cache.clear()
        adapter.set_macro_resolver(manifest)
        for thread in threading.enumerate():
            if thread.name == "dyntable-compile-ahead":
                thread.join()
        assert macro.macro_sql in jinja.template_cache.file_cache

        compiled = []
        get_template = jinja.get_template
        monkeypatch.setattr(
            jinja,
            "get_template",
            lambda string, *a, **k: (compiled.append(string), get_template(string, *a, **k))[1],
        )
        run_dbt(["run"])
        assert compiled and macro.macro_sql not in compiled  # the models compiled, it did not

    def test_a_host_process_freeze_is_left_alone(self, project, raw):
        """A process that froze its own objects (a scheduler's preloaded workers) keeps them
        frozen: the run neither adds to nor unfreezes them."""
        held = [object()]  # a container: tracked by the collector
        gc.freeze()
        try:
            run_dbt(["run"])
            # Frozen objects are tracked, yet in none of the collector's generations.
            assert gc.is_tracked(held) and not any(o is held for o in gc.get_objects())
        finally:
            gc.unfreeze()
        assert any(o is held for o in gc.get_objects())  # the check above can fail


class TestConfigurationChanges:
    @pytest.fixture(scope="class")
    def models(self):
        return {"orders_dt.sql": ORDERS_DT, "sources.yml": SOURCES}

    def _rewrite(self, project, sql):
        write_file(sql, project.project_root, "models", "orders_dt.sql")

    def _explained_changes(self, project) -> str:
        """What `dyntable explain` says changed of the settings (the manifest parsed first)."""
        run_dbt(["parse"])
        explained = " ".join(dyntable(project, "explain", "orders_dt").output.split())
        marker = "settings changed since the last refresh: "
        return explained.split(marker, 1)[1] if marker in explained else ""

    def test_lag_change_applies_without_rebuild(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        assert self._explained_changes(project) == ""
        self._rewrite(project, ORDERS_DT.replace("1 minute", "10 minutes"))
        assert self._explained_changes(project) == (
            "target lag changed from 1 minute to 10 minutes: applied at the next refresh, without a rebuild"
        )
        run_dbt(["run"])
        name = f"{project.test_schema}.orders_dt"
        assert history(dyntable_warehouse, name)[-1].refresh_action == "NO_DATA"
        assert metadata(dyntable_warehouse).graph(name)[name].target_lag == "10 minutes"
        assert self._explained_changes(project) == ""

    def test_refresh_mode_change_rebuilds(self, project, raw, dyntable_warehouse):
        self._rewrite(project, ORDERS_DT.replace("refresh_mode='incremental'", "refresh_mode='full'"))
        assert self._explained_changes(project).startswith(
            "refresh mode changed from incremental to full: the next refresh rebuilds the table;"
        )
        run_dbt(["run"])
        name = f"{project.test_schema}.orders_dt"
        last = history(dyntable_warehouse, name)[-1]
        assert (last.refresh_action, last.reason) == (
            "REINITIALIZE",
            "refresh mode changed from incremental to full",
        )
        assert_dvs(project, dyntable_warehouse, "orders_dt")
        self._rewrite(project, ORDERS_DT)
        run_dbt(["run"])
        assert history(dyntable_warehouse, name)[-1].refresh_action == "REINITIALIZE"
        assert self._explained_changes(project) == ""

    def test_query_change_apply_reinitializes(self, project, raw, dyntable_warehouse):
        self._rewrite(project, ORDERS_DT.replace("c.country", "upper(c.country) as country"))
        run_dbt(["run"])
        last = history(dyntable_warehouse, f"{project.test_schema}.orders_dt")[-1]
        assert (last.refresh_action, last.reason) == ("REINITIALIZE", "definition changed")
        assert_dvs(project, dyntable_warehouse, "orders_dt")

    def test_query_change_continue_keeps_old_definition(self, project, raw, dyntable_warehouse):
        before = project.run_sql(f"select * from {project.test_schema}.orders_dt", fetch="all")
        changed = ORDERS_DT.replace(
            "refresh_mode='incremental'", "refresh_mode='incremental', on_configuration_change='continue'"
        )
        self._rewrite(project, changed.replace("c.name", "lower(c.name) as name"))
        _, log = run_dbt_and_capture(["run"])
        assert "on_configuration_change is 'continue'" in log
        after = project.run_sql(f"select * from {project.test_schema}.orders_dt", fetch="all")
        assert sorted(map(tuple, before)) == sorted(map(tuple, after))

    def test_query_change_fail_stops(self, project, raw, dyntable_warehouse):
        changed = ORDERS_DT.replace(
            "refresh_mode='incremental'", "refresh_mode='incremental', on_configuration_change='fail'"
        )
        self._rewrite(project, changed.replace("o.amount", "o.amount * 2 as amount"))
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert (
            f"Dynamic table {project.test_schema}.orders_dt (model orders_dt): its definition changed "
            "and on_configuration_change is 'fail'"
        ) in " ".join(log.split())


class TestFolderConfig:
    """Dynamic-table settings given for a folder in dbt_project.yml, as a project sets them for
    many models, reach each model; a model's own config() overrides them."""

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {
            "models": {
                "+materialized": "dynamic_table",
                "+target_lag": "7 minutes",
                "+refresh_mode": "full",
                "+max_change_rows": 500000,
            }
        }

    @pytest.fixture(scope="class")
    def models(self):
        body = ORDERS_DT.split("}}", 1)[1]
        return {
            "folder_dt.sql": body,
            "own_dt.sql": "{{ config(refresh_mode='incremental', target_lag='downstream') }}" + body,
            "sources.yml": SOURCES,
        }

    def test_folder_settings_reach_each_model(self, project, raw, dyntable_warehouse):
        run_dbt(["run"])
        graph = metadata(dyntable_warehouse).graph()
        settings = {
            model: (graph[name].target_lag, graph[name].refresh_mode)
            for model in ("folder_dt", "own_dt")
            for name in [f"{project.test_schema}.{model}"]
        }
        assert settings == {"folder_dt": ("7 minutes", "full"), "own_dt": ("downstream", "incremental")}
        explained = " ".join(dyntable(project, "explain", "folder_dt").output.split())
        assert "change fuse: max_change_rows 500000" in explained
        for model in ("folder_dt", "own_dt"):
            assert_dvs(project, dyntable_warehouse, model)


class TestBadConfig:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "bad_lag.sql": "{{ config(materialized='dynamic_table', target_lag='5 minuts') }} select 1 as x",
            "bad_mode.sql": "{{ config(materialized='dynamic_table', target_lag='1 hour', refresh_mode='sometimes') }} select 1 as x",
            "no_lag.sql": "{{ config(materialized='dynamic_table') }} select 1 as x",
        }

    def test_each_bad_config_names_model_key_and_forms(self, project):
        _, log = run_dbt_and_capture(["run"], expect_pass=False)
        assert "Model 'bad_lag': target_lag '5 minuts' is not valid" in log
        assert "'<n> seconds|minutes|hours|days'" in log
        assert "Model 'bad_mode': refresh_mode 'sometimes' is not valid. Use auto | full | incremental" in log
        assert "Model 'no_lag': a dynamic table needs target_lag" in log
        for model in ("bad_lag", "bad_mode", "no_lag"):
            assert project.run_sql(f"show tables in {project.test_schema} like '{model}'", fetch="all") == []


class TestInitializeOnSchedule:
    @pytest.fixture(scope="class")
    def models(self):
        return {
            "orders_dt.sql": ORDERS_DT.replace("refresh_mode='incremental'", "initialize='on_schedule'"),
            "sources.yml": SOURCES,
        }

    def test_dbt_run_creates_it_empty_and_the_next_refresh_fills_it(self, project, raw, dyntable_warehouse):
        _, log = run_dbt_and_capture(["run"])
        assert "SKIPPED" in log
        name = f"{project.test_schema}.orders_dt"
        assert project.run_sql(f"select count(*) from {name}", fetch="one")[0] == 0
        [created] = history(dyntable_warehouse, name)
        assert (created.state, created.refresh_action) == ("SKIPPED", None)
        assert "on_schedule" in created.reason

        run_dbt(["run"])  # a later refresh (here dbt's; the runner's first tick alike) initializes it
        last = history(dyntable_warehouse, name)[-1]
        assert (last.refresh_action, last.reason) == (
            "REINITIALIZE",
            "first refresh (initialize: on_schedule)",
        )
        assert_dvs(project, dyntable_warehouse, "orders_dt")
        assert project.run_sql(f"select count(*) from {name}", fetch="one")[0] > 0


@pytest.mark.skip_profile("embedded", reason="the embedded engine has no change data feed")
class TestChangeDataFeedSources:
    """Sources with Delta's change data feed on: an engine that has the feed reads rewrites
    (updates, deletes) from it instead of diffing the rewritten files, and the DTs stay equal to
    their queries."""

    @pytest.fixture(scope="class")
    def raw(self, project):
        schema = f"{project.test_schema}_raw"
        feed = "tblproperties (delta.enableChangeDataFeed = true)"
        project.run_sql(f"create schema if not exists {schema}")
        project.run_sql(
            f"create table {schema}.customers (customer_id bigint, name string, country string) using delta {feed}"
        )
        project.run_sql(
            f"create table {schema}.orders (order_id bigint, customer_id bigint, amount double) using delta {feed}"
        )
        project.run_sql(
            f"insert into {schema}.customers values (1, 'ada', 'GB'), (2, 'grace', 'US'), (3, 'edsger', 'NL')"
        )
        project.run_sql(
            f"insert into {schema}.orders values (10, 1, 50.0), (11, 1, 70.0), (12, 2, 30.0), (13, 3, 200.0)"
        )
        yield schema
        project.run_sql(f"drop schema if exists {schema} cascade")

    @pytest.fixture
    def feed_reads(self, monkeypatch):
        """The (source, interval) pairs refreshes read from a change data feed: the real reads,
        recorded on their way through."""
        from dbt.adapters.dyntable import changes

        reads = []
        original = changes.register_changes_from_cdf

        def recording(spark, capabilities, log, v0, v1, view_name):
            reads.append((log.location.rstrip("/").rsplit("/", 1)[-1], v0, v1))
            return original(spark, capabilities, log, v0, v1, view_name)

        monkeypatch.setattr(changes, "register_changes_from_cdf", recording)
        return reads

    def test_updates_and_deletes_come_from_the_feed(self, project, raw, dyntable_warehouse, feed_reads):
        assert project_engine(project).capabilities.change_data_feed
        run_dbt(["run"])
        assert feed_reads == []  # creation reads the sources whole
        project.run_sql(f"update {raw}.customers set country = 'GB' where customer_id = 2")
        project.run_sql(f"delete from {raw}.orders where order_id = 11")
        project.run_sql(f"update {raw}.orders set amount = 80.0 where order_id = 12")
        run_dbt(["run"])
        actions = last_actions(dyntable_warehouse, project)
        assert actions["orders_dt"] == actions["revenue_dt"] == "INCREMENTAL"
        assert_all_dvs(project, dyntable_warehouse)
        assert {table for table, _, _ in feed_reads} == {"customers", "orders"}

        feed_reads.clear()
        project.run_sql(f"insert into {raw}.orders values (14, 3, 5.0)")
        run_dbt(["run"])
        assert last_actions(dyntable_warehouse, project)["orders_dt"] == "INCREMENTAL"
        assert_all_dvs(project, dyntable_warehouse)
        assert feed_reads == []  # an append is read from its added files
