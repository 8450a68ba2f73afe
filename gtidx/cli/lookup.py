"""The lookup command of the ``gtidx`` command line: seek (where a GTID, a
replica's start or a point in time is).

Imported when it runs or a help text lists it (``main.COMMANDS``): a seek
builds this command alone, not all thirteen (``offsets``: pos and probe),
and imports the library (``api``) only when it runs, not for ``gtidx
--help``.
"""
from __future__ import annotations

import click

from ..errors import redact
from .options import PATH, examples, from_option, history_option, index_dir_option, json_option, storage_option
from .output import Output, emit_json, one_line, write_batch


def _location_json(loc) -> dict:
    return {"gtid": str(loc.gtid), "file": redact(loc.file), "start": loc.start, "end": loc.end,
            "resume": loc.resume, "timestamp": loc.timestamp, "via": loc.via}


def _seek_json(r) -> dict:
    """A seek's answer (Location or ReplicaStart) as --json prints it."""
    from .. import api
    if isinstance(r, api.Location):
        doc = _location_json(r)
        doc["occurrences"] = ([{"file": redact(o.file), "start": o.start, "end": o.end} for o in r.occurrences]
                              if r.occurrences else [{"file": doc["file"], "start": r.start, "end": r.end}])
        if r.history is not None:
            doc["history"] = r.history
        return doc
    first = None if r.first is None else _location_json(r.first)
    return {"position": r.position.one_line(), "file": redact(r.file), "offset": r.offset,
            "state": one_line(r.state), "skip": r.skip.one_line(), "first": first, "via": r.via}


def _seek_text(r) -> str:
    """A seek's answer (Location or ReplicaStart) as text lines."""
    from .. import api
    if isinstance(r, api.Location):
        occurrences = r.occurrences     # empty: logged once
        text = (f"{r.gtid} {redact(r.file)} start {r.start} end {r.end} resume {r.resume} (via {r.via}"
                f"{'' if r.history is None else f'; history {r.history} of these binlogs'})\n")
        if len(occurrences) > 1:
            text += (f"  {r.gtid} occurs {len(occurrences)} times (logged again after seq_no went back, "
                     f"gtid_strict_mode=OFF); the answer is the first: "
                     f"{', '.join(f'{redact(o.file)} {o.start}-{o.end}' for o in occurrences)}\n")
        return text
    # A MariaDB position holds one GTID per domain (the replica skips, per domain, the groups up
    # to it); a MySQL GTID set is every transaction the replica has (it skips each of them): the
    # position's type says it in words.
    words = r.position
    return (f"replica at {r.position.one_line() or '(empty)'} starts in {redact(r.file)} at offset {r.offset} "
            f"(via {r.via})\n"
            f"  {words.STATE_WORDS} there: {one_line(r.state) or '(empty)'}\n"
            f"  {words.SKIP_WORDS}: "
            f"{r.skip.one_line() or '(nothing)'}\n" +
            (f"  first group sent: {r.first.gtid} at {redact(r.first.file)} {r.first.start}\n" if r.first
             else "  first group sent: none yet (the replica is up to date)\n"))


@click.command(epilog=examples(
    'gtidx seek --gtid 0-2-432 /var/lib/mysql',
    "gtidx seek --gtid 0-2-432,1-1-420 /var/lib/mysql     (a replica's start)",
    'gtidx seek --time 2026-11-22T10:00:00Z --json s3://bucket/binlogs/'))
@click.option("--gtid", "spec", metavar="GTID[,GTID...]",
              help="One GTID (where is its event group?) or a replication position with one GTID "
                   "per domain (where does a replica at that position start?).")
@click.option("--replica", metavar="POSITION",
              help="A replica's position (its gtid_slave_pos: one GTID per domain, one domain too): "
                   "where does the server start sending to it?")
@click.option("--time", "when", metavar="T",
              help="A point in time: ISO 8601 with Z or an offset (naive: UTC) or @<unix seconds>: where "
                   "does a restore to T stop (the first group whose GTID event timestamp is T or later)?")
@click.argument("path", default=".", type=PATH)
@json_option()
@click.option("--every", is_flag=True,
              help="One GTID: scan every binlog for every occurrence (certain also where seq_no went "
                   "back and recovered inside one binlog, which start states cannot show; reads all binlogs).")
@from_option("a GTID (or a replication position, one GTID per domain)")
@storage_option
@index_dir_option
@history_option("PATH")
@click.option("--server-uuid", metavar="UUID",
              help="MySQL binlogs, --replica: the source's server_uuid, to refuse the replica's extra GTIDs "
                   "as the source does (only its own); without it any GTID the binlogs lack is refused.")
def seek(spec, replica, when, path, as_json, every, batch, storage_options, index_root, history, server_uuid):
    """Find a GTID (or a replica's start point, or a point in time) in PATH: a binlog, a
    directory of binlogs or a master-bin.index (default: the current directory). Exactly one
    of --gtid, --replica, --time and --from."""
    if [spec, replica, when, batch].count(None) != 3:
        raise click.UsageError("give exactly one of --gtid GTID, --replica POSITION, --time T and --from FILE",
                               ctx=click.get_current_context())
    from .. import api
    if batch is not None:
        if every:
            raise click.UsageError("--every is for one GTID (--gtid)")
        write_batch(batch, lambda texts: api.seek_many(texts, path, storage_options=storage_options,
                                                       index_root=index_root, history=history),
                    as_json, _seek_json, _seek_text)
        return
    if when is not None:
        t = api.parse_time(when)
        with api.open_binlogs(path, storage_options=storage_options, index_root=index_root,
                              history=history) as logs:
            p = logs.at_time(t)
        if as_json:
            emit_json({"time": api.format_time(p.time), "file": redact(p.file), "offset": p.offset,
                        "gtid": None if p.gtid is None else str(p.gtid), "position": p.position.one_line(),
                        "via": p.via})
        else:
            with Output() as out:
                if p.gtid is None:
                    out.write(f"no group at {api.format_time(p.time)} or later: {redact(p.file)} end {p.offset} "
                              f"position {p.position.one_line() or '(empty)'} (via {p.via})\n")
                else:
                    out.write(f"{redact(p.file)} offset {p.offset} {p.gtid} at {api.format_time(p.timestamp)} "
                              f"position {p.position.one_line() or '(empty)'} (via {p.via})\n")
        return
    r = api.seek(spec if replica is None else replica, path, replica=replica is not None, every=every,
                 storage_options=storage_options, index_root=index_root, history=history, server_uuid=server_uuid)
    if as_json:
        emit_json(_seek_json(r))
    else:
        with Output() as out:
            out.write(_seek_text(r))
