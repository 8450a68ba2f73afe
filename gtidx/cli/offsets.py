"""The commands of the ``gtidx`` command line about one offset of a binlog:
pos (the GTID position there) and probe (the event boundaries around it).

Imported when one of them runs or a help text lists it (``main.COMMANDS``),
as ``lookup`` (seek) is: each imports the library (``api``) only when it
runs, not for ``gtidx --help``.
"""
from __future__ import annotations

import click

from ..errors import redact
from .options import PATH, Offset, examples, from_option, index_dir_option, json_option, storage_option
from .output import Output, emit_json, one_line, write_batch


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
@from_option("'FILE OFFSET' (or OFFSET alone, in the FILE argument)")
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
        write_batch(batch, lambda texts: api.states_at(pairs(texts), **kw), as_json, _state_json,
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
