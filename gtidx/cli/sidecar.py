"""The ``gtidx`` sidecar commands: tail (keep a live server's indexes current)
and status (how far each binlog is indexed).

Imported when one of them runs or a help text lists them (``main.COMMANDS``).
"""
from __future__ import annotations

import os
import sys
import time

import click

from .options import (PATH, Number, examples, existing_directory, json_option, max_ratio_option,
                      page_size_option, span_min_option, storage_option)
from .output import Output, emit_json


class _LibraryDefault(click.Option):
    """An option whose default is owned by a library module imported only when
    its command runs or shows its help: ``default`` is a callable that fetches it,
    and the help shows its value (click would say "(dynamic)")."""

    def get_default(self, ctx, call: bool = True):
        return super().get_default(ctx, call=True)


def _tail_settings():
    from ..tail import TailSettings
    return TailSettings


def _json_log_lines():
    """tail --json: each log line one JSON object {ts, level, event, ...fields}."""
    import json
    import logging

    class _JsonLogLines(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            ts = self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z"
            return json.dumps({"ts": ts, "level": record.levelname.lower(), "event": record.getMessage(),
                               **{k: v if isinstance(v, (int, float, bool, type(None))) else str(v)
                                  for k, v in getattr(record, "fields", {}).items()}})

        converter = staticmethod(time.gmtime)
    return _JsonLogLines()


def _max_lag_default():
    from ..tail.metrics import DEFAULT_MAX_LAG
    return DEFAULT_MAX_LAG


@click.command(epilog=examples('gtidx tail /var/lib/mysql', 'gtidx tail --metrics 127.0.0.1:9108 /var/lib/mysql',
                               'gtidx tail --archive s3://backups/db1/binlogs/ /var/lib/mysql'))
@click.argument("directory", type=PATH)
@click.option("--once", is_flag=True, help="Catch up with what is on disk now, then exit.")
@click.option("--watch", type=click.Choice(["auto", "poll"]), default="auto", show_default=True,
              help="What wakes the tail: auto, inotify where the filesystem is local (else polling, said "
                   "in one log line); poll, every --interval (also GTIDX_TAIL_WATCH=poll).")
@click.option("--interval", cls=_LibraryDefault, type=Number(0.01, 60),
              default=lambda: _tail_settings().interval, show_default=True,
              help="Seconds between looks at the binlogs when polling.")
@click.option("--repoll", cls=_LibraryDefault, type=Number(0.01, 3600),
              default=lambda: _tail_settings().repoll, show_default=True,
              help="Woken by inotify: seconds between looks at the binlogs anyway (a safety net).")
@click.option("--metrics", "metrics", metavar="HOST:PORT",
              help="Serve Prometheus metrics at http://HOST:PORT/metrics and the health at /healthz "
                   "(off by default; e.g. 127.0.0.1:9108; port 0: any free port, logged).")
@click.option("--max-lag", cls=_LibraryDefault, type=Number(0, 86400), default=_max_lag_default,
              show_default=True,
              help="With --metrics: /healthz answers 503 when a binlog's index is more than this many "
                   "seconds behind it.")
@click.option("--archive", "archive", metavar="URL",
              help="Also copy each closed binlog with its index to this S3 prefix (s3://bucket/prefix/) once, "
                   "checked by size and ETag, and keep the prefix's catalog current; nothing local is changed.")
@storage_option
@page_size_option
@span_min_option
@max_ratio_option("Size budget for each finished index.")
@click.option("--retry-max", cls=_LibraryDefault, type=Number(0.01, 3600),
              default=lambda: _tail_settings().retry_max, show_default=True,
              help="Longest wait in seconds before retrying a file that failed (disk full, ...).")
@click.option("--catalog-interval", cls=_LibraryDefault, type=Number(0, 86400),
              default=lambda: _tail_settings().catalog_interval, show_default=True,
              help="When the binlogs have a catalog: seconds at least between two updates of the "
                   "growing binlog's entry (a closed binlog's entry is written when it closes).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning"]), default="info", show_default=True,
              help="The least level of the log lines written to stderr (debug: every look at the directory).")
@json_option("Log lines as JSON objects {ts, level, event, ...} instead of logfmt.")
@click.option("--index-dir", "index_root", metavar="DIR",
              help="Keep the indexes under DIR, a local directory mirroring where each binlog is "
                   "(DIR/var/lib/mysql/NAME.idx, as build --index-dir writes them), not beside the binlogs.")
