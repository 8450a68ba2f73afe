"""The ``gtidx`` commands other than the lookups (``lookup``):
scan, show, build, verify, info, dump, tail, status, catalog and spark.

Imported when one of them runs or a help text lists them (``main.COMMANDS``).
"""
from __future__ import annotations

import os
import stat
import sys
import time

import click

from ..errors import BadInputError, GtidxError, GtidxIOError, quoted
from .options import (PATH, Number, examples, history_option, index_dir_option, json_option, max_ratio_option,
                      page_size_option, quiet_option, span_min_option, storage_option)
from .output import Output, close_stream, emit_json, one_line, write_items


@click.command(epilog=examples(
    'gtidx scan /var/lib/mysql/master-bin.000020',
    'gtidx scan --json /var/lib/mysql/master-bin.000020 | head'))
@click.argument("file", type=PATH)
@json_option("One JSON object: {file, groups: [{gtid, start, end, ...}], count}; a binlog that breaks "
              "half-way adds \"error\" after the groups before the damage.")
def scan(file, as_json):
    """List the event groups of FILE: GTID, start offset, end offset."""
    from .. import api
    info, groups = api.scan(file)
    with Output() as out:
        _write_groups(out, info, groups, as_json)


def _write_groups(out, info, groups, as_json) -> None:
    if as_json:
        import json
        # Streamed: a 1 GiB binlog has millions of groups. A failure half-way
        # closes the document with the error in it (close_stream).
        head = {"file": info.file, "size": info.size, "server_version": info.server_version,
                "checksum": info.checksum, "growing": info.growing,
                "start_state": None if info.start_state is None else one_line(info.start_state)}
        out.write(json.dumps(head)[:-1] + ', "groups": [')
        # a MySQL transaction: no flags2, and an anonymous one (gtid_mode OFF) has no GTID: null
        n, err = write_items(out, (f'{{"gtid": {"null" if g.gtid is None else chr(34) + str(g.gtid) + chr(34)}, '
                                    f'"start": {g.start}, "end": {g.end}, "timestamp": {g.timestamp}, '
                                    f'"flags2": {json.dumps(getattr(g, "flags2", None))}}}' for g in groups))
        close_stream(out, err, f'], "count": {n}')
        return
    state = "(empty)" if not info.start_state else one_line(info.start_state)
    out.write(f"# {info.file}: {info.server_version}, checksum {info.checksum}"
              f"{', still being written' if info.growing else ''}\n"
              f"# start state: {state}\n")
    out.write(f"{'GTID':<24} {'START':>12} {'END':>12}\n")
    n = 0
    for g in groups:
        out.write(f"{'(anonymous)' if g.gtid is None else str(g.gtid):<24} {g.start:>12} {g.end:>12}\n")
        n += 1
    out.write(f"# {n} groups\n")


@click.command("show", epilog=examples(
    'gtidx show --gtid 0-2-432 /var/lib/mysql',
    'gtidx show /var/lib/mysql/master-bin.000020 58387 --json'))
@click.option("--gtid", metavar="GTID", help="The GTID whose event group to show, looked up in PATH "
              "(a binlog, a directory of binlogs, a master-bin.index or a URL; default: the current directory).")
@click.argument("args", nargs=-1, type=PATH, metavar="[PATH | FILE OFFSET]")
@json_option("One JSON object: {gtid, file, start, end, timestamp, statements, annotations, column_names, "
              "rows: [{table, op, before, after, changed, unknown}], note}.")
@storage_option
@index_dir_option
@history_option("PATH", "With --gtid, when")
@click.option("--schema-from", "schema_from", metavar="SOCKET|DSN",
              help="Name the columns the binlog does not name (no binlog_row_metadata=FULL) from a live "
                   "server's information_schema: its unix socket path (as your OS user) or "
                   "mysql://user:password@host:port. Used for a table only where the server's has as "
                   "many columns as the binlog's.")
