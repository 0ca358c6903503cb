"""A warehouse in an object store: requests through ``obstore`` and Arrow."""

from __future__ import annotations

import os
import threading
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pyarrow.fs as pafs

from dbt.adapters.dyntable.storage.base import ObjectInfo, Storage
from dbt.adapters.dyntable.storage.settings import (
    ENGINE_VARIABLES,
    SECRET_KEYS,
    StorageError,
    StoreUrl,
    normalized,
    truthy,
)


class ObjectStorage(Storage):
    """Files in an object store. Requests go through ``obstore`` (listing from a name on,
    conditional puts) and Arrow (Parquet reads); both are made once per process and store."""

    remote = True

    def __init__(self, url: StoreUrl, options: Mapping[str, str]) -> None:
        super().__init__(url.url)
        self.url = url
        self.options = dict(options)
        self._lock = threading.Lock()
        self._store: Any = None
        self._arrow: Optional[pafs.FileSystem] = None

    def __repr__(self) -> str:
        keys = ", ".join(
            f"{k}=***" if k in SECRET_KEYS else f"{k}={v}" for k, v in sorted(self.options.items())
        )
        return f"ObjectStorage({self.root!r}{', ' + keys if keys else ''})"

    # -- paths -----------------------------------------------------------------------------------

    def key(self, location: str) -> str:
        """The object key of ``location`` (a URL in this store's bucket)."""
        url = normalized(location)
        bucket_root = StoreUrl(self.url.scheme, self.url.kind, self.url.bucket, "", self.url.host).url
        if url != bucket_root and not url.startswith(bucket_root + "/"):
            raise StorageError(f"{location} is not in {bucket_root}")
        return url[len(bucket_root) :].strip("/")

    # -- clients ---------------------------------------------------------------------------------

    @property
    def store(self) -> Any:
        """The ``obstore`` store of the bucket."""
        with self._lock:
            if self._store is None:
                self._store = _obstore(self.url, self.options)
            return self._store

    def arrow(self, location: str) -> Tuple[pafs.FileSystem, str]:
        with self._lock:
            if self._arrow is None:
                self._arrow = _arrow_filesystem(self.url, self.options)
        return self._arrow, f"{self.url.bucket}/{self.key(location)}".rstrip("/")

    def delta_options(self) -> Dict[str, str]:
        options = dict(self.options)
        if self.url.kind == "s3":
            # Commits are written with a conditional put (If-None-Match), which S3 and
            # S3-compatible stores honour: safe with concurrent writers, no locking service.
            options.setdefault("conditional_put", "etag")
        return options

    def engine_environment(self) -> Dict[str, str]:
        variables = ENGINE_VARIABLES[self.url.kind]
        return {variables[k]: v for k, v in self.options.items() if k in variables}

    # -- files -----------------------------------------------------------------------------------

    def read(self, location: str) -> Optional[bytes]:
        import obstore

        try:
            return bytes(obstore.get(self.store, self.key(location)).bytes())
        except FileNotFoundError:
            return None

    def write(self, location: str, data: bytes) -> None:
        import obstore

        obstore.put(self.store, self.key(location), data)

    def delete(self, location: str) -> None:
        import obstore

        try:
            obstore.delete(self.store, self.key(location))
        except FileNotFoundError:
            pass

    def delete_tree(self, location: str) -> None:
        import obstore

        prefix = self.key(location).rstrip("/") + "/"
        paths = [meta["path"] for batch in obstore.list(self.store, prefix) for meta in batch]
        if paths:
            obstore.delete(self.store, paths)

    def folders(self, location: str) -> List[str]:
        import obstore

        prefix = self.key(location).rstrip("/")
        listed = obstore.list_with_delimiter(self.store, prefix + "/" if prefix else None)
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in listed["common_prefixes"])

    def files(self, location: str, after: Optional[str] = None) -> List[ObjectInfo]:
        import obstore

        prefix = self.key(location).rstrip("/") + "/"
        offset = prefix + after if after is not None else None
        found = []
        for batch in obstore.list(self.store, prefix, offset=offset):
            for meta in batch:
                name = meta["path"][len(prefix) :]
                if "/" in name:
                    continue  # in a folder below
                stamp = meta["last_modified"]
                found.append(
                    ObjectInfo(
                        name, int(stamp.timestamp() * 1e9), str(meta.get("e_tag") or ""), int(meta["size"])
                    )
                )
        return sorted(found, key=lambda f: f.name)

    def is_table(self, location: str) -> bool:
        import obstore

        prefix = self.key(location).rstrip("/") + "/_delta_log/"
        for batch in obstore.list(self.store, prefix, chunk_size=50):
            if any(meta["path"].endswith(".json") for meta in batch):
                return True
        return False

    def make_folder(self, location: str) -> None:
        """Object stores have no folders: a prefix exists while an object is under it."""

    def walk(self, location: str) -> List[str]:
        import obstore

        prefix = self.key(location).rstrip("/") + "/"
        base = location.rstrip("/") + "/"
        return sorted(
            base + meta["path"][len(prefix) :] for batch in obstore.list(self.store, prefix) for meta in batch
        )

    def move_tree(self, location: str, to: str) -> None:
        import obstore

        for found in self.walk(location):
            obstore.copy(
                self.store, self.key(found), self.key(to.rstrip("/") + found[len(location.rstrip("/")) :])
            )
        self.delete_tree(location)

    def contains(self, location: str) -> bool:
        return normalized(location).startswith(self.root.rstrip("/") + "/")

    # -- conditional writes (locks) --------------------------------------------------------------

    def create(self, location: str, data: bytes) -> Optional[str]:
        """Write the object only if none exists (``If-None-Match: *``): its tag, or None when
        one exists."""
        import obstore
        from obstore.exceptions import AlreadyExistsError

        try:
            written = obstore.put(self.store, self.key(location), data, mode="create")
        except AlreadyExistsError:
            return None
        return str(written["e_tag"])

    def replace(self, location: str, data: bytes, tag: str) -> Optional[str]:
        """Write the object only if it is still the version tagged ``tag`` (``If-Match``): the
        new tag, or None when it changed or is gone."""
        import obstore
        from obstore.exceptions import NotFoundError, PreconditionError

        try:
            written = obstore.put(self.store, self.key(location), data, mode={"e_tag": tag})
        except (PreconditionError, NotFoundError, FileNotFoundError):
            return None
        return str(written["e_tag"])

    def fetch(self, location: str) -> Optional[Tuple[bytes, str]]:
        """The object's bytes and tag; None when it does not exist."""
        import obstore

        try:
            got = obstore.get(self.store, self.key(location))
        except FileNotFoundError:
            return None
        return bytes(got.bytes()), str(got.meta.get("e_tag") or "")


