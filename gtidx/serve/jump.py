"""Starting a GTID stream near the replica's position, not at its file's start.

The server (and gtidx without an index) reads the start file from offset 4
and walks over every group the replica already has. ``replica_start``
already knows, through the index, the first group it sends (``first``): the
stream may go from the file's leading events straight there, when what the
walk would have done over the bytes in between is known without reading them:

* every group in between is left out: ``first`` is by definition the first
  group the skip rule sends, and a group of a domain the replica did not
  name would have been sent, so it would be ``first``;
* which of the skipped domains that walk reached (by the requested GTID
  itself, left out too): the binlog state at ``first`` (the index record
  before it and a walk from there) holds the requested GTID's server at
  that seq or past it, provided no (domain, server) of the position goes
  down in the file (``SeriesFile.pairs_going_down``, what ``replica_start``
  trusts its records by); an unusable index: no jump;
* where ``START SLAVE UNTIL``'s position (``@slave_until_gtid``) stops the
  stream: it is not reached before ``first`` (else the walk, which stops
  after the group that reaches it), judged on the same state under the same
  condition for its pairs.

What the jump leaves out that the walk would send are the events outside
groups between the file's first group and ``first``: a BINLOG_CHECKPOINT
the server wrote after that group (the ones at the file's start are sent:
the stream reads up to the first GTID event before it jumps).
"""
from __future__ import annotations

from typing import NamedTuple

from ..errors import GtidxError
from ..gtid import BinlogState, Position
from .stream import Skipper, Until


class Jump(NamedTuple):
    """Where the stream goes on in its first file once its leading events are
    sent (``offset``: the first group sent), the binlog state there, and the
    skipped domains reached before it (the walk would have reached them on
    the way: from the jump on they send everything)."""
    offset: int
    state: BinlogState
    reached: tuple


def index_jump(logs, start, skipper: Skipper, until: str | None) -> Jump | None:
    """The jump a GTID start may take (``start``: ``logs.replica_start``'s
    answer; ``skipper``: its skip rule), else None. ``until``: the replica's
    ``@slave_until_gtid``."""
    first = start.first
    if first is None or first.file != start.file or start.via != "index":
        return None
    try:
        f = logs.opened(start.file)
        if first.start <= f.binlog.body_start:
            return None
        down = f.pairs_going_down()
        stop = Until(Position.parse(until)) if until else None
        pairs = [*start.position, *(stop.pending.values() if stop else ())]
        if down is None or any((g.domain, g.server) in down for g in pairs):
            return None
        state = logs.state_at(start.file, first.start).state
    except GtidxError:
        return None                 # the index does not say: the walk does
    if stop is not None:
        for g in state:
            stop.group(*g)
        if stop.reached:
            return None
    reached = tuple(domain for domain, want in skipper.pending.items()
                    if (state.get(domain, want.server) or 0) >= want.seq)
    return Jump(first.start, state, reached)