def show_group(gtid, args, as_json, storage_options, index_root, history, schema_from):
    """What one event group did: its statements and its row changes (tables, operations, column
    values before and after, changed columns), decoded from the binlog alone, in the spirit of
    mariadb-binlog -v. `gtidx show --gtid GTID [PATH]` or `gtidx show FILE OFFSET` (the group that
    starts at OFFSET, or has an event starting there). Columns are named from the binlog when the
    server wrote binlog_row_metadata=FULL, else @1, @2, ... like mariadb-binlog -v."""
    ctx = click.get_current_context()
    if gtid is not None and len(args) > 1:
        raise click.UsageError("with --gtid, give at most one PATH", ctx=ctx)
    if gtid is None and len(args) != 2:
        raise click.UsageError("give --gtid GTID [PATH], or FILE OFFSET", ctx=ctx)
    if gtid is None and history is not None:
        raise click.UsageError("--history goes with --gtid", ctx=ctx)
    from .. import api
    if gtid is not None:
        g = api.show(args[0] if args else ".", gtid=gtid, storage_options=storage_options,
                     index_root=index_root, history=history, schema_from=schema_from)
    else:
        g = api.show(args[0], offset=api.parse_offset(args[1]), storage_options=storage_options,
                     index_root=index_root, schema_from=schema_from)
    if as_json:
        emit_json(g.as_dict())
        return
    from ..show import format_text
    with Output() as out:
        out.write(format_text(g, api.format_time(g.timestamp)))


@click.command(epilog=examples('gtidx build /var/lib/mysql', 'gtidx build --index-dir /srv/idx s3://bucket/binlogs/'))
@click.argument("paths", nargs=-1, required=True, type=PATH)
@page_size_option
@span_min_option
@max_ratio_option("Size budget: the index is at most this fraction of its binlog.")
@click.option("--no-budget", is_flag=True, help="Exactly the server's layout, whatever its size.")
@click.option("--force", is_flag=True, help="Rebuild even a valid, current index (also a server's).")
@quiet_option
@json_option("One JSON object: {results: [...]}; a file that failed: {binlog, error: {...}}.")
@storage_option
@index_dir_option
def build(paths, page_size, span_min, max_ratio, no_budget, force, quiet, as_json, storage_options, index_root):
    """Write FILE.idx beside each binlog (files, directories, master-bin.index): MariaDB's own
    index format, usable by a MariaDB 11.4+ server; for a MySQL binlog gtidx's MySQL index
    (docs/mysql-index-format.md). Skips indexes that are valid and current.
    On a terminal, a progress line: files and bytes done, MB/s, ETA."""
    with _Progress(quiet) as shown:
        _build(shown, paths, page_size=page_size, span_min=span_min,
               max_ratio=None if no_budget else max_ratio, force=force, as_json=as_json,
               storage_options=storage_options, index_root=index_root)


def _build(shown: "_Progress", paths, *, as_json: bool, **kw) -> None:
    from .. import api
    worst = 0
    results = []
    started = time.monotonic()

    def progress(p) -> None:
        shown.show(_build_progress_text(p, time.monotonic() - started))
    for r in api.build(paths, progress=progress if shown.enabled else None, **kw):
        shown.clear()
        if isinstance(r, GtidxError):
            click.echo(f"gtidx: {r}", err=True)
            worst = max(worst, r.exit_code)
            results.append({"binlog": getattr(r, "binlog", r.path), "error": r.as_dict()})
            continue
        if r.warning:
            click.echo(f"gtidx: warning: {r.index}: {r.warning}", err=True)
        results.append({"binlog": r.binlog, "index": r.index, "action": r.action, "reason": r.reason,
                        "records": r.records, "pages": r.pages, "page_size": r.page_size,
                        "size": r.size, "binlog_size": r.binlog_size, "ratio": round(r.ratio, 6),
                        "server_layout": r.server_layout, "over_budget": r.over_budget,
                        "seconds": round(r.seconds, 4)})
        if not as_json:
            with Output() as out:
                if r.action == "skipped":
                    out.write(f"{r.index}: skipped ({r.reason})\n")
                else:
                    fitted = ("" if r.server_layout else f" [fitted to --max-ratio {kw['max_ratio'] * 100:g}%: "
                                                           "fewer or smaller pages than the server writes]")
                    out.write(f"{r.index}: {r.records} records, {r.pages} pages of {r.page_size} "
                              f"({r.size} bytes, {r.ratio:.2%} of the binlog) in {r.seconds:.2f} s{fitted}\n")
        shown.redraw()
    shown.clear()
    if as_json:
        emit_json({"results": results})
    if worst:
        click.get_current_context().exit(worst)


