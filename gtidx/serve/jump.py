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
  condition for its pairs;
* the events outside groups in between, which the walk sends: a
  BINLOG_CHECKPOINT the server wrote after a few groups of the file (the
  previous binlog's last commits done), an INCIDENT. The index does not
  record them, so the bytes say: the compiled group walk
  (``binlog.walk.group_record_chunks``, C where it is built) lists the
  groups up to ``first``; a gap between two of them is sent as the walk
  sends it, with the skipped domains reached before it (from the same
  records). A gap that starts with an event of a group (not a boundary
  type): no jump.

So the jump reads the file's bytes up to ``first`` once, in C, instead of
walking them event by event in Python twice (``replica_start`` without an
index, then the stream); the index gives ``first`` and the state there.
"""
from __future__ import annotations

from typing import NamedTuple

from ..binlog.events import BOUNDARY_TYPES, GROUP_RECORD
from ..binlog.walk import group_record_chunks
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
    gaps: tuple = ()        # (start, end, the domains reached before it) of each run of events outside groups

    def spans(self) -> list:
        """Where the stream reads after the file's leading events: each gap,
        then from ``offset`` on (end None), with the domains reached before each."""
        return [*self.gaps, (self.offset, None, self.reached)]


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
        found = groups_before(f.binlog, first.start, skipper)
    except GtidxError:
        return None                 # the index or the bytes do not say: the walk does
    if found is None:
        return None
    if stop is not None:
        for g in state:
            stop.group(*g)
        if stop.reached:
            return None
    gaps, reached = found
    return Jump(first.start, state, reached, gaps)


def groups_before(b, offset: int, skipper: Skipper) -> tuple | None:
    """The file's groups up to ``offset`` (a group's start): the runs of
    events between them, each with the skipped domains reached before it,
    and the domains reached before ``offset`` (a group of the requested GTID's
    server at a seq at least the requested one: by the walk's rule only the
    requested GTID itself, left out, comes before the first group sent).
    None where a gap starts with an event that is not a boundary type."""
    pending, reached, gaps, prev = skipper.pending, [], [], None
    chunks = group_record_chunks(b)
    try:
        for chunk in chunks:
            for gs, ge, seq, _, server, domain, _ in GROUP_RECORD.iter_unpack(chunk):
                if gs >= offset:
                    return _closed(b, gaps, reached, prev, offset)
                if prev is not None and gs != prev:
                    if not _boundary_at(b, prev):
                        return None
                    gaps.append((prev, gs, tuple(reached)))
                want = pending.get(domain)
                if want is not None and server == want.server and seq >= want.seq and domain not in reached:
                    reached.append(domain)
                prev = ge
    finally:
        chunks.close()
    return _closed(b, gaps, reached, prev, offset)


def _closed(b, gaps: list, reached: list, prev: int | None, offset: int) -> tuple | None:
    """``groups_before``'s answer once the groups reach ``offset``: the run
    between the last group and ``offset`` too."""
    if prev is not None and prev != offset:
        if prev > offset or not _boundary_at(b, prev):
            return None
        gaps.append((prev, offset, tuple(reached)))
    return tuple(gaps), tuple(reached)


def _boundary_at(b, offset: int) -> bool:
    header = b.event_header(offset)
    return header is not None and header[1] in BOUNDARY_TYPES
