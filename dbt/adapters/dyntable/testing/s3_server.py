"""An S3 API server on 127.0.0.1 for the tests, the benchmarks and the demo (``moto[server]``).

It behaves as a user's object store does where it matters here: every request must carry
credentials (signed with the access key it creates at start; an unsigned or wrongly signed one is
refused with 403), conditional puts (``If-None-Match: *``, ``If-Match``) are honoured, and it
counts the requests it serves and can add latency to each, as a remote store has
(docs/ARCHITECTURE.md, "Object storage").

Run as ``python -m dbt.adapters.dyntable.testing.s3_server`` (it prints one JSON line with its
endpoint and credentials, then serves until stopped), or through :class:`S3Server`. Needs the
``dev`` extra (``moto[server]``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, Optional
from urllib.parse import parse_qs

#: Where the server's own controls live (a bucket name cannot start with "_").
CONTROL = "/_dyntable/"
REGION = "us-east-1"
#: Requests kept in the server's log between resets.
LOG_SIZE = 100_000


class _Counting:
    """WSGI middleware: refuses unsigned requests, counts the others, delays each."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        #: The requests served, as ``KIND path?query``, for a reader who wants to see which.
        self.log: List[str] = []
        self.latency = 0.0
        self._lock = threading.Lock()

    def __call__(self, environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith(CONTROL):
            return self._control(path[len(CONTROL) :], environ, start_response)
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if "HTTP_AUTHORIZATION" not in environ and "X-Amz-Signature" not in query:
            start_response("403 Forbidden", [("Content-Type", "application/xml")])
            return [b"<Error><Code>AccessDenied</Code><Message>Anonymous access is refused</Message></Error>"]
        kind = _kind(environ["REQUEST_METHOD"], path, query)
        with self._lock:
            self.counts[kind] += 1
            if len(self.log) < LOG_SIZE:
                self.log.append(f"{kind} {path}?{environ.get('QUERY_STRING', '')}".rstrip("?"))
        if self.latency:
            time.sleep(self.latency)
        return self.app(environ, start_response)

    def _control(self, what: str, environ: Dict[str, Any], start_response: Callable[..., Any]) -> List[bytes]:
        method = environ["REQUEST_METHOD"]
        with self._lock:
            if what == "requests" and method == "DELETE":
                self.counts.clear()
                self.log.clear()
            elif what == "latency" and method == "PUT":
                self.latency = float(parse_qs(environ.get("QUERY_STRING", ""))["ms"][0]) / 1000
            body = json.dumps(
                {"requests": dict(self.counts), "log": self.log, "latency_ms": self.latency * 1000}
            ).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]


def _kind(method: str, path: str, query: Dict[str, List[str]]) -> str:
    """A request's kind: LIST, GET, HEAD, PUT, DELETE, POST."""
    if method == "GET" and ("list-type" in query or path.strip("/").count("/") == 0):
        return "LIST"
    return method


def serve(port: int, bucket: str, latency_ms: float) -> None:
    """Serve until killed; print the endpoint and credentials first."""
    from moto import settings
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.iam.models import iam_backends
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from moto.s3.models import s3_backends
    from werkzeug.serving import make_server

    iam = iam_backends[DEFAULT_ACCOUNT_ID]["global"]
    iam.create_user(REGION, "dyntable")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy("dyntable", "s3", json.dumps(policy))
    key = iam.create_access_key("dyntable")
    s3_backends[DEFAULT_ACCOUNT_ID]["aws"].create_bucket(bucket, REGION)
    # Every request from now on is authenticated and authorized against the user above.
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    app = _Counting(DomainDispatcherApplication(create_backend_app))
    app.latency = latency_ms / 1000
    server = make_server("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)
    print(
        json.dumps(
            {
                "endpoint": f"http://127.0.0.1:{server.server_address[1]}",
                "bucket": bucket,
                "region": REGION,
                "access_key_id": key.access_key_id,
                "secret_access_key": key.secret_access_key,
            }
        ),
        flush=True,
    )
    server.serve_forever()


class S3Server:
    """The server in a process of its own, started on a free port of 127.0.0.1 and stopped
    (killed) by :meth:`stop`."""

    def __init__(self, bucket: str = "warehouse", latency_ms: float = 0) -> None:
        self.bucket = bucket
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, "--bucket", bucket, "--latency-ms", str(latency_ms)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait()
            raise RuntimeError(
                f"The S3 test server did not start (exit {self._proc.returncode}): is moto[server] installed?"
            )
        info = json.loads(line)
        self.endpoint: str = info["endpoint"]
        self.region: str = info["region"]
        self.access_key_id: str = info["access_key_id"]
        self.secret_access_key: str = info["secret_access_key"]

    @property
    def pid(self) -> int:
        return self._proc.pid

    def url(self, *parts: str) -> str:
        """``s3://<bucket>/<parts...>``."""
        return "/".join([f"s3://{self.bucket}", *parts])

    def credentials(self) -> Dict[str, str]:
        """The environment a user of this store sets: the access key, and the region."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_REGION": self.region,
        }

    def environment(self) -> Dict[str, str]:
        """:meth:`credentials` plus the endpoint, for tools that read only the environment
        (deltalake, as another writer of the warehouse's sources would use it)."""
        return {**self.credentials(), "AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def storage_options(self) -> Dict[str, str]:
        """The profile's ``storage_options`` for this store."""
        return {"endpoint": self.endpoint, "region": self.region, "allow_http": "true"}

    def _control(self, what: str, method: str = "GET") -> Dict[str, Any]:
        request = urllib.request.Request(f"{self.endpoint}{CONTROL}{what}", method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: Dict[str, Any] = json.loads(response.read())
        return answer

    def requests(self) -> Dict[str, int]:
        """The requests served since the last :meth:`reset`, by kind (LIST, GET, PUT, ...)."""
        return dict(self._control("requests")["requests"])

    def request_log(self) -> List[str]:
        """The requests served since the last :meth:`reset`, in order: ``KIND path?query``."""
        return list(self._control("requests")["log"])

    def reset(self) -> None:
        self._control("requests", "DELETE")

    def set_latency(self, milliseconds: float) -> None:
        """Delay every request by ``milliseconds`` from now on."""
        self._control(f"latency?ms={milliseconds}", "PUT")

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __enter__(self) -> "S3Server":
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=0, help="a free port when 0")
    parser.add_argument("--bucket", default="warehouse")
    parser.add_argument("--latency-ms", type=float, default=0, help="added to every request")
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_ALLOW_NONEXISTENT_REGION", "true")
    serve(args.port, args.bucket, args.latency_ms)


if __name__ == "__main__":
    main()