def _build_progress_text(p, elapsed: float) -> str:
    """One api.BuildProgress as the progress line shows it."""
    rate = p.bytes_done / elapsed if elapsed > 0 else 0.0
    left = p.bytes - p.bytes_done
    eta = _clock(left / rate) if rate > 0 and p.bytes_done else "--:--"
    return (f"files {p.files_done}/{p.files}  {p.bytes_done / 1e6:,.1f}/{p.bytes / 1e6:,.1f} MB"
            f"  {_percent(p.bytes_done, p.bytes)}  {rate / 1e6:,.1f} MB/s  ETA {eta}")


def _percent(done: int, total: int) -> str:
    return f"{100 * done / total:3.0f}%" if total else "100%"


def _clock(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    return (f"{seconds // 3600}:" if seconds >= 3600 else "") + f"{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _is_terminal(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):     # no isatty, or closed
        return False


class _Progress:
    """A one-line progress display on stderr, for long work. Drawn only when
    stdout and stderr are both terminals and not --quiet (a pipe, a file, a
    log or CliRunner sees nothing); redrawn at most 10 times a second; erased
    before any other output line (clear, then redraw) and at the end, so the
    lines the command prints are what they are without it."""

    INTERVAL = 0.1      # seconds between redraws

    def __init__(self, quiet: bool):
        self.enabled = not quiet and _is_terminal(sys.stdout) and _is_terminal(sys.stderr)
        self._text = self._on_screen = ""
        self._drawn = False
        self._last = 0.0

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc) -> bool:
        self.clear()
        return False

    def show(self, text: str) -> None:
        """The current state; drawn now unless drawn less than INTERVAL ago."""
        self._text = text
        if not self.enabled or (self._drawn and text == self._on_screen):
            return
        now = time.monotonic()
        if not self._drawn or now - self._last >= self.INTERVAL:
            self._last = now
            self._write(text)

    def redraw(self) -> None:
        """Draw the last state again (after clear() and a line of output)."""
        if self.enabled and self._text and not self._drawn:
            self._write(self._text)

    def clear(self) -> None:
        if self._drawn:
            self._drawn = False
            self._put("\r\x1b[K")

    def _write(self, text: str) -> None:
        import shutil
        width = shutil.get_terminal_size().columns - 1
        self._drawn, self._on_screen = True, text
        self._put("\r" + text[:width] + "\x1b[K")

    def _put(self, chars: str) -> None:
        try:
            sys.stderr.write(chars)
            sys.stderr.flush()
        except (OSError, ValueError):
            self.enabled = self._drawn = False      # stderr went away: the work goes on


@click.command(epilog=examples('gtidx verify /var/lib/mysql/master-bin.000020.idx'))
@click.argument("index", type=PATH)
@json_option("One JSON object: {index, ok, records, pages, page_size, levels, ...}.")
def verify(index, as_json):
    """Check INDEX (FILE.idx) completely: page CRCs, key order, child pointers, and every
    record's state against a scan of FILE."""
    from .. import api
    st = api.verify(index)
    if as_json:
        emit_json({"index": index, "ok": True, **st})
        return
    with Output() as out:
        out.write(f"{index}: OK: {st['records']} records in {st['pages']} pages of {st['page_size']}, "
                  f"{st['levels']} levels; every record matches a scan of the binlog\n")


