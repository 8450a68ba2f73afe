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
                      page_size_option, span_min_option)
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


@click.command(epilog=examples('gtidx tail /var/lib/mysql', 'gtidx tail --once --json /var/lib/mysql'))
@click.argument("directory", type=PATH)
@click.option("--once", is_flag=True, help="Catch up with what is on disk now, then exit.")
@click.option("--interval", cls=_LibraryDefault, type=Number(0.01, 60),
              default=lambda: _tail_settings().interval, show_default=True,
              help="Seconds between looks at the binlogs.")
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
def tail(directory, once, interval, page_size, span_min, max_ratio, retry_max, catalog_interval, log_level,
         as_json, index_root):
    """Follow a live server's binlogs in DIRECTORY (its master-bin.index and the active
    file) and keep every index current: the sidecar. Stops cleanly on SIGTERM or SIGINT.
    Logs one logfmt line per event on stderr. A failure (disk full, permission denied,
    the directory gone) is logged once and retried with backoff; with --once, exit code 3
    when any file failed. When the binlogs have a catalog (gtidx catalog build), it is kept
    current too (tail never makes one)."""
    directory = existing_directory(directory, "gtidx tail")
    import logging

    from ..tail import LogfmtFormatter, tail as run_tail
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_json_log_lines() if as_json else LogfmtFormatter())
    logger = logging.getLogger("gtidx.tail")
    logger.addHandler(handler)
    # process-wide state (tests run many commands in one process): restored after
    saved = logger.level, logger.propagate
    logger.setLevel(log_level.upper())
    logger.propagate = False
    try:
        t = run_tail(directory, once=once, interval=interval, page_size=page_size, span_min=span_min,
                     max_ratio=max_ratio, retry_max=retry_max, catalog_interval=catalog_interval,
                     index_root=index_root)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
    if once and t.failed:
        click.get_current_context().exit(3)


@click.command(epilog=examples('gtidx status /var/lib/mysql', 'gtidx status --json /var/lib/mysql'))
@click.argument("directory", type=PATH)
@json_option("One JSON object: {files: [...]}; a file that cannot be read has state \"error\" "
              "and an \"error\" object.")
@click.option("--index-dir", "index_root", metavar="DIR",
              help="The indexes are kept under DIR (tail --index-dir, build --index-dir), not beside the binlogs.")
def status(directory, as_json, index_root):
    """Per binlog in DIRECTORY: index state (complete, partial, stale, server-owned, missing;
    error: the binlog itself cannot be read), the offset indexed to, and the lag in bytes and
    seconds. A damaged binlog is a row, not a failure."""
    from .. import admin
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
