"""What a warehouse's URL and `storage_options` say, checked, and how each library names them."""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

#: The URL schemes a warehouse may use, and the store each names (``s3a`` is Hadoop's name for S3).
SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gs", "abfss": "az", "az": "az"}
ACCEPTED = (
    "a local path, or an object-store URL: s3://bucket/path (s3a:// too), gs://bucket/path, "
    "abfss://container@account.dfs.core.windows.net/path or az://container/path"
)
#: ``storage_options`` keys per store (object_store's names, as ``deltalake`` takes them), with the
#: aliases users write. Credentials are accepted but best left to the standard chains.
OPTION_KEYS: Dict[str, Dict[str, str]] = {
    "s3": {
        "endpoint": "endpoint",
        "endpoint_url": "endpoint",
        "aws_endpoint": "endpoint",
        "aws_endpoint_url": "endpoint",
        "region": "region",
        "aws_region": "region",
        "allow_http": "allow_http",
        "aws_allow_http": "allow_http",
        "virtual_hosted_style_request": "virtual_hosted_style_request",
        "aws_virtual_hosted_style_request": "virtual_hosted_style_request",
        "access_key_id": "access_key_id",
        "aws_access_key_id": "access_key_id",
        "secret_access_key": "secret_access_key",
        "aws_secret_access_key": "secret_access_key",
        "session_token": "session_token",
        "aws_session_token": "session_token",
    },
    "gs": {},
    "az": {
        "account_name": "account_name",
        "azure_storage_account_name": "account_name",
        "account_key": "account_key",
        "azure_storage_account_key": "account_key",
        "endpoint": "endpoint",
        "azure_storage_endpoint": "endpoint",
        "allow_http": "allow_http",
    },
}
#: Options whose values are secrets: never shown.
SECRET_KEYS = frozenset({"secret_access_key", "session_token", "account_key"})
#: The Sail (object_store) environment variable of each option.
ENGINE_VARIABLES = {
    "s3": {
        "endpoint": "AWS_ENDPOINT",
        "region": "AWS_REGION",
        "allow_http": "AWS_ALLOW_HTTP",
        "virtual_hosted_style_request": "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
        "access_key_id": "AWS_ACCESS_KEY_ID",
        "secret_access_key": "AWS_SECRET_ACCESS_KEY",
        "session_token": "AWS_SESSION_TOKEN",
    },
    "gs": {},
    "az": {
        "account_name": "AZURE_STORAGE_ACCOUNT_NAME",
        "account_key": "AZURE_STORAGE_ACCOUNT_KEY",
        "endpoint": "AZURE_STORAGE_ENDPOINT",
        "allow_http": "AZURE_ALLOW_HTTP",
    },
}
#: Standard environment variables an option falls back to when the profile does not set it, so
#: that every library gets the same value (they read different ones: Sail ``AWS_ENDPOINT``,
#: Arrow ``AWS_ENDPOINT_URL``).
ENVIRONMENT_DEFAULTS: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "s3": {
        "endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"),
        "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
        "allow_http": ("AWS_ALLOW_HTTP",),
        "virtual_hosted_style_request": ("AWS_VIRTUAL_HOSTED_STYLE_REQUEST",),
    },
    "gs": {},
    "az": {"account_name": ("AZURE_STORAGE_ACCOUNT_NAME",)},
}
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$")


class StorageError(ValueError):
    """A `warehouse` or `storage_options` the adapter cannot serve; the message names the key."""


class StorageUnreachable(RuntimeError):
    """The object store did not answer, or refused the credentials: nothing is damaged."""


#: What the libraries' errors say when the store cannot be reached or refuses the request.
_UNREACHABLE = (
    "error sending request",
    "dns error",
    "connection refused",
    "lacked the necessary privileges",
    "permission denied",
    "access denied",
    "accessdenied",
    "invalidaccesskeyid",
    "signaturedoesnotmatch",
    "403",
)