@click.command(epilog=examples('gtidx info /var/lib/mysql/master-bin.000020.idx'))
@click.argument("index", type=PATH)
@json_option()
def info(index, as_json):
    """Page size, records, levels and size ratio of INDEX (FILE.idx), and whether it is usable."""
    from .. import api
    i = api.index_info(index)
    doc = {"index": i.index, "binlog": i.binlog, "status": i.status, "reason": i.reason, "owner": i.owner,
           "page_size": i.page_size, "pages": i.pages, "records": i.records, "levels": i.levels,
           "size": i.size, "binlog_size": i.binlog_size, "ratio": round(i.ratio, 6)}
    if as_json:
        emit_json(doc)
        return
    with Output() as out:
        for k, v in doc.items():
            out.write(f"{k:<12} {v}\n")


@click.command(epilog=examples('gtidx dump /var/lib/mysql/master-bin.000020.idx | head'))
@click.argument("index", type=PATH)
@json_option("Accepted for uniformity: the output is JSON anyway.")
def dump(index, as_json):
    """Every record of INDEX as JSON: {page_size, records: [{offset, state}]}; state is the
    full binlog state there (every (domain, server) entry; of a MySQL binlog's index the
    executed GTID set, as MySQL prints it). An index that breaks half-way
    adds "error" after the records before the damage."""
    import json

    from .. import api
    page_size, records = api.index_records(index)
    with Output() as out:
        out.write(f'{{"page_size": {page_size}, "records": [')
        n, err = write_items(out, (f'{{"offset": {rec.offset}, "state": {json.dumps(str(rec.state))}}}'
                                    for rec in records))
        close_stream(out, err, "]")


def _directory(path: str) -> str:
    """A directory a command watches: missing is an I/O error (3), like every
    missing path; an existing non-directory is bad input (2)."""
    if not stat.S_ISDIR(_existing(path).st_mode):
        raise BadInputError("not a directory", path=path)
    return path


def _existing(path: str) -> os.stat_result:
    """A path handed to code that reports a missing file its own way (Spark)."""
    try:
        return os.stat(path)
    except OSError as e:
        raise GtidxIOError.from_os(e, path) from None
    except ValueError:
        raise BadInputError(f"path {quoted(path)} contains a NUL character") from None


def _existing_binlogs(path: str, storage_options: dict | None) -> None:
    """Binlogs handed to Spark: a local path must exist; a URL is listed (its
    missing bucket, prefix or bad option is one line here, not a failed job)."""
    from ..storage import is_url
    if not is_url(path):
        _existing(path)
        return
    from ..api import list_binlogs
    list_binlogs(path, storage_options=storage_options)


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
def tail(directory, once, interval, page_size, span_min, max_ratio, retry_max, catalog_interval, log_level,
         as_json):
    """Follow a live server's binlogs in DIRECTORY (its master-bin.index and the active
    file) and keep every index current: the sidecar. Stops cleanly on SIGTERM or SIGINT.
    Logs one logfmt line per event on stderr. A failure (disk full, permission denied,
    the directory gone) is logged once and retried with backoff; with --once, exit code 3
    when any file failed. When the binlogs have a catalog (gtidx catalog build), it is kept
    current too (tail never makes one)."""
    _directory(directory)
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
                     max_ratio=max_ratio, retry_max=retry_max, catalog_interval=catalog_interval)
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
def status(directory, as_json):
    """Per binlog in DIRECTORY: index state (complete, partial, stale, server-owned, missing;
    error: the binlog itself cannot be read), the offset indexed to, and the lag in bytes and
    seconds. A damaged binlog is a row, not a failure."""
    from .. import api
    rows = api.binlog_status(directory)
    if as_json:
        emit_json({"files": [{**r._asdict(), "error": None if r.error is None else r.error.as_dict()}
                              for r in rows]})
        return
    with Output() as out:
        out.write(f"{'FILE':<24} {'SIZE':>12} {'STATE':<13} {'INDEXED TO':>12} {'LAG BYTES':>10} {'LAG S':>7}  DETAIL\n")
        for r in rows:
            out.write(f"{os.path.basename(r.file):<24} {r.size:>12} {r.state:<13} {r.indexed_to:>12} "
                      f"{r.lag_bytes:>10} {r.lag_seconds:>7.1f}  {r.detail}\n")


