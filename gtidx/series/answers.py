"""The answers of a binlog series' questions other than where a GTID is and
the state at an offset (``series.results``): where a replica at a position
starts (``ReplicaStart``), the event boundaries around a byte (``Probe``),
where a restore to a time stops (``TimePoint``) and one binlog's facts
(``BinlogInfo``); and the places of a GTID logged more than once
(``Occurrence``: ``Location.occurrences``). Imported where they are made,
so that a lookup of a GTID (logged once) or an offset does not create these
types; ``gtidx.api`` exports them. Both flavors answer in these types
(MySQL's with its GTIDs and sets in the same fields)."""

from typing import NamedTuple  # (annotations evaluated here, not postponed: a NamedTuple
#                                 would compile each field's annotation string at import)

from ..gtid import BinlogState, Gtid, Position
from .results import Location


class Occurrence(NamedTuple):
    """One place a GTID's event group was logged (file, GTID event offset, end)."""
    file: str
    start: int
    end: int


class ReplicaStart(NamedTuple):
    """Where the server starts sending to a replica at ``position``: it reads
    ``file`` from ``offset``, always 4, the file's start (the found file is
    read from its first event: the fake Rotate event a MariaDB 10.11 replica
    receives first names this file and offset; ``mariadb-binlog
    --start-position=4 FILE`` reads what the server reads), with the state
    there, ``state``: the file's GTID_LIST (``BINLOG_GTID_POS(file, 4)``).
    From there it skips, per domain, every group up to and including the
    position's GTID (``skip``: the position less the domains whose GTID that
    state already holds); the first group it sends is ``first`` (None when
    the replica is up to date). Only ``via`` tells whether an index
    shortened the walk to ``first``."""
    position: Position
    file: str
    offset: int
    state: BinlogState
    skip: Position
    first: Location | None
    via: str


class Probe(NamedTuple):
    """The event boundaries around any byte of a binlog (``gtidx probe``):
    ``before`` is the start of the event holding ``offset`` and ``after``
    the next boundary (both ``offset`` when it is a boundary; ``after`` is
    the file size at its end). Offsets 1-3 (the file's magic) lie between
    0 and 4. ``state``: the GTID state at ``before``, as BINLOG_GTID_POS
    gives it there (None: unknown, damaged bytes lie between the walk's start
    and ``before``). ``damaged``: ``(lo, hi)``, the last range of bytes
    before ``after`` in which no event can be trusted (the chain broke at
    ``lo``, ``hi`` is the next trustworthy boundary), or None."""
    file: str
    offset: int
    before: int
    after: int
    state: BinlogState | None
    damaged: tuple | None
    via: str                 # "index" or "scan": where the walk started

    @property
    def position(self) -> Position | None:
        """One GTID per domain at ``before``: what BINLOG_GTID_POS(file, before) prints."""
        return None if self.state is None else self.state.position()


class TimePoint(NamedTuple):
    """The answer to "where does a restore to time ``time`` stop": the first
    event group, in file order, whose GTID event timestamp is at least
    ``time`` starts at ``offset`` of ``file`` (``gtid``, logged at
    ``timestamp``); ``position`` is the GTID position just before it, what
    the restore replays up to. No group that late: ``gtid`` and
    ``timestamp`` are None, ``file``/``offset`` the end of the last binlog
    and ``position`` its end state's."""
    time: int | float        # unix seconds, exact (parse_time's: a Fraction when no float is exactly it)
    file: str
    offset: int
    gtid: Gtid | None
    position: Position
    timestamp: int | None
    via: str


class BinlogInfo(NamedTuple):
    file: str
    size: int
    server_version: str
    checksum: str            # "CRC32" or "NONE"
    growing: bool            # FDE IN_USE flag: still written, or not closed cleanly
    start_state: BinlogState  # from the GTID_LIST event (a MySQL binlog's: its Previous_gtids, a GtidSet)
    body_start: int          # offset after the GTID_LIST event (MySQL: after PREVIOUS_GTIDS)
