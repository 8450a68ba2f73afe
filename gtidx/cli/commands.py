"""The ``gtidx`` commands on one binlog or index (other than the lookups,
``lookup``): scan, show, build, verify, info, dump. ``sidecar``: tail and
status; ``archive``: catalog and spark.

Imported when one of them runs or a help text lists them (``main.COMMANDS``).
"""
from __future__ import annotations

import time

import click

from ..errors import GtidxError
from .options import (PATH, examples, history_option, index_dir_option, json_option, max_ratio_option,
                      page_size_option, quiet_option, span_min_option, storage_option)
from .output import Output, Progress, clock, close_stream, emit_json, one_line, percent, write_items


@click.command(epilog=examples(
    'gtidx scan /var/lib/mysql/master-bin.000020',
    'gtidx scan --json /var/lib/mysql/master-bin.000020 | head'))
@click.argument("file", type=PATH)
@json_option("One JSON object: {file, groups: [{gtid, start, end, ...}], count}; a binlog that breaks "
              "half-way adds \"error\" after the groups before the damage.")
@storage_option
def scan(file, as_json, storage_options):
    """List the event groups of FILE: GTID, start offset, end offset."""
    from .. import admin, api
    info, groups = api.scan(file, storage_options)
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
    from .. import admin, api
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
    with Progress(quiet) as shown:
        _build(shown, paths, page_size=page_size, span_min=span_min,
               max_ratio=None if no_budget else max_ratio, force=force, as_json=as_json,
               storage_options=storage_options, index_root=index_root)


def _build(shown: "Progress", paths, *, as_json: bool, **kw) -> None:
    from .. import admin, api
    worst = 0
    results = []
    started = time.monotonic()

    def progress(p) -> None:
        shown.show(_build_progress_text(p, time.monotonic() - started))
    for r in admin.build(paths, progress=progress if shown.enabled else None, **kw):
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
    """One admin.BuildProgress as the progress line shows it."""
    rate = p.bytes_done / elapsed if elapsed > 0 else 0.0
    left = p.bytes - p.bytes_done
    eta = clock(left / rate) if rate > 0 and p.bytes_done else "--:--"
    return (f"files {p.files_done}/{p.files}  {p.bytes_done / 1e6:,.1f}/{p.bytes / 1e6:,.1f} MB"
            f"  {percent(p.bytes_done, p.bytes)}  {rate / 1e6:,.1f} MB/s  ETA {eta}")


@click.command(epilog=examples('gtidx verify /var/lib/mysql/master-bin.000020.idx'))
@click.argument("index", type=PATH)
@json_option("One JSON object: {index, ok, records, pages, page_size, levels, ...}.")
@storage_option
def verify(index, as_json, storage_options):
    """Check INDEX (FILE.idx) completely: page CRCs, key order, child pointers, and every
    record's state against a scan of FILE."""
    from .. import admin, api
    st = admin.verify(index, storage_options)
    if as_json:
        emit_json({"index": index, "ok": True, **st})
        return
    with Output() as out:
        out.write(f"{index}: OK: {st['records']} records in {st['pages']} pages of {st['page_size']}, "
                  f"{st['levels']} levels; every record matches a scan of the binlog\n")


@click.command(epilog=examples('gtidx info /var/lib/mysql/master-bin.000020.idx'))
@click.argument("index", type=PATH)
@json_option()
@storage_option
def info(index, as_json, storage_options):
    """Page size, records, levels and size ratio of INDEX (FILE.idx), and whether it is usable."""
    from .. import admin, api
    i = admin.index_info(index, storage_options)
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
@storage_option
def dump(index, as_json, storage_options):
    """Every record of INDEX as JSON: {page_size, records: [{offset, state}]}; state is the
    full binlog state there (every (domain, server) entry; of a MySQL binlog's index the
    executed GTID set, as MySQL prints it). An index that breaks half-way
    adds "error" after the records before the damage."""
    import json

    from .. import admin, api
    page_size, records = admin.index_records(index, storage_options)
    with Output() as out:
        out.write(f'{{"page_size": {page_size}, "records": [')
        n, err = write_items(out, (f'{{"offset": {rec.offset}, "state": {json.dumps(str(rec.state))}}}'
                                    for rec in records))
        close_stream(out, err, "]")