@click.group(epilog=examples('gtidx catalog build s3://bucket/binlogs/', 'gtidx catalog show --json /var/lib/mysql'))
def catalog():
    """The catalog of an archive: one small object beside the binlogs (gtidx-catalog.json) that
    lookups read once instead of every file's preamble."""


@catalog.command("build", epilog=examples(
    'gtidx catalog build /var/lib/mysql',
    'gtidx catalog build s3://bucket/binlogs/'))
@click.argument("path", type=PATH)
@json_option("One JSON object: {catalog, files, histories, kept, walked, failed}.")
@storage_option
@index_dir_option
def catalog_build(path, as_json, storage_options, index_root):
    """Make the catalog of PATH (a directory or URL prefix of binlogs, or its master-bin.index)
    current: files whose size and fingerprint match their entry are kept, the others read once.
    Written beside the binlogs, or under --index-dir (a read-only archive)."""
    from .. import api
    cat, counts = api.build_catalog(path, storage_options=storage_options, index_root=index_root)
    if as_json:
        emit_json({"catalog": cat.where[1], "files": len(cat.files), "histories": len(cat.histories), **counts})
        return
    with Output() as out:
        out.write(f"{cat.where[1]}: {len(cat.files)} files ({counts['walked']} read, {counts['kept']} unchanged"
                  f"{', %d unreadable' % counts['failed'] if counts['failed'] else ''}), "
                  f"{len(cat.histories)} histor{'y' if len(cat.histories) == 1 else 'ies'}\n")


@catalog.command("show", epilog=examples(
    'gtidx catalog show /var/lib/mysql',
    'gtidx catalog show --json s3://bucket/binlogs/'))
@click.argument("path", type=PATH)
@json_option("The catalog: {v, histories: [...], files: [{name, size, start_state, end_state, "
              "first_timestamp, last_timestamp, server_ids, history, ...}]}.")
@storage_option
@index_dir_option
def catalog_show(path, as_json, storage_options, index_root):
    """Print the catalog of PATH: per binlog its size, history, states, time span and index.
    A damaged catalog (its checksum or content wrong, not a regular file) is one line, exit 3."""
    from .. import api
    cat = api.load_catalog(path, storage_options=storage_options, index_root=index_root)
    if as_json:
        emit_json(cat.raw)
        return
    with Output() as out:
        for h in cat.histories:
            gaps = f"; files missing before {', '.join(h['gaps'])}" if h["gaps"] else ""
            out.write(f"history {h['id']}: {h['first']}..{h['last']} ({h['files']} files) "
                      f"from {h['start_state'] or '(empty)'} to {h['end_state'] or '(empty)'}{gaps}\n")
        out.write(f"{'FILE':<24} {'SIZE':>12} {'HIST':>4} {'FIRST':<20} {'LAST':<20} {'INDEX':<10} END STATE\n")
        for e in cat.files:
            if "error" in e:
                out.write(f"{e['name']:<24} {e['size']:>12} {'-':>4} unreadable: {e['error']}\n")
                continue
            first, last = (("-" if t is None else api.format_time(t)) for t in (e["first_timestamp"],
                                                                                e["last_timestamp"]))
            out.write(f"{e['name']:<24} {e['size']:>12} {e['history']:>4} {first:<20} {last:<20} "
                      f"{e['index']['status']:<10} {e['end_state'] or '(empty)'}\n")


@click.group(epilog=examples(
    'gtidx spark build --master spark://127.0.0.1:7077 s3://bucket/binlogs/',
    'gtidx spark locate --gtids wanted.csv --binlogs s3://bucket/binlogs/ --out found.parquet'))
