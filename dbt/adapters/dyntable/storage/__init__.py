"""Where the warehouse's files live: a local folder or an object store, behind one interface.

The profile's ``warehouse`` is a local path or an object-store URL (``s3://``, ``s3a://``,
``gs://``, ``abfss://``, ``az://``); ``storage_options`` adds what the standard credential chains
cannot express (an endpoint, a region, path-style requests, plain HTTP to a local server). Four
libraries reach the files, each configured from here and nowhere else:

* ``deltalake`` reads and writes Delta tables (:meth:`Storage.delta_options`);
* Arrow reads Parquet files and the metadata tables' datasets (:meth:`Storage.arrow`);
* ``obstore`` makes the requests Arrow has no call for: listing a log from a version on, and
  conditional puts, which the object-store locks are made of (``dynamic_table/leases.py``);
* the embedded engine (Sail) takes its settings from the process's environment
  (:meth:`Storage.engine_environment`).

A local warehouse keeps the file system calls it always made (its listing caches and locks are
measured: docs/ARCHITECTURE.md, "Reading sources"). Secrets in ``storage_options`` never leave
this module but to those libraries: :meth:`Storage.__repr__` and every message name the URL and
the keys, never a value (docs/ARCHITECTURE.md, "Object storage").
"""

from __future__ import annotations

import threading
import urllib.parse
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

import pyarrow.fs as pafs
from deltalake import DeltaTable, write_deltalake

from dbt.adapters.dyntable.storage.base import ObjectInfo, Storage
from dbt.adapters.dyntable.storage.local import LOCAL_FILESYSTEM, LocalStorage
from dbt.adapters.dyntable.storage.objects import ObjectStorage
from dbt.adapters.dyntable.storage.settings import (
    ACCEPTED,
    SCHEMES,
    StorageError,
    StorageUnreachable,
    StoreUrl,
    is_url,
    normalized,
    parse_url,
    storage_options,
    truthy,
    unreachable,
)

__all__ = [
    "ACCEPTED",
    "SCHEMES",
    "LocalStorage",
    "ObjectInfo",
    "ObjectStorage",
    "Storage",
    "StorageError",
    "StorageUnreachable",
    "StoreUrl",
    "is_url",
    "normalized",
    "parse_url",
    "storage_options",
    "unreachable",
]

# -- the process's warehouses -----------------------------------------------------------------------

_configured: Dict[Tuple[str, str], ObjectStorage] = {}
_configured_lock = threading.Lock()


def warehouse_storage(setting: str, options: Optional[Mapping[str, Any]] = None) -> Storage:
    """The storage of a profile's ``warehouse`` (an absolute local path or a URL) with its
    ``storage_options``; an object store's is kept for the process, so that any location in its
    bucket (a table's, read from the catalog) is reached with the same settings (:func:`of`)."""
    if not is_url(setting):
        if options:
            raise StorageError(
                "`storage_options` is set, but `warehouse` is a local path: it is for object stores."
            )
        local = (
            urllib.parse.unquote(urllib.parse.urlsplit(setting).path)
            if setting.startswith("file:")
            else setting
        )
        return LocalStorage(str(Path(local).expanduser().resolve()))
    url = parse_url(setting)
    storage = ObjectStorage(url, storage_options(url.kind, options))
    with _configured_lock:
        _configured[(url.kind, url.bucket)] = storage
    return storage


def of(location: str) -> Storage:
    """The storage holding ``location``: a local path, or a URL in a bucket a warehouse was
    configured for (else the store's standard settings, from the environment)."""
    if not is_url(location):
        local = (
            urllib.parse.unquote(urllib.parse.urlsplit(location).path)
            if location.startswith("file:")
            else location
        )
        return LocalStorage(local)
    url = parse_url(location, key="location")
    with _configured_lock:
        found = _configured.get((url.kind, url.bucket))
        if found is None:
            found = _configured[(url.kind, url.bucket)] = ObjectStorage(
                StoreUrl(url.scheme, url.kind, url.bucket, "", url.host), storage_options(url.kind, None)
            )
    return found


def delta_table(location: str, version: Optional[int] = None) -> DeltaTable:
    """``deltalake``'s table at ``location`` (at ``version``), with its storage's options."""
    storage = of(str(location))
    options = storage.delta_options() or None
    return DeltaTable(normalized(str(location)), version=version, storage_options=options)


def is_delta_table(location: str) -> bool:
    return of(str(location)).is_table(normalized(str(location)))


def write_delta(location: str, data: Any, **kwargs: Any) -> None:
    """``deltalake.write_deltalake`` to ``location`` with its storage's options."""
    from dbt.adapters.dyntable.delta_log import note_write

    storage = of(str(location))
    write_deltalake(
        normalized(str(location)), data, storage_options=storage.delta_options() or None, **kwargs
    )
    note_write()


def create_delta(location: str, **kwargs: Any) -> DeltaTable:
    """``DeltaTable.create`` at ``location`` with its storage's options."""
    storage = of(str(location))
    return DeltaTable.create(
        normalized(str(location)), storage_options=storage.delta_options() or None, **kwargs
    )


def arrow(location: str) -> Tuple[pafs.FileSystem, str]:
    """Arrow's file system for ``location`` (a path or URI) and the path on it."""
    if location.startswith("file:"):
        return LOCAL_FILESYSTEM, urllib.parse.unquote(urllib.parse.urlsplit(location).path)
    # An object's URI, as a data file's in a Delta log, is URL-encoded ("region=eu%20west").
    return of(location).arrow(urllib.parse.unquote(normalized(location)))


# -- Spark's names ----------------------------------------------------------------------------------

#: Hadoop's S3A setting of each option, for JVM Spark (the `hadoop-aws` module on its classpath).
S3A_SETTINGS = {
    "endpoint": "fs.s3a.endpoint",
    "region": "fs.s3a.endpoint.region",
    "access_key_id": "fs.s3a.access.key",
    "secret_access_key": "fs.s3a.secret.key",
    "session_token": "fs.s3a.session.token",
}


def spark_location(location: str) -> str:
    """``location`` as Apache Spark's Hadoop file systems name it: S3 is ``s3a://`` there
    (``hadoop-aws``), ``s3://`` everywhere else (deltalake, Arrow, Sail)."""
    if location.lower().startswith("s3://"):
        return "s3a://" + location[5:]
    return location


def hadoop_configuration(found: Storage) -> Dict[str, str]:
    """The Spark settings (``spark.hadoop.*``) that give JVM Spark the warehouse's
    ``storage_options``; none for a local warehouse. Credentials not given there come from
    Hadoop's default chain (environment, profile files, instance roles)."""
    if not isinstance(found, ObjectStorage) or found.url.kind != "s3":
        return {}
    options = found.options
    conf = {f"spark.hadoop.{S3A_SETTINGS[k]}": v for k, v in options.items() if k in S3A_SETTINGS}
    conf["spark.hadoop.fs.s3a.path.style.access"] = str(
        not truthy(options.get("virtual_hosted_style_request", "false"))
    ).lower()
    if "allow_http" in options:
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(not truthy(options["allow_http"])).lower()
    if "session_token" in options:
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        )
    return conf
