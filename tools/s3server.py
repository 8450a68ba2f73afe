"""A real S3 endpoint for tests and benchmarks: ``moto_server`` (moto[server],
what s3fs's own test suite runs) as a separate process on 127.0.0.1, spoken
to over HTTP; never an in-process mock.

    with MotoServer(tmp) as s3:                   # a free port on 127.0.0.1
        client = s3.bucket("archive")             # boto3 (s3fs's mkdir fails on moto)
        client.put_object(Bucket="archive", Key="k", Body=b"...")
        s3.requests()                             # [(method, path, status), ...] since the last call

Requests are counted from the server's own request log (one line per
request it answered), not estimated.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tools.mariadb import _free_port as free_port

# the test credentials moto accepts (and the variables that must not point elsewhere)
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": ""}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LINE = re.compile(r'"(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/[0-9.]+" (\d+)')


class MotoServer:
    """``moto_server`` as a child process; ``requests()`` reads its log."""

    def __init__(self, tmp: Path, env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tmp) / f"moto-{self.port}.log"
        self._log = open(self.log_path, "wb")
        exe = Path(sys.executable).with_name("moto_server")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "moto.server"]
        self.proc = subprocess.Popen([*cmd, "-H", "127.0.0.1", "-p", str(self.port)], stdout=self._log,
                                     stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.url + "/moto-api/", timeout=1).read()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start: {self.log_path.read_text()[-2000:]}")
                time.sleep(0.1)
        self._seen = 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> "MotoServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @contextlib.contextmanager
    def environment(self):
        """This process's AWS_* variables pointing its clients at this server
        (``AWS_ENDPOINT_URL`` among them; no session token, no profile), and
        the variables as they were given back afterwards."""
        saved = {k: os.environ.get(k) for k in [*AWS_ENV, "AWS_ENDPOINT_URL"]}
        os.environ.update(AWS_ENV, AWS_ENDPOINT_URL=self.url)
        for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
            del os.environ[k]
        try:
            yield self
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request answered since the last call."""
        # werkzeug colours the lines of answers other than 200 (206: a ranged GET)
        lines = _ANSI.sub("", self.log_path.read_text(errors="replace")).splitlines()
        out = [(m.group(1), m.group(2), int(m.group(3))) for ln in lines if (m := _LINE.search(ln))]
        new, self._seen = out[self._seen:], len(out)
        return [r for r in new if not r[1].startswith("/moto-api")]

    def client(self, **kw):
        """A boto3 S3 client of this server: the test credentials unless
        ``kw`` gives others (aws_access_key_id=..., aws_secret_access_key=...)."""
        import boto3
        kw = {"aws_access_key_id": AWS_ENV["AWS_ACCESS_KEY_ID"],
              "aws_secret_access_key": AWS_ENV["AWS_SECRET_ACCESS_KEY"],
              "region_name": AWS_ENV["AWS_DEFAULT_REGION"], **kw}
        return boto3.client("s3", endpoint_url=self.url, **kw)

    def bucket(self, name: str, **kw):
        """Creates the bucket ``name`` with boto3 (s3fs's mkdir does not work
        against moto); returns the client (``kw``: as for ``client``)."""
        client = self.client(**kw)
        client.create_bucket(Bucket=name)
        return client

    def storage_options(self) -> dict:
        """What gtidx (fsspec/s3fs) needs to reach this server without any AWS_* variable."""
        return {"endpoint_url": self.url, "key": AWS_ENV["AWS_ACCESS_KEY_ID"],
                "secret": AWS_ENV["AWS_SECRET_ACCESS_KEY"]}
