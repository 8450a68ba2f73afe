"""``gtidx tail --metrics HOST:PORT``: the tail's metrics (Prometheus text at
``/metrics``) and health (``/healthz``) over HTTP, served by a thread beside
the tail's loop (``MetricsServer``).

Built on ``prometheus_client``: its registry, a collector that reads the
tail's ``TailState`` when scraped (no metric object updated in the loop), and
its text exposition; the HTTP server is the standard library's (one thread
per request, the loop untouched), because ``/healthz`` is not Prometheus'.
prometheus_client is imported only when ``--metrics`` is given.

Lag is taken when scraped: each binlog's size and mtime now, against how far
its index reached and when (``TailState.reached``). So a tail that is stuck
(a failing disk, a loop that no longer turns) shows a growing lag, as
``gtidx status`` would. Lag in seconds is how much later the binlog was last
written than its index last advanced (0 when it is indexed to its end).

``/healthz``: 200 when every binlog is indexed within ``max_lag`` seconds and
the loop looked at the directory within ``max_lag`` plus its ``repoll``;
else 503. Both answer one JSON object: ``{"status": "ok"|"lagging",
"max_lag": S, "reasons": [...]}``.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..errors import BadInputError
from .logfmt import event

DEFAULT_MAX_LAG = 60.0      # seconds: a retry's longest back-off (30 s) twice over, before /healthz says 503


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv6 host in brackets: ``[::1]:9108``) -> (host, port).
    The host must be given: there is no listening on every interface by default."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise BadInputError(f"--metrics {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9108",
                            hint="give the host: 127.0.0.1 serves this machine only")
    return host, int(port)


def file_lags(state, now: float | None = None) -> list[tuple[str, int, float]]:
    """(binlog, lag in bytes, lag in seconds) of every binlog the tail listed, taken now."""
    now = time.time() if now is None else now
    out = []
    reached = state.reached
    for f in state.files:
        try:
            st = os.stat(f)
        except OSError:
            continue                                  # purged since the last look
        offset, when = reached.get(f, (0, state.started))
        lag = max(0, st.st_size - offset)
        out.append((f, lag, max(0.0, min(now, st.st_mtime) - when) if lag else 0.0))
    return out


def health(state, max_lag: float, repoll: float, now: float | None = None,
           archive=None) -> tuple[bool, list[dict]]:
    """Whether the tail is healthy, and why not: the binlogs indexed more
    than ``max_lag`` seconds late, what fails, a loop that stopped looking,
    and (``archive``: an ``ArchiveState``) closed binlogs waiting for the
    archive longer than ``max_lag`` seconds."""
    now = time.time() if now is None else now
    reasons = []
    for f, lag, lag_s in file_lags(state, now):
        if lag and lag_s > max_lag:
            reasons.append({"file": f, "reason": "lagging", "lag_bytes": lag, "lag_seconds": round(lag_s, 3)})
    for what, condition in state.failing.items():
        reasons.append({"file": what, "reason": "failing", "error": condition})
    quiet = now - (state.last_look or state.started)
    if quiet > max_lag + repoll:
        reasons.append({"reason": "not looking", "seconds_since_last_look": round(quiet, 3)})
    if archive is not None:
        for name, since in archive.pending.items():
            if now - since > max_lag:
                reasons.append({"file": name, "reason": "archive lagging", "seconds": round(now - since, 3),
                                **({"error": archive.failing[name]} if name in archive.failing else {})})
    healthy = not any(r["reason"] != "failing" for r in reasons)
    return healthy, reasons


def _collector(state, archive=None):
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class TailCollector:
        def collect(self):
            now = time.time()
            lags = file_lags(state, now)
            lb = GaugeMetricFamily("gtidx_tail_lag_bytes", "Bytes of the binlog its index does not cover yet",
                                   labels=["file"])
            ls = GaugeMetricFamily("gtidx_tail_lag_seconds",
                                   "How much later the binlog was last written than its index last advanced",
                                   labels=["file"])
            for f, lag, lag_s in lags:
                lb.add_metric([os.path.basename(f)], lag)
                ls.add_metric([os.path.basename(f)], lag_s)
            yield lb
            yield ls
            yield GaugeMetricFamily("gtidx_tail_files", "Binlogs the tail follows", value=len(lags))
            yield CounterMetricFamily("gtidx_tail_indexed_bytes", "Binlog bytes indexed", value=state.indexed_bytes)
            yield CounterMetricFamily("gtidx_tail_records", "Index records written", value=state.records)
            errors = CounterMetricFamily("gtidx_tail_errors", "Failed attempts, by kind (errno name or exception)",
                                         labels=["kind"])
            for kind, n in state.errors.items():
                errors.add_metric([kind], n)
            yield errors
            yield CounterMetricFamily("gtidx_tail_retries", "Attempts that failed again after a back-off",
                                      value=state.retries)
            yield GaugeMetricFamily("gtidx_tail_failing", "Files (or the directory, or the catalog) failing now",
                                    value=len(state.failing))
            yield CounterMetricFamily("gtidx_tail_looks", "Looks at the binlogs", value=state.looks)
            yield GaugeMetricFamily("gtidx_tail_last_success_timestamp_seconds",
                                    "When the last look in which nothing failed ended (Unix time)",
                                    value=state.last_success)
            if state.catalog is not None:
                try:
                    age = max(0.0, now - os.stat(state.catalog).st_mtime)
                except OSError:
                    age = None
                if age is not None:
                    yield GaugeMetricFamily("gtidx_tail_catalog_age_seconds",
                                            "Seconds since the binlogs' catalog was last written", value=age)
            watch = GaugeMetricFamily("gtidx_tail_watch_info", "What wakes the tail", labels=["watch"])
            watch.add_metric([state.watch or "none"], 1)
            yield watch
            if archive is not None:
                yield from _archive_metrics(archive, now)

    return TailCollector()


def _archive_metrics(archive, now: float):
    """``--archive``'s counters (an ``ArchiveState``)."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    yield CounterMetricFamily("gtidx_archive_uploaded_files", "Binlogs uploaded to the archive and checked",
                              value=archive.uploaded_files)
    yield CounterMetricFamily("gtidx_archive_uploaded_bytes", "Bytes uploaded to the archive (binlogs and indexes)",
                              value=archive.uploaded_bytes)
    errors = CounterMetricFamily("gtidx_archive_errors", "Failed archive attempts, by kind", labels=["kind"])
    for kind, n in archive.errors.items():
        errors.add_metric([kind], n)
    yield errors
    yield CounterMetricFamily("gtidx_archive_retries", "Archive attempts that failed again after a back-off",
                              value=archive.retries)
    yield GaugeMetricFamily("gtidx_archive_last_upload_timestamp_seconds",
                            "When the last binlog was uploaded (Unix time; 0: none yet)", value=archive.last_upload)
    pending = archive.pending
    yield GaugeMetricFamily("gtidx_archive_pending_files", "Closed binlogs not archived yet", value=len(pending))
    yield GaugeMetricFamily("gtidx_archive_lag_seconds", "How long the oldest closed binlog not archived has waited",
                            value=max((now - t for t in pending.values()), default=0.0))


class MetricsServer:
    """The HTTP server of ``--metrics`` in a daemon thread; ``close`` stops it
    and releases its port."""

    def __init__(self, state, host: str, port: int, *, max_lag: float = DEFAULT_MAX_LAG, repoll: float = 10.0,
                 archive=None):
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_collector(state, archive))

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):                      # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif path == "/healthz":
                    ok, reasons = health(state, max_lag, repoll, archive=archive)
                    body = json.dumps({"status": "ok" if ok else "lagging", "max_lag": max_lag,
                                       "reasons": reasons}).encode() + b"\n"
                    self._send(200 if ok else 503, "application/json", body)
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found: /metrics or /healthz\n")

            def _send(self, code: int, ctype: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass                               # a scrape is no log line

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        try:
            self.httpd = Server((host, port), Handler)
        except OSError as e:
            raise BadInputError(f"--metrics {host}:{port}: cannot listen: {e.strerror or e}") from None
        self.address = "%s:%d" % (f"[{host}]" if ":" in host else host, self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.5},
                                       name="gtidx-metrics", daemon=True)
        self.thread.start()
        event(logging.INFO, "metrics", listen=self.address, max_lag=max_lag)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()
