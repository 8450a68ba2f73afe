"""The ``gtidx`` commands on a whole archive of binlogs: catalog (build, show)
and spark (locate, build).

Imported when one of them runs or a help text lists them (``main.COMMANDS``).
"""
from __future__ import annotations

import click

from ..errors import BadInputError
from .options import (PATH, examples, existing_path, history_option, index_dir_option, json_option, quiet_option,
                      storage_option)
from .output import Output, Progress, clock, emit_json


def _existing_binlogs(path: str, storage_options: dict | None) -> None:
    """Binlogs handed to Spark: a local path must exist; a URL is listed (its
    missing bucket, prefix or bad option is one line here, not a failed job)."""
    from ..storage import is_url
    if not is_url(path):
        existing_path(path)
        return
    from ..api import list_binlogs
    list_binlogs(path, storage_options=storage_options)


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
    from .. import admin, api
    cat, counts = admin.build_catalog(path, storage_options=storage_options, index_root=index_root)
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
    from .. import admin, api
    cat = admin.load_catalog(path, storage_options=storage_options, index_root=index_root)
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
            first, last = (("-" if t is None else api.format_time(t)) for t in cat.seconds(e))
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
    existing_path(gtids_path)
    _existing_binlogs(binlogs, storage_options)
    with Progress(quiet) as shown:
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
    with Progress(quiet) as shown:
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


def _spark_progress(shown: Progress):
    """A gtidx.spark progress callback drawing on ``shown`` (None when it is off)."""
    if not shown.enabled:
        return None

    def progress(p) -> None:
        tasks = f"  tasks {p.tasks_done}/{p.tasks}" if p.tasks else ""
        shown.show(f"spark: {p.phase}{tasks}  {clock(p.elapsed)}")
    return progress


def _spark():
    """gtidx.spark, imported only when a spark command runs (PySpark is an extra)."""
    try:
        from .. import spark as gs
    except ImportError as e:
        raise BadInputError(f"gtidx spark needs PySpark ({e})", hint="pip install 'gtidx[spark]'; Java 17+") from e
    return gs
