"""The session engine's local catalog: an embedded Derby metastore beside the warehouse.

A master on this machine gets Hive support with an embedded Derby metastore, so tables and views
outlive the process and no re-attach is needed. Embedded Derby serves one process at a time: a
second process on the same warehouse fails to start with an error saying so. Hive's Derby schema
keeps a view's text in LONG VARCHAR columns (32,700 characters at most); the engine widens them to
CLOB once, so views of any length can be created.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict

from dbt.adapters.dyntable.engines.base import EngineError
from dbt.adapters.dyntable.engines.jvm_launch import delta_version, jars_hint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

METASTORE_DIR = ".metastore"
JDO_URL = "spark.hadoop.javax.jdo.option.ConnectionURL"
#: Hive's Derby schema keeps view text in these LONG VARCHAR (at most 32,700 characters) columns.
VIEW_TEXT_COLUMNS = ("VIEW_EXPANDED_TEXT", "VIEW_ORIGINAL_TEXT")


def derby_url(folder: Path, create: bool = False) -> str:
    database = folder / "metastore_db"
    return f"jdbc:derby:;databaseName={database}" + (";create=true" if create else "")


def local_metastore_conf(folder: Path) -> Dict[str, str]:
    """The settings of a driver whose executors run on this machine, over the metastore in
    ``folder``."""
    return {
        # A driver whose executors run here listens on this machine only; a remote
        # cluster's executors must reach it.
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        JDO_URL: derby_url(folder, create=True),
        # Derby writes derby.log into its home, which defaults to the working directory.
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={folder}",
    }


def widen_view_text_columns(spark: "SparkSession", folder: Path) -> None:
    """Let the local metastore in ``folder`` hold views of any length.

    Hive's metastore schema for Derby (as DataNucleus creates it) stores a view's SQL in two
    LONG VARCHAR columns of TBLS, which Derby caps at 32,700 characters: a longer view (dbt
    compiles some to well over that) failed with "A truncation error was encountered trying
    to shrink LONG VARCHAR ... to length 32700". Derby cannot change a column's type in
    place, so each becomes a CLOB column with the same name and contents, in one
    transaction, once per metastore. The metastore reads and writes them as strings still.
    """
    spark.sql("SHOW TABLES IN default").collect()  # DataNucleus creates TBLS on first use
    jvm: Any = spark._jvm
    connection = jvm.java.sql.DriverManager.getConnection(derby_url(folder))
    try:
        columns = connection.getMetaData().getColumns(None, "APP", "TBLS", None)
        types = {}
        while columns.next():
            types[columns.getString("COLUMN_NAME")] = columns.getString("TYPE_NAME")
        narrow = [c for c in VIEW_TEXT_COLUMNS if types.get(c) == "LONG VARCHAR"]
        if not narrow:
            return
        connection.setAutoCommit(False)
        statement = connection.createStatement()
        for column in narrow:
            for sql in (
                f"ALTER TABLE APP.TBLS ADD COLUMN {column}_CLOB CLOB",
                f"UPDATE APP.TBLS SET {column}_CLOB = CAST({column} AS CLOB)",
                f"ALTER TABLE APP.TBLS DROP COLUMN {column}",
                f"RENAME COLUMN APP.TBLS.{column}_CLOB TO {column}",
            ):
                statement.executeUpdate(sql)
        connection.commit()
        logger.debug("dyntable: widened the local metastore's view text columns %s to CLOB", narrow)
    finally:
        connection.close()


def check_catalog(spark: "SparkSession", folder: Path) -> None:
    """Touch the catalog now, so Delta and metastore problems surface at start, not mid-run."""
    try:
        spark.sql("SHOW DATABASES").collect()
    except Exception as exc:  # noqa: BLE001 - translated into the setting to fix
        text = str(exc)
        delta_lines = [
            line.strip()
            for line in text.splitlines()
            if "io.delta" in line or "org.apache.spark.sql.delta" in line
        ]
        if delta_lines:
            raise EngineError(
                f"Spark started but Delta Lake's classes are not on its classpath ({delta_lines[0]}). "
                f"The jars given do not provide Delta: {jars_hint()}, matching delta-spark "
                f"{delta_version()}."
            ) from exc
        if "Another instance of Derby" in text or "Failed to start database" in text:
            raise EngineError(
                f"The local metastore in {folder} is in use by another "
                "process (embedded Derby serves one at a time). Stop the other process, use a "
                "different `warehouse`, or configure a shared Hive metastore in `spark_conf`."
            ) from exc
        raise
