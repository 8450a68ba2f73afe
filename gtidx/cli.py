"""The ``gtidx`` command line: parse arguments, call one api function, format.

Exit codes: 0 found/ok, 1 not found, 2 bad input or usage, 3 corrupt data or
I/O error. Errors are one line on stderr, never a traceback (set GTIDX_DEBUG=1
to see one). Imports of the library are lazy: ``gtidx --help`` and a lookup
should not pay for what they do not use.
"""
from __future__ import annotations

import json
import logging
import os
import sys

import click

from .errors import EXIT_CORRUPT, BadInputError, GtidxError


class Offset(click.ParamType):
    """A binlog offset: decimal or 0x-prefixed hex, >= 0."""

    name = "offset"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            n = int(value, 0)
        except ValueError:
            self.fail(f"{value!r} is not an offset (decimal, or hex like 0x11d)", param, ctx)
        if n < 0:
            self.fail(f"{value} is negative", param, ctx)
        return n


class _ReaderGone(Exception):
    """stdout's reader went away (`gtidx scan big | head`). Not an OSError on
    purpose: click turns EPIPE into exit code 1, which here means "not found"."""


class _Output:
    """stdout for streamed results; a closed pipe becomes _ReaderGone."""

    def __enter__(self):
        return sys.stdout

    def __exit__(self, etype, exc, tb):
        if etype is not None and issubclass(etype, BrokenPipeError):
            raise _ReaderGone() from None
        return False


def _emit_json(obj) -> None:
    with _Output() as out:
        out.write(json.dumps(obj) + "\n")


class _WarningLine(logging.Handler):
    """Library warnings (an index that cannot be used) as one stderr line each."""

    def emit(self, record):
        click.echo(f"gtidx: warning: {record.getMessage()}", err=True)


class GtidxGroup(click.Group):
    """Turns every failure into one line on stderr and an exit code, for the
    console script and click's CliRunner alike."""

    def invoke(self, ctx):
        # Library warnings become "gtidx: warning: ..." lines for this command
        # only: the logger is process-wide state (tests run many commands).
        logger = logging.getLogger("gtidx")
        handler = _WarningLine()
        logger.addHandler(handler)
        propagate, logger.propagate = logger.propagate, False
        try:
            return super().invoke(ctx)
        except GtidxError as e:
            click.echo(f"gtidx: {e}", err=True)
            ctx.exit(e.exit_code)
        except _ReaderGone:
            # `gtidx scan big | head`: the reader left. Quiet, with the exit
            # code a shell reports for SIGPIPE; stdout is pointed at /dev/null
            # so the interpreter's final flush does not complain either.
            sys.stdout = open(os.devnull, "w")
            ctx.exit(141)
        except KeyboardInterrupt:
            click.echo("gtidx: interrupted", err=True)
            ctx.exit(130)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as e:  # a bug: still one line for the user
            if os.environ.get("GTIDX_DEBUG"):
                raise
            click.echo(f"gtidx: internal error: {type(e).__name__}: {e} "
                       "(set GTIDX_DEBUG=1 for a traceback, and please report it)", err=True)
            ctx.exit(EXIT_CORRUPT)
        finally:
            logger.removeHandler(handler)
            logger.propagate = propagate


