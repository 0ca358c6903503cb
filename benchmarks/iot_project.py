"""The IoT project of issue 53, shaped as a user builds it from the README: two seeds (devices with
their site and region, and a lookup of device models), a Delta source of sensor readings written
by another tool (the `deltalake` package, as an ingest job writes it: appends, then updates and
deletes), a `table` model joining the seeds (`+file_format: delta`, as the README advises), a
staging view, and nine dynamic tables: joins to the table model, group-bys, a top-1 per device, a
window (the temperature change since the device's previous reading of the day), and dynamic
tables over dynamic tables, two levels deep.

Reusable outside the benchmark (a functional test of the same shape): :func:`models` and
:func:`seeds` give the files, :class:`Readings` writes the source and its changes,
:func:`write_project` writes all of it into a folder with a profile for the embedded engine or
JVM Spark, :class:`DbtProject` runs `dbt` and `dyntable` on it as a user does, and :func:`check`
compares every dynamic table with its query at its data timestamp (``dynamic_table/verify.py``:
its full multiset hash in the engine, then the row-by-row comparison to name the rows of a table
that differs).

    python -m benchmarks.iot_project check <project dir> <target>          # one JSON line
    python -m benchmarks.iot_project read <project dir> <target> <table>   # seconds, one JSON line
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

PROJECT = "iot"
SCHEMA = "iot"
RAW = "raw"
META_SCHEMA = "dyntable_meta"
DEVICES = 2_000
SITES = 40
REGIONS = ("north", "south", "east", "west", "central")
#: The lookup seed: model code, vendor, the temperature a device of that model alarms above.
DEVICE_MODELS = (
    ("TX-100", "thermax", 36.0),
    ("TX-200", "thermax", 38.0),
    ("AQ-1", "aqualog", 35.0),
    ("AQ-2", "aqualog", 37.5),
    ("SN-9", "sensio", 39.0),
    ("SN-12", "sensio", 40.0),
)
#: The readings span this many days from START; later inserts carry on the clock.
DAYS = 30
START = datetime(2026, 11, 1, tzinfo=timezone.utc)
#: One reading in this many has a humidity above 100%: the glitch the big rewrite caps (0.47%).
GLITCH_EVERY = 211
#: The load's files: an ingest job's appends, at least this many rows each, at most LOAD_FILES.
LOAD_FILE_ROWS = 100_000
LOAD_FILES = 20


# -- the data ----------------------------------------------------------------------------------------


def readings(first: int, count: int, per_day: int, devices: int = DEVICES) -> pa.Table:
    """Readings ``first`` .. ``first + count - 1``: each of ``devices`` reports in turn, ``per_day``
    readings a day from START; deterministic, so any writer can produce the same rows."""
    ids = np.arange(first, first + count, dtype=np.int64)
    device = ids * 7919 % devices + 1
    offset_s = ids * 86_400 // per_day
    hour = (offset_s % 86_400) / 3600
    noise = (ids * 2_654_435_761 % 600) / 100 - 3
    temperature = 15 + device % 15 + 6 * np.sin((hour - 9) / 24 * 2 * np.pi) + noise
    humidity = np.where(ids % GLITCH_EVERY == 0, 100 + (ids % 5 + 1) / 10, 35 + ids * 37 % 600 / 10)
    start_us = int(START.timestamp()) * 1_000_000
    return pa.table(
        {
            "reading_id": ids,
            "device_id": device,
            "reading_at": pa.array(start_us + offset_s * 1_000_000, pa.timestamp("us", tz="UTC")),
            "temperature": np.round(temperature, 2),
            "humidity": np.round(humidity, 1),
        }
    )


class Readings:
    """A readings table in Delta, written and changed with the `deltalake` package (an ingest job
    outside dbt). Changes touch the most recent readings, as corrections do."""

    def __init__(self, location: Path, rows: int, devices: int = DEVICES) -> None:
        self.location, self.rows, self.devices = location, rows, devices
        self.per_day = max(1, rows // DAYS)
        self.next_id = rows

    def load(self, configuration: Optional[Dict[str, Optional[str]]] = None, files: int = 0) -> None:
        """``rows`` readings in ``files`` appends (0: an ingest job's, LOAD_FILE_ROWS or more each)."""
        from deltalake import write_deltalake

        files = files or max(1, min(LOAD_FILES, self.rows // LOAD_FILE_ROWS))
        bounds = [self.rows * i // files for i in range(files + 1)]
        for low, high in zip(bounds, bounds[1:]):
            table = readings(low, high - low, self.per_day, self.devices)
            # One file per append, however large (deltalake splits at 100 MB by default).
            write_deltalake(
                str(self.location),
                table,
                mode="append",
                configuration=configuration,
                target_file_size=1 << 40,
            )
            configuration = None

    def insert(self, count: int) -> str:
        from deltalake import write_deltalake

        write_deltalake(
            str(self.location), readings(self.next_id, count, self.per_day, self.devices), mode="append"
        )
        self.next_id += count
        return f"{count:,} new readings appended"

    def _recent(self, count: int, residue: int) -> str:
        """A predicate on about ``count`` readings among the most recent 10·count."""
        window = 10 * count
        return f"reading_id >= {max(0, self.next_id - window)} AND reading_id % 10 = {residue}"

    def correct(self, count: int) -> str:
        from deltalake import DeltaTable

        done = DeltaTable(str(self.location)).update(
            predicate=self._recent(count, 3), updates={"temperature": "temperature + 0.5"}
        )
        return f"{done['num_updated_rows']:,} recent readings corrected"

    def delete(self, count: int) -> str:
        from deltalake import DeltaTable

        done = DeltaTable(str(self.location)).delete(predicate=self._recent(count, 7))
        return f"{done['num_deleted_rows']:,} recent readings deleted"

    def cap_humidity(self) -> str:
        """The big rewrite: a data fix whose predicate matches readings in every file, so deltalake
        rewrites the whole table, into one large file; the values change in 0.47% of the rows."""
        from deltalake import DeltaTable

        table = DeltaTable(str(self.location))
        done = table.update(predicate="humidity > 100", updates={"humidity": "100.0"})
        files = len(DeltaTable(str(self.location)).file_uris())
        return f"humidity capped at 100 in {done['num_updated_rows']:,} readings; the table is now {files} file(s)"

    def update_one(self, reading_id: int) -> str:
        from deltalake import DeltaTable

        DeltaTable(str(self.location)).update(
            predicate=f"reading_id = {reading_id}", updates={"temperature": "temperature - 1.5"}
        )
        return f"reading {reading_id} updated"

    def delete_one(self, reading_id: int) -> str:
        from deltalake import DeltaTable

        DeltaTable(str(self.location)).delete(predicate=f"reading_id = {reading_id}")
        return f"reading {reading_id} deleted"


def devices_csv(moved: Sequence[int] = ()) -> str:
    """The devices seed; each device in ``moved`` sits at the next site (a one-row edit per device)."""
    lines = ["device_id,site,region,model_code"]
    for device in range(1, DEVICES + 1):
        site = (device * 37 + (1 if device in moved else 0)) % SITES
        code = DEVICE_MODELS[device % len(DEVICE_MODELS)][0]
        lines.append(f"{device},site-{site:02d},{REGIONS[site % len(REGIONS)]},{code}")
    return "\n".join(lines) + "\n"


def device_models_csv(warmer: Sequence[str] = ()) -> str:
    """The lookup seed; each model code in ``warmer`` alarms 2 degrees higher (a one-row edit)."""
    lines = ["model_code,vendor,max_temp"]
    lines += [f"{c},{v},{t + (2 if c in warmer else 0):.1f}" for c, v, t in DEVICE_MODELS]
    return "\n".join(lines) + "\n"


def seeds(moved: Sequence[int] = (), warmer: Sequence[str] = ()) -> Dict[str, str]:
    return {"devices.csv": devices_csv(moved), "device_models.csv": device_models_csv(warmer)}


# -- the models --------------------------------------------------------------------------------------


def _dt(lag: str, sql: str) -> str:
    return f"{{{{ config(materialized='dynamic_table', target_lag='{lag}') }}}}\n{sql.strip()}\n"


DYNAMIC_TABLES: Dict[str, Tuple[str, str, str]] = {
    # name: (what it is, target lag, query)
    "readings_enriched": (
        "source ⋈ table model",
        "5 minutes",
        """
select r.reading_id, r.device_id, r.reading_at, r.reading_date, r.temperature, r.humidity,
       d.site, d.region, d.vendor
from {{ ref('stg_readings') }} as r join {{ ref('dim_devices') }} as d on d.device_id = r.device_id""",
    ),
    "site_daily": (
        "source ⋈ table model, group by",
        "downstream",
        """
select d.region, d.site, r.reading_date, count(*) as readings, avg(r.temperature) as avg_temperature,
       max(r.temperature) as max_temperature, avg(r.humidity) as avg_humidity
from {{ ref('stg_readings') }} as r join {{ ref('dim_devices') }} as d on d.device_id = r.device_id
group by d.region, d.site, r.reading_date""",
    ),
    "region_summary": (
        "DT over DT, group by",
        "downstream",
        """
select region, reading_date, sum(readings) as readings, max(max_temperature) as max_temperature,
       count(*) as sites
from {{ ref('site_daily') }} group by region, reading_date""",
    ),
    "region_dashboard": (
        "DT over DT over DT, group by",
        "5 minutes",
        """
select region, count(*) as days, sum(readings) as readings, max(max_temperature) as hottest,
       min(reading_date) as first_day, max(reading_date) as last_day
from {{ ref('region_summary') }} group by region""",
    ),
    "device_daily": (
        "source, group by",
        "5 minutes",
        """
select device_id, reading_date, count(*) as readings, min(temperature) as min_temperature,
       max(temperature) as max_temperature, avg(humidity) as avg_humidity
from {{ ref('stg_readings') }} group by device_id, reading_date""",
    ),
    "vendor_daily": (
        "DT over DT ⋈ table model, group by",
        "15 minutes",
        """
select d.vendor, dd.reading_date, sum(dd.readings) as readings, max(dd.max_temperature) as max_temperature
from {{ ref('device_daily') }} as dd join {{ ref('dim_devices') }} as d on d.device_id = dd.device_id
group by d.vendor, dd.reading_date""",
    ),
    "latest_reading": (
        "source, top-1 per device",
        "1 minute",
        """
select device_id, reading_id, reading_at, temperature, humidity from (
    select device_id, reading_id, reading_at, temperature, humidity,
           row_number() over (partition by device_id order by reading_at desc, reading_id desc) as rn
    from {{ ref('stg_readings') }}) as ranked
where rn = 1""",
    ),
    "hot_devices": (
        "DT over DT ⋈ table model, filter",
        "1 minute",
        """
select l.device_id, d.site, d.vendor, l.reading_at, l.temperature, d.max_temp
from {{ ref('latest_reading') }} as l join {{ ref('dim_devices') }} as d on d.device_id = l.device_id
where l.temperature > d.max_temp""",
    ),
    "temp_change": (
        "source, window (lag)",
        "10 minutes",
        """
select device_id, reading_date, reading_id, reading_at, temperature,
       temperature - lag(temperature) over (
           partition by device_id, reading_date order by reading_at, reading_id) as temperature_change
from {{ ref('stg_readings') }}""",
    ),
}

STG_READINGS = f"""{{{{ config(materialized='view') }}}}
select reading_id, device_id, reading_at, to_date(reading_at) as reading_date, temperature, humidity
from {{{{ source('{RAW}', 'readings') }}}}
where temperature is not null
"""

DIM_DEVICES = """{{ config(materialized='table') }}
select d.device_id, d.site, d.region, d.model_code, m.vendor, m.max_temp
from {{ ref('devices') }} as d join {{ ref('device_models') }} as m on m.model_code = d.model_code
"""


def schema_yml(raw_schema: str = RAW) -> str:
    """The source (its schema may be another, e.g. a test's) and the tests a user declares."""
    return f"""version: 2
sources:
  - name: {RAW}
    schema: {raw_schema}
    tables:
      - name: readings
        columns:
          - name: reading_id
            data_tests: [unique]
models:
  - name: dim_devices
    columns:
      - name: device_id
        data_tests: [unique, not_null]
  - name: latest_reading
    columns:
      - name: device_id
        data_tests: [unique]
"""


def models(raw_schema: str = RAW) -> Dict[str, str]:
    """The model files: name → text."""
    files = {
        "stg_readings.sql": STG_READINGS,
        "dim_devices.sql": DIM_DEVICES,
        "schema.yml": schema_yml(raw_schema),
    }
    files.update({f"{name}.sql": _dt(lag, sql) for name, (_, lag, sql) in DYNAMIC_TABLES.items()})
    return files


# -- a project on disk, run as users run it ----------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Invocation:
    command: str
    wall: float
    started_at: datetime


class DbtProject:
    """A dbt project in a folder, its warehouse inside it, run through the venv's `dbt` and
    `dyntable` executables as subprocesses (each command pays what a user's pays)."""

    def __init__(self, root: Path, target: str) -> None:
        self.root, self.target = root, target
        self.warehouse = root / "warehouse"
        self.bin = Path(sys.executable).parent
        self.env = {**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
        # An installed package has its bytecode; without it every process compiles dbt-dyntable again.
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)

    def location(self, schema: str, table: str) -> Path:
        """Where a table lives: ``<warehouse>/<schema>/<table>`` on both engines (README, "Profile")."""
        return self.warehouse / schema / table

    def run(self, executable: str, *args: str) -> Invocation:
        where = ["--project-dir", str(self.root), "--profiles-dir", str(self.root), "--target", self.target]
        command = [str(self.bin / executable), *args, *where]
        started_at, wall = datetime.now(timezone.utc), time.perf_counter()
        done = subprocess.run(command, cwd=self.root, env=self.env, capture_output=True, text=True)
        wall = time.perf_counter() - wall
        text = f"{executable} {' '.join(args)}"
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
            raise RuntimeError(f"`{text}` failed ({done.returncode}):\n{tail}")
        return Invocation(text, wall, started_at)

    def dbt(self, *args: str) -> Tuple[Invocation, List[Dict[str, Any]]]:
        """Run dbt; the invocation and each node's result (run_results.json) in execution order."""
        invocation = self.run("dbt", *args)
        results = json.loads((self.root / "target" / "run_results.json").read_text())["results"]

        def started(result: Dict[str, Any]) -> str:
            return next((t["started_at"] for t in result.get("timing", []) if t["name"] == "execute"), "")

        return invocation, sorted(results, key=started)

    def history(self, since: Optional[datetime] = None) -> List[Dict[str, Any]]:
        """Rows of dynamic_table_refresh_history (every column this version records) started at or
        after ``since``, oldest first."""
        from deltalake import DeltaTable

        table = DeltaTable(str(self.location(META_SCHEMA, "dynamic_table_refresh_history")))
        rows = table.to_pyarrow_table().to_pylist()
        rows = [r for r in rows if since is None or r["refresh_start_time"] >= since]
        return sorted(rows, key=lambda r: r["refresh_start_time"])

    def check(self) -> List[Dict[str, Any]]:
        """:func:`check` in a process of its own (JVM Spark's local metastore serves one process)."""
        checks: List[Dict[str, Any]] = self._in_process_of_its_own("check")
        return checks

    def read_seconds(self, table: str) -> float:
        """:func:`read_seconds` in a process of its own."""
        return float(self._in_process_of_its_own("read", table))

    def _in_process_of_its_own(self, *args: str) -> Any:
        env = {
            **self.env,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), self.env.get("PYTHONPATH")])),
        }
        command = [
            sys.executable,
            "-m",
            "benchmarks.iot_project",
            args[0],
            str(self.root),
            self.target,
            *args[1:],
        ]
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
            raise RuntimeError(f"`{' '.join(args)}` failed ({done.returncode}):\n{tail}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def write_dbt_project(
    root: Path, target: str, files: Dict[str, str], spark_jars: Optional[Path]
) -> DbtProject:
    """``files`` (paths under ``root`` → text), a dbt_project.yml and a profile for ``target``:
    ``embedded``, or ``jvm`` (`method: session` with ``spark_jars``)."""
    root.mkdir(parents=True)
    (root / "dbt_project.yml").write_text(
        f"name: {PROJECT}\nversion: '1.0'\nconfig-version: 2\nprofile: {PROJECT}\n"
        f"seeds:\n  {PROJECT}:\n    +file_format: delta\n"
        f"models:\n  {PROJECT}:\n    +file_format: delta\n"
    )
    output: Dict[str, object] = {"type": "dyntable", "schema": SCHEMA, "warehouse": str(root / "warehouse")}
    output["threads"] = 1
    if target == "jvm":
        if spark_jars is None:
            raise ValueError("JVM Spark needs a folder of Delta's jars here (spark_jars)")
        output.update(method="session", spark_jars=str(spark_jars))
    (root / "profiles.yml").write_text(json.dumps({PROJECT: {"target": target, "outputs": {target: output}}}))
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return DbtProject(root, target)