def tail(directory, once, watch, interval, repoll, metrics, max_lag, archive, storage_options, page_size, span_min,
         max_ratio, retry_max, catalog_interval, log_level, as_json, index_root):
    """Follow a live server's binlogs in DIRECTORY (its master-bin.index and the active
    file) and keep every index current: the sidecar. Stops cleanly on SIGTERM or SIGINT.
    Logs one logfmt line per event on stderr. A failure (disk full, permission denied,
    the directory gone) is logged once and retried with backoff; with --once, exit code 3
    when any file failed. When the binlogs have a catalog (gtidx catalog build), it is kept
    current too (tail never makes one). Woken by inotify where the filesystem is local
    (not NFS, CIFS, FUSE...), else it polls. With --archive, each closed binlog and its
    index are uploaded once to an S3 prefix (resumed after a restart: what the prefix
    holds already is checked, not sent again); with --once it waits for the uploads."""
    directory = existing_directory(directory, "gtidx tail")
    listen = None
    if metrics is not None:
        from ..tail.metrics import parse_listen
        listen = parse_listen(metrics)
    import logging

    from ..tail import LogfmtFormatter, TailSettings, Tailer
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_json_log_lines() if as_json else LogfmtFormatter())
    logger = logging.getLogger("gtidx.tail")
    logger.addHandler(handler)
    # process-wide state (tests run many commands in one process): restored after
    saved = logger.level, logger.propagate
    logger.setLevel(log_level.upper())
    logger.propagate = False
    server = archiver = None
    try:
        t = Tailer(directory, TailSettings(interval=interval, watch=watch, repoll=repoll, page_size=page_size,
                                           span_min=span_min, max_ratio=max_ratio, retry_max=retry_max,
                                           catalog_interval=catalog_interval), index_root)
        if archive is not None:
            from ..tail.archive import Archiver
            archiver = Archiver(archive, storage_options, retry_max=retry_max, index_of=t.index_of,
                                stopping=lambda: t.stopping)
            t.on_closed = archiver.closed
            if not once:
                archiver.start()
        if listen is not None:
            from ..tail.metrics import MetricsServer
            server = MetricsServer(t.state, *listen, max_lag=max_lag, repoll=repoll,
                                   archive=archiver and archiver.state)
        t.run(once=once)
        if once and archiver is not None and not t.stopping:
            archiver.drain_once()
    finally:
        if archiver is not None:
            archiver.close()
        if server is not None:
            server.close()
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
    if once and (t.failed or (archiver is not None and archiver.state.failing)):
        click.get_current_context().exit(3)


@click.command(epilog=examples('gtidx status /var/lib/mysql', 'gtidx status --json /var/lib/mysql',
                               'gtidx status --check --max-lag 60 /var/lib/mysql'))
@click.argument("directory", type=PATH)
@click.option("--check", is_flag=True,
              help="For monitoring (Nagios, Icinga): one line and the exit code 0 OK, 1 WARNING (an index "
                   "behind by more than --max-lag seconds), 2 CRITICAL (a binlog unreadable, an index "
                   "unusable or missing for longer than --max-lag, the catalog damaged, the directory "
                   "unreadable). Not gtidx's usual exit codes.")
@click.option("--max-lag", cls=_LibraryDefault, type=Number(0, 86400), default=_max_lag_default,
              show_default=True, help="With --check: seconds an index may be behind its binlog.")
@json_option("One JSON object: {files: [...]}; a file that cannot be read has state \"error\" "
              "and an \"error\" object. With --check: {status, code, summary, reasons: [...]}.")
@click.option("--index-dir", "index_root", metavar="DIR",
              help="The indexes are kept under DIR (tail --index-dir, build --index-dir), not beside the binlogs.")
def status(directory, check, max_lag, as_json, index_root):
    """Per binlog in DIRECTORY: index state (complete, partial, stale, server-owned, missing;
    error: the binlog itself cannot be read), the offset indexed to, and the lag in bytes and
    seconds. A damaged binlog is a row, not a failure. With --check: a monitoring plugin's
    verdict, exit 0 OK, 1 WARNING, 2 CRITICAL (the Nagios convention)."""
    from .. import admin
    if check:
        _check(directory, max_lag, as_json, index_root)
        return
    rows = admin.binlog_status(directory, index_root)
    if as_json:
        emit_json({"files": [{**r._asdict(), "error": None if r.error is None else r.error.as_dict()}
                              for r in rows]})
        return
    with Output() as out:
        out.write(f"{'FILE':<24} {'SIZE':>12} {'STATE':<13} {'INDEXED TO':>12} {'LAG BYTES':>10} {'LAG S':>7}  DETAIL\n")
        for r in rows:
            out.write(f"{os.path.basename(r.file):<24} {r.size:>12} {r.state:<13} {r.indexed_to:>12} "
                      f"{r.lag_bytes:>10} {r.lag_seconds:>7.1f}  {r.detail}\n")


def _check(directory, max_lag: float, as_json: bool, index_root=None) -> None:
    """status --check: the verdict's line (or JSON) and its exit code; an
    error that stops the whole check (the directory unreadable) is CRITICAL too."""
    from .. import admin
    from ..errors import GtidxError
    try:
        verdict = admin.status_check(directory, max_lag, index_root)
        out = {"status": verdict.status, "code": verdict.code, "summary": verdict.summary,
               "files": verdict.files, "max_lag": max_lag, "reasons": verdict.reasons}
    except GtidxError as e:
        out = {"status": "CRITICAL", "code": 2, "summary": f"CRITICAL: {e}", "files": 0,
               "max_lag": max_lag, "reasons": [{"level": "CRITICAL", "error": e.as_dict()}]}
    if as_json:
        emit_json(out)
    else:
        with Output() as o:
            o.write(out["summary"] + "\n")
    click.get_current_context().exit(out["code"])