@click.group(cls=GtidxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gtidx")
def cli():
    """gtidx: find GTIDs and GTID states in MariaDB binlogs, fast, without a server."""


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object: {file, groups: [{gtid, start, end, ...}]}.")
def scan(file, as_json):
    """List the event groups of FILE: GTID, start offset, end offset."""
    from . import api
    info, groups = api.scan(file)
    with _Output() as out:
        _write_groups(out, info, groups, as_json)


def _write_groups(out, info, groups, as_json) -> None:
    if as_json:
        # Streamed: a 1 GiB binlog has millions of groups.
        head = {"file": info.file, "size": info.size, "server_version": info.server_version,
                "checksum": info.checksum, "growing": info.growing,
                "start_state": str(info.start_state)}
        out.write(json.dumps(head)[:-1] + ', "groups": [')
        sep = ""
        n = 0
        for g in groups:
            out.write(f'{sep}{{"gtid": "{g.gtid}", "start": {g.start}, "end": {g.end}, '
                      f'"timestamp": {g.timestamp}, "flags2": {g.flags2}}}')
            sep = ", "
            n += 1
        out.write(f'], "count": {n}}}\n')
        return
    out.write(f"# {info.file}: {info.server_version}, checksum {info.checksum}"
              f"{', still being written' if info.growing else ''}\n"
              f"# start state: {info.start_state or '(empty)'}\n")
    out.write(f"{'GTID':<24} {'START':>12} {'END':>12}\n")
    n = 0
    for g in groups:
        out.write(f"{str(g.gtid):<24} {g.start:>12} {g.end:>12}\n")
        n += 1
    out.write(f"# {n} groups\n")


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("offset", type=Offset())
@click.option("--no-index", is_flag=True, help="Answer by scanning the binlog, ignoring its .idx.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: {file, offset, position, state, via}.")
def pos(file, offset, no_index, as_json):
    """The GTID position at OFFSET of FILE, as BINLOG_GTID_POS(FILE, OFFSET) prints it."""
    from . import api
    r = api.state_at(file, offset, use_index=not no_index)
    if as_json:
        _emit_json({"file": r.file, "offset": r.offset, "position": str(r.position),
                    "state": str(r.state), "via": r.via})
    else:
        with _Output() as out:
            out.write(f"{r.position}\n")


def _location_json(loc) -> dict:
    return {"gtid": str(loc.gtid), "file": loc.file, "start": loc.start, "end": loc.end,
            "resume": loc.resume, "timestamp": loc.timestamp, "via": loc.via}


@cli.command()
@click.option("--gtid", "spec", required=True, metavar="GTID[,GTID...]",
              help="One GTID (where is its event group?) or a replication position with one GTID "
                   "per domain (where does a replica at that position start?).")
@click.argument("path", default=".", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.option("--every", is_flag=True,
              help="One GTID: scan every binlog for every occurrence (certain also where seq_no went "
                   "back and recovered inside one binlog, which start states cannot show; reads all binlogs).")
def seek(spec, path, as_json, every):
    """Find a GTID (or a replica's start point) in PATH: a binlog, a directory of binlogs or
    a master-bin.index (default: the current directory)."""
    from . import api
    r = api.seek(spec, path, every=every)
    if isinstance(r, api.Location):
        occurrences = r.occurrences or (api.Occurrence(r.file, r.start, r.end),)
        if as_json:
            _emit_json({**_location_json(r), "occurrences": [o._asdict() for o in occurrences]})
        else:
            with _Output() as out:
                out.write(f"{r.gtid} {r.file} start {r.start} end {r.end} resume {r.resume} (via {r.via})\n")
                if len(occurrences) > 1:
                    out.write(f"  {r.gtid} occurs {len(occurrences)} times (logged again after seq_no went back, "
                              f"gtid_strict_mode=OFF); the answer is the first: "
                              f"{', '.join(f'{o.file} {o.start}-{o.end}' for o in occurrences)}\n")
        return
    first = None if r.first is None else _location_json(r.first)
    if as_json:
        _emit_json({"position": str(r.position), "file": r.file, "offset": r.offset,
                    "state": str(r.state), "skip": str(r.skip), "first": first, "via": r.via})
        return
    with _Output() as out:
        out.write(f"replica at {r.position or '(empty)'} starts in {r.file} at offset {r.offset} (via {r.via})\n"
                  f"  state there: {r.state or '(empty)'}\n"
                  f"  skips, per domain, groups up to and including: {r.skip or '(nothing)'}\n")
        out.write(f"  first group sent: {r.first.gtid} at {r.first.file} {r.first.start}\n" if r.first
                  else "  first group sent: none yet (the replica is up to date)\n")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--page-size", type=click.IntRange(64, 16 * 1024 * 1024), default=4096, show_default=True,
              help="Index page size in bytes (the server accepts 64 .. 16 MiB).")
@click.option("--span-min", type=click.IntRange(1), default=65536, show_default=True,
              help="At most one record per this many binlog bytes (the server's binlog_gtid_index_span_min).")
@click.option("--max-ratio", type=click.FloatRange(0, 1, min_open=True), default=0.02, show_default=True,
              help="Size budget: the index is at most this fraction of its binlog.")
@click.option("--no-budget", is_flag=True, help="Exactly the server's layout, whatever its size.")
@click.option("--force", is_flag=True, help="Rebuild even a valid, current index (also a server's).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: {results: [...]}.")
def build(paths, page_size, span_min, max_ratio, no_budget, force, as_json):
    """Write FILE.idx beside each binlog (files, directories, master-bin.index): MariaDB's own
    index format, usable by a MariaDB 11.4+ server. Skips indexes that are valid and current."""
    from . import api
    worst = 0
    results = []
    for r in api.build(paths, page_size=page_size, span_min=span_min,
                       max_ratio=None if no_budget else max_ratio, force=force,
                       progress=_progress()):
        if isinstance(r, GtidxError):
            click.echo(f"gtidx: {r}", err=True)
            worst = max(worst, r.exit_code)
            results.append({"error": str(r), "exit_code": r.exit_code})
            continue
        if r.warning:
            click.echo(f"gtidx: warning: {r.index}: {r.warning}", err=True)
        results.append({"binlog": r.binlog, "index": r.index, "action": r.action, "reason": r.reason,
                        "records": r.records, "pages": r.pages, "page_size": r.page_size,
                        "size": r.size, "binlog_size": r.binlog_size, "ratio": round(r.ratio, 6),
                        "server_layout": r.server_layout, "over_budget": r.over_budget,
                        "seconds": round(r.seconds, 4)})
        if not as_json:
            with _Output() as out:
                if r.action == "skipped":
                    out.write(f"{r.index}: skipped ({r.reason})\n")
                else:
                    out.write(f"{r.index}: {r.records} records, {r.pages} pages of {r.page_size} "
                              f"({r.size} bytes, {r.ratio:.2%} of the binlog) in {r.seconds:.2f} s"
                              f"{'' if r.server_layout else ' [fitted to the size budget]'}\n")
    if as_json:
        _emit_json({"results": results})
    if worst:
        click.get_current_context().exit(worst)


def _progress():
    """A progress callback for big binlogs, drawn on stderr when it is a terminal."""
    if not sys.stderr.isatty():
        return None

    def tick(offset: int) -> None:
        click.echo(f"\r  {offset / 2**20:,.0f} MiB indexed", err=True, nl=False)
    return tick


@cli.command()
@click.argument("index", type=click.Path(dir_okay=False))
def verify(index):
    """Check INDEX (FILE.idx) completely: page CRCs, key order, child pointers, and every
    record's state against a scan of FILE."""
    from . import api
    st = api.verify(index)
    with _Output() as out:
        out.write(f"{index}: OK: {st['records']} records in {st['pages']} pages of {st['page_size']}, "
                  f"{st['levels']} levels; every record matches a scan of the binlog\n")


@cli.command()
@click.argument("index", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def info(index, as_json):
    """Page size, records, levels and size ratio of INDEX (FILE.idx), and whether it is usable."""
    from . import api
    i = api.index_info(index)
    doc = {"index": i.index, "binlog": i.binlog, "status": i.status, "reason": i.reason, "owner": i.owner,
           "page_size": i.page_size, "pages": i.pages, "records": i.records, "levels": i.levels,
           "size": i.size, "binlog_size": i.binlog_size, "ratio": round(i.ratio, 6)}
    if as_json:
        _emit_json(doc)
        return
    with _Output() as out:
        for k, v in doc.items():
            out.write(f"{k:<12} {v}\n")


@cli.command()
@click.argument("index", type=click.Path(dir_okay=False))
def dump(index):
    """Every record of INDEX as JSON: {page_size, records: [{offset, state}]}; state is the
    full binlog state there (every (domain, server) entry)."""
    from . import api
    page_size, records = api.index_records(index)
    with _Output() as out:
        out.write(f'{{"page_size": {page_size}, "records": [')
        sep = ""
        for rec in records:
            out.write(f'{sep}{{"offset": {rec.offset}, "state": "{rec.state}"}}')
            sep = ", "
        out.write("]}\n")


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option("--once", is_flag=True, help="Catch up with what is on disk now, then exit.")
@click.option("--interval", type=click.FloatRange(0.01, 60), default=0.2, show_default=True,
              help="Seconds between looks at the binlogs.")
@click.option("--page-size", type=click.IntRange(64, 16 * 1024 * 1024), default=4096, show_default=True)
@click.option("--span-min", type=click.IntRange(1), default=65536, show_default=True)
@click.option("--max-ratio", type=click.FloatRange(0, 1, min_open=True), default=0.02, show_default=True,
              help="Size budget for each finished index.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning"]), default="info", show_default=True)
