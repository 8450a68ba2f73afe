"""Starting a GTID stream near the replica's position, not at its file's start.

The server (and gtidx without an index) reads the start file from offset 4
and walks over every group the replica already has. ``replica_start``
already knows, through the index, the first group it sends (``first``): the
stream may go from the file's leading events straight there, when what the
walk would have done over the bytes in between is known without walking
them event by event:

* every group in between is left out: ``first`` is by definition the first
  group the skip rule sends; the jump checks it group by group with the
  walk's own rule (``series.mariadb.start_leaves_out``), else no jump;
* what the walk sends while it leaves them out: a fake GTID_LIST each time
  a skipped domain is reached (the binlog state read so far, log_pos the
  end of the reaching group), and the state and domains still to reach at
  ``first``: the same rule and the same state, fed with the groups' GTIDs;
* where ``START SLAVE UNTIL``'s position (``@slave_until_gtid``) stops the
  stream: it is not reached before ``first`` (else the walk, which stops
  after the group that reaches it, is taken);
* the events outside groups in between, which the walk sends: a
  BINLOG_CHECKPOINT the server wrote after a few groups of the file (the
  previous binlog's last commits done), an INCIDENT. A gap between two
  groups is sent as the walk sends it, with the fake GTID_LISTs owed
  before it. A gap that starts with an event of a group (not a boundary
  type): no jump.

The groups come from the compiled group walk (``binlog.walk.group_record_chunks``,
C where it is built): the file's bytes up to ``first`` are read once, in C,
instead of walked event by event in Python twice (``replica_start``
without an index, then the stream).
"""
from __future__ import annotations

from typing import NamedTuple

from ..binlog.events import BOUNDARY_TYPES, GROUP_RECORD
from ..binlog.walk import group_record_chunks
from ..errors import GtidxError
from ..gtid import BinlogState, Position
from ..series.mariadb import start_leaves_out
from .stream import Skipper, Until


class Span(NamedTuple):
    """Where a jumped stream reads: from the event boundary ``lo`` up to
    ``hi`` (None: the file's end), after the fake GTID_LISTs ``announced``
    ((log_pos, entries) each) that the walk would have sent before ``lo``;
    ``last``: the span from the first group sent on."""
    lo: int
    hi: int | None
    announced: tuple
    last: bool


class Jump(NamedTuple):
    """Where the stream goes on in its first file once its leading events are
    sent (``offset``: the first group sent), the walk's binlog state and
    domains still to reach there, and the runs of events outside groups
    before it (``gaps``: ``Span``s)."""
    offset: int
    state: BinlogState
    pending: dict
    gaps: tuple
    announced: tuple        # the fake GTID_LISTs owed after the last gap

    def spans(self) -> list:
        """Where the stream reads after the file's leading events: each gap,
        then from ``offset`` on."""
        return [*self.gaps, Span(self.offset, None, self.announced, True)]


def index_jump(logs, start, skipper: Skipper, until: str | None) -> Jump | None:
    """The jump a GTID start may take (``start``: ``logs.replica_start``'s
    answer; ``skipper``: its skip rule, not yet applied), else None.
    ``until``: the replica's ``@slave_until_gtid``."""
    first = start.first
    if first is None or first.file != start.file or start.via != "index":
        return None
    try:
        b = logs.opened(start.file).binlog
        if first.start <= b.body_start:
            return None
        stop = Until(Position.parse(until)) if until else None
        return walk_groups(b, first.start, skipper, stop)
    except GtidxError:
        return None                 # the index or the bytes do not say, or a refusal: the walk meets it


def walk_groups(b, offset: int, skipper: Skipper, stop: Until | None) -> Jump | None:
    """The walk's work over the file's groups before ``offset`` (a group's
    start), done on their GTIDs as the stream does it on their events:
    the state read (from the file's GTID_LIST on with an UNTIL position,
    else from nothing, and only while a domain is to reach), the skip rule,
    the fake GTID_LIST owed at each domain reached, the UNTIL position.
    None where a group before ``offset`` would be sent, the UNTIL position is
    reached, or a gap starts with an event that is not a boundary type."""
    pending = dict(skipper.pending)
    state = b.start_state.copy() if stop is not None else BinlogState()
    if stop is not None:
        for g in state:
            stop.group(*g)
    gaps, owed, prev = [], [], None
    chunks = group_record_chunks(b)
    try:
        for chunk in chunks:
            for gs, ge, seq, _, server, domain, _ in GROUP_RECORD.iter_unpack(chunk):
                if gs >= offset:
                    break
                if prev is not None and gs != prev:
                    if not _boundary_at(b, prev):
                        return None
                    gaps.append(Span(prev, gs, tuple(owed), False))
                    owed = []
                if stop is not None or pending:
                    state.apply(domain, server, seq)
                before = len(pending)
                if not start_leaves_out(pending, domain, server, seq, skipper.strict, b.path, gs):
                    return None
                if len(pending) < before:
                    owed.append((ge, state.entries()))
                if stop is not None:
                    stop.group(domain, server, seq)
                prev = ge
            else:
                continue
            break
    finally:
        chunks.close()
    if stop is not None and stop.reached:
        return None
    if prev is not None and prev != offset:
        if prev > offset or not _boundary_at(b, prev):
            return None
        gaps.append(Span(prev, offset, tuple(owed), False))
        owed = []
    return Jump(offset, state, pending, tuple(gaps), tuple(owed))


def _boundary_at(b, offset: int) -> bool:
    header = b.event_header(offset)
    return header is not None and header[1] in BOUNDARY_TYPES
