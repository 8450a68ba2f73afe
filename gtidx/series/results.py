"""What the answers of a binlog series are: one record type per question
(``BinlogInfo``, ``StateAt``, ``Probe``, ``Location`` with its
``Occurrence``s, ``TimePoint``, ``ReplicaStart``) and the error of binlogs
of several histories (``SeveralHistories``). Both flavors answer in these
types (MySQL's with its GTIDs and sets in the same fields); ``gtidx.api``
exports them."""

from typing import NamedTuple  # (annotations evaluated here, not postponed: a NamedTuple
#                                 would compile each field's annotation string at import)

from ..errors import BadInputError
from ..gtid import BinlogState, Gtid, Position


class BinlogInfo(NamedTuple):
    file: str
    size: int
    server_version: str
    checksum: str            # "CRC32" or "NONE"
    growing: bool            # FDE IN_USE flag: still written, or not closed cleanly
    start_state: BinlogState  # from the GTID_LIST event (a MySQL binlog's: its Previous_gtids, a GtidSet)
    body_start: int          # offset after the GTID_LIST event (MySQL: after PREVIOUS_GTIDS)


class StateAt(NamedTuple):
    """The answer to "what GTID state holds at FILE offset N"."""
    file: str
    offset: int
    state: BinlogState       # every (domain, server) entry
    via: str                 # "index" or "scan"

    @property
    def position(self) -> Position:
        """One GTID per domain: what BINLOG_GTID_POS(file, offset) prints."""
        return self.state.position()


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


class Occurrence(NamedTuple):
    """One place a GTID's event group was logged (file, GTID event offset, end)."""
    file: str
    start: int
    end: int


class Location(NamedTuple):
    """Where a GTID's event group is: its GTID event at ``start``, its last
    event ending at ``end``; a reader resuming after it continues at ``resume``.

    With ``gtid_strict_mode=OFF`` a GTID can be logged more than once: the
    answer is then the first occurrence in file order, and ``occurrences``
    lists all of them (this one first), in file order. Empty: the GTID is
    logged once as far as the binlogs show (see ``plan_locate``)."""
    gtid: Gtid
    file: str
    start: int
    end: int
    resume: int
    timestamp: int
    via: str
    occurrences: tuple = ()
    history: int | None = None    # set when the binlogs' catalog shows several histories: the one answered in


class SeveralHistories(BadInputError):
    """The binlogs asked about are of several histories (their catalog says
    so): a lookup answers within one (``history=``). ``groups``: [(history
    id, [file names])]."""

    def __init__(self, message: str, groups: list, **kw):
        super().__init__(message, **kw)
        self.groups = groups


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