def tail(directory, once, interval, page_size, span_min, max_ratio, log_level):
    """Follow a live server's binlogs in DIRECTORY (its master-bin.index and the active
    file) and keep every index current: the sidecar. Stops cleanly on SIGTERM or SIGINT.
    Logs one logfmt line per event on stderr."""
    from .tail import LogfmtFormatter, tail as run_tail
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    logger = logging.getLogger("gtidx.tail")
    logger.addHandler(handler)
    logger.setLevel(log_level.upper())
    logger.propagate = False
    try:
        run_tail(directory, once=once, interval=interval, page_size=page_size, span_min=span_min,
                 max_ratio=max_ratio)
    finally:
        logger.removeHandler(handler)


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True, help="One JSON object: {files: [...]}.")
def status(directory, as_json):
    """Per binlog in DIRECTORY: index state (complete, partial, stale, server-owned, missing),
    the offset indexed to, and the lag in bytes and seconds."""
    from . import api
    rows = api.status(directory)
    if as_json:
        _emit_json({"files": [r._asdict() for r in rows]})
        return
    with _Output() as out:
        out.write(f"{'FILE':<24} {'SIZE':>12} {'STATE':<13} {'INDEXED TO':>12} {'LAG BYTES':>10} {'LAG S':>7}  DETAIL\n")
        for r in rows:
            out.write(f"{os.path.basename(r.file):<24} {r.size:>12} {r.state:<13} {r.indexed_to:>12} "
                      f"{r.lag_bytes:>10} {r.lag_seconds:>7.1f}  {r.detail}\n")


