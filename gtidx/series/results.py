"""What the answers of a binlog series to its two lookups are: where a GTID
is (``Location``) and the state at an offset (``StateAt``), and the error
of binlogs of several histories (``SeveralHistories``). A GTID logged more
than once lists its places as ``series.answers.Occurrence``s (made only
then). The answers of the other questions are
``series.answers``', which these lookups do not import. Both flavors answer
in these types (MySQL's with its GTIDs and sets in the same fields);
``gtidx.api`` exports them."""

from typing import NamedTuple  # (annotations evaluated here, not postponed: a NamedTuple
#                                 would compile each field's annotation string at import)

from ..errors import BadInputError
from ..gtid import BinlogState, Gtid, Position


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


class Location(NamedTuple):
    """Where a GTID's event group is: its GTID event at ``start``, its last
    event ending at ``end``; a reader resuming after it continues at ``resume``.

    With ``gtid_strict_mode=OFF`` a GTID can be logged more than once: the
    answer is then the first occurrence in file order, and ``occurrences``
    lists all of them (this one first), in file order (``Occurrence``s,
    ``series.answers``'). Empty: the GTID is
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