def write_project(
    root: Path, rows: int, target: str = "embedded", spark_jars: Optional[Path] = None
) -> Tuple[DbtProject, Readings]:
    """The IoT project in ``root`` with ``rows`` readings loaded (nothing built yet: `dbt build`)."""
    files = {f"models/{name}": text for name, text in models().items()}
    files.update({f"seeds/{name}": text for name, text in seeds().items()})
    project = write_dbt_project(root, target, files, spark_jars)
    source = Readings(project.location(RAW, "readings"), rows)
    source.load()
    return project, source


def check(root: Path, target: str) -> List[Dict[str, Any]]:
    """Every dynamic table of the project against its query at its data timestamp: verify.py's
    full multiset hash in the engine; where that differs, its row-by-row comparison, naming rows."""
    from dbt.adapters.dyntable.dynamic_table.verify import check_dvs, verify

    results: List[Dict[str, Any]] = []
    with _engine(root, target) as (engine, store):
        for name in sorted(store.frontiers()):
            found = verify(engine, store, name, "full")
            detail = found.detail
            if not found.ok and found.compared:
                found = check_dvs(engine, store, name)
                detail = f"{detail}; row by row: {found.detail}"
            results.append({"name": name, "ok": found.ok, "rows": found.rows, "detail": detail})
    return results


def read_seconds(root: Path, target: str, table: str, repeats: int = 5) -> float:
    """One read of ``table`` by the project's engine, warm (a first read aside): the median of
    ``repeats`` reads of every row into this process."""
    times = []
    with _engine(root, target) as (engine, _):
        for _ in range(repeats + 1):
            started = time.perf_counter()
            engine.arrow(f"SELECT * FROM {table}")
            times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


@contextmanager
def _engine(root: Path, target: str) -> Iterator[Tuple[Any, Any]]:
    """The engine and metadata store of the project's ``target``, stopped afterwards."""
    from dbt.adapters.dyntable.connections import EngineRegistry
    from dbt.adapters.dyntable.runner.project import ProjectOptions, load_project

    project = load_project(ProjectOptions(root, root, target))
    try:
        yield project.engine(), project.metadata()
    finally:
        EngineRegistry.stop_all()


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"] and len(sys.argv) == 4:
        print(json.dumps(check(Path(sys.argv[2]).resolve(), sys.argv[3])))
    elif sys.argv[1:2] == ["read"] and len(sys.argv) == 5:
        print(json.dumps(read_seconds(Path(sys.argv[2]).resolve(), sys.argv[3], sys.argv[4])))
    else:
        raise SystemExit(__doc__)