def spark():
    """Batch lookups and builds on Spark (pip install 'gtidx[spark]'; Java 17+)."""


@spark.command("locate", epilog=examples(
    'gtidx spark locate --gtids wanted.csv --binlogs /var/lib/mysql --out found.parquet',
    'gtidx spark locate --gtids wanted.parquet --binlogs s3://bucket/binlogs/ --out s3://bucket/found.parquet --master spark://127.0.0.1:7077'))
@click.option("--gtids", "gtids_path", required=True, type=PATH,
              help="GTIDs (or positions): .txt one per line, .csv with a gtid column, or .parquet.")
@click.option("--binlogs", required=True, type=PATH,
              help="A binlog directory, a master-bin.index or a binlog; or a URL (s3://bucket/prefix/), "
                   "read by the executors themselves.")
@click.option("--out", required=True, type=PATH, help="Output .parquet (overwritten).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@quiet_option
@json_option("One JSON object: {out, rows, found, not_found}.")
@storage_option
@index_dir_option
@history_option("--binlogs")
def spark_locate(gtids_path, binlogs, out, master, quiet, as_json, storage_options, index_root, history):
    """Locate every GTID of --gtids in --binlogs; write gtid, kind, file, start, end, resume,
    timestamp, first_gtid, found, reason to --out (kind: gtid or position; first_gtid: a
    position's first group sent). On a terminal, a progress line: the phase and its
    Spark tasks done. --gtids and --out are read and written by Spark: on a cluster, on
    storage every node sees."""
    _existing(gtids_path)
    _existing_binlogs(binlogs, storage_options)
    with _Progress(quiet) as shown:
        total, found = _spark().locate_to_parquet(gtids_path, binlogs, out, master,
                                                  progress=_spark_progress(shown),
                                                  storage_options=storage_options, index_root=index_root,
                                                  history=history)
    if as_json:
        emit_json({"out": out, "rows": total, "found": found, "not_found": total - found})
        return
    with Output() as o:
        o.write(f"{out}: {total} rows, {found} found, {total - found} not found\n")


@spark.command("build", epilog=examples(
    'gtidx spark build /var/lib/mysql',
    'gtidx spark build --master spark://127.0.0.1:7077 s3://bucket/binlogs/'))
@click.argument("binlogs", type=PATH)
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@quiet_option
@json_option("One JSON object: {results: [...]}.")
@storage_option
@index_dir_option
def spark_build(binlogs, master, quiet, as_json, storage_options, index_root):
    """Build the missing or stale indexes of BINLOGS (a path or a URL, s3://bucket/prefix/),
    one Spark task per file. On a terminal, a progress line: the phase and the files (tasks)
    done."""
    _existing_binlogs(binlogs, storage_options)
    with _Progress(quiet) as shown:
        rows = _spark().build_rows(binlogs, master, progress=_spark_progress(shown),
                                   storage_options=storage_options, index_root=index_root)
    if as_json:
        emit_json({"results": rows})
    else:
        with Output() as o:
            for r in rows:
                what = r["error"] or f"{r['action']} ({r['records']} records)"
                o.write(f"{r['index']}: {what}\n")
    if any(r["error"] for r in rows):
        click.get_current_context().exit(3)


def _spark_progress(shown: _Progress):
    """A gtidx.spark progress callback drawing on ``shown`` (None when it is off)."""
    if not shown.enabled:
        return None

    def progress(p) -> None:
        tasks = f"  tasks {p.tasks_done}/{p.tasks}" if p.tasks else ""
        shown.show(f"spark: {p.phase}{tasks}  {_clock(p.elapsed)}")
    return progress


def _spark():
    """gtidx.spark, imported only when a spark command runs (PySpark is an extra)."""
    try:
        from .. import spark as gs
    except ImportError as e:
        raise BadInputError(f"gtidx spark needs PySpark ({e})", hint="pip install 'gtidx[spark]'; Java 17+") from e
    return gs