@cli.group()
def spark():
    """Batch lookups and builds on Spark (pip install 'gtidx[spark]'; Java 17+)."""


@spark.command("locate")
@click.option("--gtids", "gtids_path", required=True, type=click.Path(exists=True),
              help="GTIDs (or positions): .txt one per line, .csv with a gtid column, or .parquet.")
@click.option("--binlogs", required=True, type=click.Path(exists=True),
              help="A binlog directory, a master-bin.index or a binlog.")
@click.option("--out", required=True, type=click.Path(), help="Output .parquet (overwritten).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
def spark_locate(gtids_path, binlogs, out, master):
    """Locate every GTID of --gtids in --binlogs; write gtid, file, start, end, resume,
    timestamp, found, reason to --out."""
    total, found = _spark().locate_to_parquet(gtids_path, binlogs, out, master)
    with _Output() as o:
        o.write(f"{out}: {total} rows, {found} found, {total - found} not found\n")


@spark.command("build")
@click.argument("binlogs", type=click.Path(exists=True))
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: {results: [...]}.")
def spark_build(binlogs, master, as_json):
    """Build the missing or stale indexes of BINLOGS, one Spark task per file."""
    rows = _spark().build_rows(binlogs, master)
    if as_json:
        _emit_json({"results": rows})
    else:
        with _Output() as o:
            for r in rows:
                what = r["error"] or f"{r['action']} ({r['records']} records)"
                o.write(f"{r['index']}: {what}\n")
    if any(r["error"] for r in rows):
        click.get_current_context().exit(3)


def _spark():
    """gtidx.spark, imported only when a spark command runs (PySpark is an extra)."""
    try:
        from . import spark as gs
    except ImportError as e:
        raise BadInputError(f"gtidx spark needs PySpark ({e})", hint="pip install 'gtidx[spark]'; Java 17+") from e
    return gs


def main(argv=None) -> None:
    """Console entry point."""
    cli.main(args=argv, prog_name="gtidx")