def unreachable(error: BaseException, location: str) -> Optional[str]:
    """What to tell the user when ``error`` says the store at ``location`` could not be reached
    or refused the credentials; None for any other error. Credentials are never in the text."""
    if "://" not in location:
        return None
    text = str(error).lower()
    if not any(sign in text for sign in _UNREACHABLE):
        return None
    return (
        f"The warehouse's object store could not be reached or refused the request for {location} "
        f"({str(error).splitlines()[0][:200]}). Check the credentials the environment gives "
        "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance role, ...) and "
        "`storage_options` (endpoint, region, allow_http) in the profile."
    )


def truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class StoreUrl:
    """An object-store location: its scheme as written, the store it names, the bucket (or
    container) and the key prefix."""

    scheme: str
    kind: str
    bucket: str
    prefix: str
    host: str = ""
    """For ``abfss://container@host``: the account's host."""

    @property
    def url(self) -> str:
        scheme = "s3" if self.kind == "s3" else self.scheme
        bucket = f"{self.bucket}@{self.host}" if self.host else self.bucket
        return f"{scheme}://{bucket}/{self.prefix}".rstrip("/")


def parse_url(text: str, key: str = "warehouse") -> StoreUrl:
    """An object-store URL, checked; :class:`StorageError` naming ``key`` and what is accepted."""
    match = _URL.match(text)
    scheme = match.group(1).lower() if match else ""
    kind = SCHEMES.get(scheme)
    if kind is None:
        raise StorageError(
            f"`{key}: {text}` has the scheme {scheme!r}, which the adapter cannot serve. Use {ACCEPTED}."
        )
    parsed = urllib.parse.urlsplit(text)
    if not text[len(scheme) + 1 :].startswith("//") or not parsed.netloc:
        raise StorageError(
            f"`{key}: {text}` is not a URL the adapter can serve: write {scheme}://<bucket>/<path> "
            f"(two slashes, then the bucket). Use {ACCEPTED}."
        )
    if parsed.query or parsed.fragment:
        raise StorageError(f"`{key}: {text}` has a query or fragment; set options in `storage_options`.")
    bucket, _, host = parsed.netloc.partition("@")
    if host and kind != "az" or ":" in bucket or parsed.password is not None:
        raise StorageError(
            f"`{key}` holds credentials or a port in its URL; give credentials through the standard "
            "environment variables or profiles, or `storage_options`, never in the URL."
        )
    return StoreUrl(scheme, kind, bucket, parsed.path.strip("/"), host)


def is_url(text: str) -> bool:
    """Whether ``text`` is meant as a URL (a known scheme, or ``scheme://``), not a local path."""
    match = _URL.match(text)
    if match is None or text.startswith("file:"):
        return False
    return match.group(1).lower() in SCHEMES or "://" in text


def storage_options(
    kind: str, given: Optional[Mapping[str, Any]], key: str = "storage_options"
) -> Dict[str, str]:
    """``given`` with each key in its canonical name, checked against what ``kind`` accepts, and
    the options the standard environment variables set where ``given`` does not."""
    accepted = OPTION_KEYS[kind]
    options: Dict[str, str] = {}
    for name, value in (given or {}).items():
        canonical = accepted.get(str(name).lower())
        if canonical is None:
            names = sorted(set(accepted.values()))
            allowed = ", ".join(names) if names else "none (credentials come from the standard chain)"
            raise StorageError(
                f"`{key}` has {name!r}, which a {kind} warehouse does not take; it takes: {allowed}."
            )
        options[canonical] = str(value).lower() if isinstance(value, bool) else str(value)
    for option, variables in ENVIRONMENT_DEFAULTS[kind].items():
        if option not in options:
            found = next((os.environ[v] for v in variables if os.environ.get(v)), None)
            if found is not None:
                options[option] = found
    if options.get("endpoint", "").startswith("http://") and "allow_http" not in options:
        options["allow_http"] = "true"  # the endpoint says plain HTTP: every library must allow it
    return options


def normalized(location: str) -> str:
    """``location`` as this module names it: ``s3a://`` as ``s3://`` (one name per object)."""
    if location.lower().startswith("s3a://"):
        return "s3://" + location[6:]
    return location