def _obstore(url: StoreUrl, options: Mapping[str, str]) -> Any:
    from obstore.store import from_url as typed_from_url

    from_url: Any = typed_from_url  # its overloads are per scheme; the URL says which

    config = {k: v for k, v in options.items() if k not in ("allow_http",)}
    client = {"allow_http": truthy(options["allow_http"])} if "allow_http" in options else None
    bucket = StoreUrl(url.scheme, url.kind, url.bucket, "", url.host).url
    provider = _aws_profile_provider() if url.kind == "s3" and "access_key_id" not in options else None
    if provider is not None:
        return from_url(bucket, config=config, client_options=client, credential_provider=provider)
    return from_url(bucket, config=config, client_options=client)


def _aws_profile_provider() -> Any:
    """Credentials from botocore's chain (profile files, SSO, roles), where botocore is installed
    and the environment names no key: ``obstore`` itself reads the environment and instance roles,
    not the profile files ``deltalake``, Arrow and Sail read."""
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        return None
    try:
        import boto3
        from obstore.auth.boto3 import Boto3CredentialProvider
    except ImportError:
        return None
    session = boto3.Session()
    return Boto3CredentialProvider(session) if session.get_credentials() is not None else None


def _arrow_filesystem(url: StoreUrl, options: Mapping[str, str]) -> pafs.FileSystem:
    if url.kind == "s3":
        endpoint = options.get("endpoint")
        scheme = "https"
        if endpoint is not None:
            parsed = urllib.parse.urlsplit(endpoint)
            scheme, endpoint = (parsed.scheme or "https"), (parsed.netloc or endpoint)
        return pafs.S3FileSystem(
            access_key=options.get("access_key_id"),
            secret_key=options.get("secret_access_key"),
            session_token=options.get("session_token"),
            region=options.get("region"),
            endpoint_override=endpoint,
            scheme=scheme,
            force_virtual_addressing=truthy(options.get("virtual_hosted_style_request", "false")),
        )
    if url.kind == "gs":
        return pafs.GcsFileSystem()
    account = options.get("account_name") or (url.host.split(".", 1)[0] if url.host else None)
    if account is None:
        raise StorageError(
            "An az:// warehouse needs its storage account: set `storage_options: {account_name: ...}` "
            "or AZURE_STORAGE_ACCOUNT_NAME, or write abfss://container@account.dfs.core.windows.net/path."
        )
    return pafs.AzureFileSystem(account_name=account, account_key=options.get("account_key"))
