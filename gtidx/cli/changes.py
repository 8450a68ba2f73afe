"""``gtidx changes``: the changed rows of binlogs on one machine, without
Spark (``gtidx.changes.changes``), as text lines, JSON Lines or one Parquet
file per binlog.

Imported when it runs or a help text lists it (``main.COMMANDS``); pyarrow
(the ``parquet`` extra) only for ``--parquet``.
"""
from __future__ import annotations

import os
import time

import click

from ..errors import BadInputError, GtidxError, GtidxIOError
from .options import PATH, examples, history_option, index_dir_option, json_option, quiet_option, storage_option
from .output import Output, Progress, error_json, say

# A Parquet row group holds at most this many rows, and is written once its
# row images hold about this many bytes of values: what is held in memory is
# one row group, whatever the binlog's size.
ROW_GROUP_ROWS = 65_536
ROW_GROUP_BYTES = 64 << 20
# Dictionary encoding where values repeat (a binlog's name, tables, ops, the
# column names of the images), none for the values (mostly distinct: the
# encoder would try and give up on every page); min/max statistics for the
# columns a reader filters on, none for the images.
DICTIONARY = ["file", "table", "op", "before.key_value.key", "after.key_value.key"]
STATISTICS = ["gtid", "file", "offset", "timestamp", "table", "op"]


@click.command(epilog=examples(
    'gtidx changes --table shop.orders --since 2026-11-22T03:00:00Z /var/lib/mysql',
    'gtidx changes --gtid 0-2-432 --json /var/lib/mysql',
    'gtidx changes --parquet /srv/changes s3://bucket/binlogs/'))
@click.argument("path", default=".", type=PATH)
@click.option("--table", "tables", multiple=True, metavar="DB.TBL",
              help="Only the rows of this table (repeatable); the other tables' rows are not decoded.")
@click.option("--since", metavar="T", help="Only the groups stamped at T or later: ISO 8601 with Z or an "
              "offset (naive: UTC) or @<unix seconds>.")
@click.option("--until", metavar="T", help="Only the groups stamped before T (where a restore to T stops, "
              "as seek --time says).")
@click.option("--gtid", "gtids", multiple=True, metavar="GTID",
              help="Only the group of GTID (repeatable; every occurrence of one logged more than once), "
                   "located as seek locates it: only the binlogs holding them are read.")
@json_option("JSON Lines: one object per changed row, {gtid, file, offset, timestamp, table, op, before, "
             "after, changed, unknown}; a binlog whose reading failed: {\"error\": {...}} after its rows.")
@click.option("--parquet", "parquet_dir", metavar="OUT_DIR", type=PATH,
              help="Write OUT_DIR/<binlog name>.parquet per binlog read (the Spark source gtidx.changes' "
                   "columns), nothing on stdout.")
@quiet_option
@storage_option
@index_dir_option
@history_option("PATH", "With --gtid or --since, when")
def changes(path, tables, since, until, gtids, as_json, parquet_dir, quiet, storage_options, index_root,
            history):
    """Every changed row of the binlogs at PATH (a binlog, a directory, a master-bin.index or a URL),
    in binlog order: one line per row, its group's GTID, binlog, offset and time, then the row as
    gtidx show writes it. A binlog whose reading fails (a damaged rows event) ends with the error,
    and the next binlogs are read (exit status: the worst error's). On a terminal, a progress line:
    binlogs read and rows so far."""
    if as_json and parquet_dir is not None:
        raise click.UsageError("give --json or --parquet OUT_DIR, not both")
    from .. import changes as library
    binlogs = library.changes(path, tables=tables or None, since=since, until=until, gtids=gtids or None,
                              storage_options=storage_options, index_root=index_root, history=history,
                              reader=None if parquet_dir is None else _batches())
    with Progress(quiet) as shown:
        if parquet_dir is not None:
            worst = _to_parquet(binlogs, _out_dir(parquet_dir), shown)
        else:
            worst = _to_stdout(binlogs, as_json, shown)
    if worst:
        click.get_current_context().exit(worst)


class _Count:
    """What the progress line says: binlogs done of those planned, rows so far."""

    def __init__(self, shown: Progress):
        self.shown, self.rows, self.done, self.files, self.last = shown, 0, 0, 0, 0.0

    def binlog(self, b) -> None:
        self.done, self.files = b.number - 1, b.count
        self.show()

    def show(self) -> None:
        self.last = time.monotonic()
        self.shown.show(f"files {self.done}/{self.files}  {self.rows:,} rows")

    def due(self) -> bool:
        """Time to draw the line again (at most ``Progress.INTERVAL`` apart)?"""
        return self.shown.enabled and time.monotonic() - self.last >= Progress.INTERVAL


