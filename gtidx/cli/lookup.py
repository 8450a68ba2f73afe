"""The lookup commands of the ``gtidx`` command line: seek, pos, probe.

Imported when one of them runs or a help text lists them (``main.COMMANDS``):
a lookup builds these three commands, not all thirteen, and imports the
library (``api``) only when it runs, not for ``gtidx --help``.
"""
from __future__ import annotations

import click

from ..errors import GtidxError, redact, shown
from .options import PATH, Offset, examples, history_option, index_dir_option, json_option, storage_option
from .output import Output, emit_json, error_json, one_line


def _from_option(what: str):
    # bytes that are not UTF-8 are kept (surrogateescape), to be echoed as \xNN (errors.shown)
    return click.option("--from", "batch", type=click.File("r", encoding="utf-8", errors="surrogateescape"),
                        metavar="FILE|-", help=f"Many lookups: {what} per line (blank lines and # comments "
                        "skipped), answered in input order, one result per line (--json: JSON Lines; a bad "
                        "line gives its error object and the batch goes on). Exit status: the worst line's.")


def _lines(stream):
    """(line text) of a --from input, read as it is answered: stripped, blank
    lines and # comments skipped."""
    for line in stream:
        text = line.strip()
        if text and not text.startswith("#"):
            yield text


def _batch(stream, answers, as_json: bool, to_json, to_text) -> None:
    """Answer the lines of a --from input ``stream``: ``answers(texts)`` yields
    one result per text, in order, reading ``texts`` as it goes; each result
    is written as it comes (JSON Lines, or text), so that memory does not grow
    with the input. An error is its line's error object (or a text line,
    the line echoed ``shown``: escaped, cut), and the batch goes on; then
    exit with the worst line's status."""
    import json
    from collections import deque
    pending = deque()                   # the texts read, not answered yet

    def texts():
        for text in _lines(stream):
            pending.append(text)
            yield text
    worst = 0
    with Output() as out:
        for r in answers(texts()):
            text = pending.popleft()
            if isinstance(r, GtidxError):
                worst = max(worst, r.exit_code)
                out.write(json.dumps({"input": shown(text), "error": error_json(r)}) + "\n" if as_json
                          else f"{shown(text)}: {r}\n")
            else:
                out.write(json.dumps(to_json(r)) + "\n" if as_json else to_text(r))
    if worst:
        click.get_current_context().exit(worst)


def _state_json(r) -> dict:
    return {"file": redact(r.file), "offset": r.offset, "position": r.position.one_line(), "state": one_line(r.state),
            "via": r.via}


@click.command(epilog=examples(
    'gtidx pos /var/lib/mysql/master-bin.000020 58727',
    'gtidx pos --json /var/lib/mysql/master-bin.000020 0x1000',
    'gtidx pos --from offsets.txt /var/lib/mysql/master-bin.000020'))
@click.argument("file", type=PATH, required=False)
@click.argument("offset", type=Offset(), required=False)
@click.option("--no-index", is_flag=True, help="Answer by scanning the binlog, ignoring its .idx.")
@json_option("One JSON object: {file, offset, position, state, via}.")
@_from_option("'FILE OFFSET' (or OFFSET alone, in the FILE argument)")
@storage_option
@index_dir_option
def pos(file, offset, no_index, as_json, batch, storage_options, index_root):
    """The GTID position at OFFSET of FILE, as BINLOG_GTID_POS(FILE, OFFSET) prints it.
    With --from, the positions at many offsets (FILE OFFSET lines)."""
    from .. import api
    kw = {"use_index": not no_index, "storage_options": storage_options, "index_root": index_root}
    if batch is not None:
        if offset is not None:
            raise click.UsageError("--from takes the offsets from its lines: give no OFFSET argument")

        def pairs(texts):
            for text in texts:
                name, _, number = text.rpartition(" ")
                yield (name.strip() or file, number) if name.strip() or file else (text, None)
        _batch(batch, lambda texts: api.states_at(pairs(texts), **kw), as_json, _state_json,
               lambda r: f"{r.position}\n")
        return
    if file is None or offset is None:
        raise click.UsageError(f"Missing argument '{'FILE' if file is None else 'OFFSET'}' (or --from FILE|-)")
    r = api.state_at(file, offset, **kw)
    if as_json:
        emit_json(_state_json(r))
    else:
        with Output() as out:
            out.write(f"{r.position}\n")


@click.command(epilog=examples('gtidx probe /var/lib/mysql/master-bin.000020 58730'))
@click.argument("file", type=PATH)
@click.argument("offset", type=Offset())
@click.option("--no-index", is_flag=True, help="Walk from the start of the binlog, ignoring its .idx.")
@json_option("One JSON object: {file, offset, before, after, state, damaged, via}.")
@storage_option
@index_dir_option
def probe(file, offset, no_index, as_json, storage_options, index_root):
    """The event boundaries around any byte OFFSET of FILE: the start of the event holding it
    (BEFORE), the next boundary (AFTER) and the GTID position at BEFORE, as BINLOG_GTID_POS
    prints it (a MySQL binlog: the GTID set executed there, as gtidx pos prints it). Where the
    event chain is broken (a destroyed header), the damaged bytes and the next trustworthy
    boundary (exit 0; exit 3 when none follows)."""
    from .. import api
    r = api.probe(file, offset, use_index=not no_index, storage_options=storage_options,
                  index_root=index_root)
    pos = None if r.position is None else str(r.position)
    if as_json:      # a MySQL set on one line (one_line); a MariaDB position is one already
        emit_json({"file": redact(r.file), "offset": r.offset, "before": r.before, "after": r.after,
                   "state": None if r.position is None else one_line(r.position),
                   "damaged": None if r.damaged is None else list(r.damaged), "via": r.via})
        return
    shown = "unknown" if pos is None else pos or "(empty)"
    where = (f"an event boundary, position {shown}" if r.before == r.after else
             f"before {r.before}, after {r.after}, position at {r.before}: {shown}")
    with Output() as out:
        out.write(f"{redact(r.file)} offset {r.offset}: {where} (via {r.via})\n")
        if r.damaged is not None:
            lo, hi = r.damaged
            out.write(f"damaged: no trustworthy event in bytes {lo} to {hi} (the event chain breaks at {lo} and "
                      f"resumes at {hi}){'; the position after them is unknown' if pos is None else ''}\n")


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
        occurrences = r.occurrences or (api.Occurrence(r.file, r.start, r.end),)
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
@_from_option("a GTID (or a replication position, one GTID per domain)")
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
        _batch(batch, lambda texts: api.seek_many(texts, path, storage_options=storage_options,
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