def _failed(e: GtidxError, shown: Progress) -> int:
    shown.clear()
    say(f"gtidx: {e}")
    shown.redraw()
    return e.exit_code


def _to_stdout(binlogs, as_json: bool, shown: Progress) -> int:
    """Text or JSON Lines on stdout; the worst exit code of the binlogs that failed (0: none)."""
    import json

    from ..inputs import format_time
    from ..show import json_image, row_line
    worst, count = 0, _Count(shown)
    with Output() as out:
        for b in binlogs:
            count.binlog(b)
            for r in b.rows:
                if isinstance(r, GtidxError):
                    if as_json:
                        out.write(json.dumps({"error": error_json(r)}) + "\n")
                    out.flush()                 # its rows before the error line
                    worst = max(worst, _failed(r, shown))
                    continue
                if as_json:
                    line = json.dumps({"gtid": r.gtid, "file": r.file, "offset": r.offset, "timestamp": r.timestamp,
                                       "table": r.table, "op": r.op, "before": json_image(r.before),
                                       "after": json_image(r.after), "changed": r.changed, "unknown": r.unknown})
                else:
                    line = f"{r.gtid or '(anonymous)'} {r.file} {r.offset} {format_time(r.timestamp)} {row_line(r)}"
                shown.clear()
                out.write(line + "\n")
                count.rows += 1
                if count.due():
                    count.show()
    return worst


# -- Parquet ----------------------------------------------------------------------------------

def _out_dir(path: str) -> str:
    """OUT_DIR, made if missing: a local directory."""
    from ..storage import is_url
    if is_url(path):
        raise BadInputError("--parquet writes to a local directory, not a URL", path=path)
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise BadInputError("--parquet: not a directory", path=path) from None
    except OSError as e:
        raise GtidxIOError.from_os(e, path) from None
    return path


def _parquet():
    try:
        import pyarrow.parquet
    except ImportError as e:
        raise BadInputError(f"gtidx changes --parquet needs pyarrow ({e})",
                            hint="pip install 'gtidx[parquet]'") from None
    return pyarrow.parquet


def _batches():
    """How ``--parquet`` reads a binlog: ``rowbatch`` record batches of one
    row group each (``ROW_GROUP_ROWS``, ``ROW_GROUP_BYTES``)."""
    _parquet()
    from functools import partial

    from ..rowbatch import source_batches
    return partial(source_batches, max_rows=ROW_GROUP_ROWS, max_bytes=ROW_GROUP_BYTES)


def _to_parquet(binlogs, out_dir: str, shown: Progress) -> int:
    """One Parquet file per binlog, a row group per record batch; the worst
    exit code of the binlogs that failed (0: none)."""
    pq = _parquet()
    from ..rowbatch import ARROW_SCHEMA
    worst, count = 0, _Count(shown)
    for b in binlogs:
        count.binlog(b)
        err = _write_parquet(pq, ARROW_SCHEMA, b.rows, os.path.join(out_dir, os.path.basename(b.path) + ".parquet"),
                             count)
        if err is not None:
            worst = max(worst, _failed(err, shown))
    return worst


def _write_parquet(pq, schema, batches, target: str, count: _Count) -> GtidxError | None:
    """The record ``batches`` as the Parquet file ``target`` (a temporary
    name, then renamed over it), a row group each. A binlog whose reading
    failed keeps the rows before the failure, and its error as the file's
    key-value metadata ``gtidx:error`` (JSON); returned."""
    import json

    from ..safefile import create_temp, discard, publish
    err, tmp = None, None
    try:
        fd, tmp = create_temp(target)
        with os.fdopen(fd, "wb") as f:
            writer = pq.ParquetWriter(f, schema, use_dictionary=DICTIONARY, write_statistics=STATISTICS)
            for batch in batches:
                if isinstance(batch, GtidxError):
                    err = batch
                    writer.add_key_value_metadata({"gtidx:error": json.dumps(error_json(batch))})
                    break
                writer.write_batch(batch, row_group_size=ROW_GROUP_ROWS)   # the compiled decoder cuts between groups
                count.rows += batch.num_rows
                if count.due():
                    count.show()
            writer.close()
            f.flush()
            os.fsync(f.fileno())
        publish(tmp, target)
    except OSError as e:
        if tmp is not None:
            discard(tmp)
        raise GtidxIOError.from_os(e, target if tmp is None else tmp) from None
    except BaseException:
        if tmp is not None:
            discard(tmp)
        raise
    return err
