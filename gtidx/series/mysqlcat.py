"""What a MySQL series takes from its catalog (``catalog_mysql``), and the
answers that cover many files: the set after the last file, a point in
time.

The catalog is trusted as MariaDB's is (``trust.CatalogTrust``, the same
rules): each entry is checked against what is there now before it is
taken (a local file's identity, one ``stat``; an object's size and ETag,
one LIST of the prefix), and again when its file is opened (identity, size,
fingerprint, Previous_gtids: ``Entry.problem``); a file that differs is
read, with one warning. A trusted entry gives its file's Previous_gtids
(the bisection of ``locate`` and ``replica_start`` opens no file for it),
the set after the last file, and what ``at_time`` needs to pass over a file
unread: its highest transaction timestamp.
"""
from __future__ import annotations

from ..binlog.mysql import MysqlBinlog
from ..inputs import first_second, parse_time
from .answers import TimePoint
from .trust import CatalogTrust


class MysqlCatalogUse(CatalogTrust):
    """The catalog hooks and the many-file answers of ``MysqlSeries``
    (which opens files: ``opened``, ``previous_gtids``, ``_start_for_offset``)."""

    HISTORIES = "Previous_gtids sets"

    def init_catalog(self) -> None:
        self._catalog: dict = {}              # path -> its catalog entry (catalog_mysql.MysqlEntry), while trusted
        self.history: int | None = None       # the catalog's history these files are (use_catalog)
        self._distrusted = 0                  # catalog entries found stale so far
        self._listed_same: set = set()        # objects a LIST showed to be their entry's (size, ETag)
        self._ends: dict[str, int] = {}       # path -> end of its last complete event
        self._end_set = None                  # ((path, size), the set after the last file)

    # -- the hooks of CatalogTrust ----------------------------------------------------------------
    def histories_rule(self, entries: list) -> list:
        from .. import catalog, catalog_mysql
        return catalog.histories_of(entries, catalog_mysql.assign_histories)

    def take_entry(self, path: str, e) -> None:
        self._prev[path] = e.start

    def read_instead(self, path: str, b) -> None:
        self._prev[path] = b.previous_gtids

    def check_binlog(self, path: str):
        return MysqlBinlog(path, self.store)

    def open_binlog_of(self, path: str):
        return self._open.get(path)

    def forget_entry(self, path: str) -> None:
        self._prev.pop(path, None)
        self._end_set = None

    def checked_entry(self, path: str):
        """The trusted entry of ``path`` once the file is the one it describes:
        a LIST showed its object unchanged, or it is opened and compared
        (``opened`` drops a stale one); None when it has none."""
        if path in self._catalog and path not in self._listed_same:
            self.opened(path)
        return self._catalog.get(path)

    # -- answers over the files -------------------------------------------------------------------
    def _end(self, b: MysqlBinlog, start: int) -> int:
        """The end of the last complete event of ``b`` (walked once per file, from ``start``)."""
        end = self._ends.get(b.path)
        if end is None:
            end = self._ends[b.path] = b.complete_end(start, closed_check=False)
        return end

    def end_set(self):
        """The GTID set after the last complete transaction of the last file:
        what the server's @@gtid_executed was when it wrote it (as far as
        the binlogs show); its catalog entry's when trusted."""
        path = self.files[-1]
        entry = self.checked_entry(path)
        if entry is not None:
            return entry.end.copy()
        b = self.opened(path)
        key = (path, b.size)
        if self._end_set is None or self._end_set[0] != key:
            offset, out, _ = self._start_for_offset(path, b.size)
            for g in b.transactions(offset if offset > b.body_start else None):
                if g.gtid is not None:
                    out.add(*g.gtid)
            self._end_set = (key, out)
        return self._end_set[1].copy()

    def older(self, path: str, first: int) -> bool:
        """Does the trusted catalog entry of ``path`` say every transaction of
        it is older than the second ``first`` (or it has none)? A closed file
        is then passed over unopened, as MariaDB's ``BinlogSeries.older``."""
        entry = self._catalog.get(path)
        if entry is None or entry.raw["in_use"]:
            return False
        top = entry.max_second()
        return top is None or top < first

    def newer(self, path: str, last: int) -> bool:
        """Does the trusted catalog entry of ``path`` say every transaction of
        it is stamped after the second ``last`` (or it has none)? A
        closed file whose lowest possible second (``MysqlEntry.min_second``)
        is past ``last`` holds no transaction at or before it."""
        entry = self._catalog.get(path)
        if entry is None or entry.raw["in_use"]:
            return False
        low = entry.min_second()
        return low is None or low > last

    def at_time(self, when) -> TimePoint:
        """Where a restore to ``when`` stops (as ``BinlogSeries.at_time``):
        the first transaction, in file order, whose timestamp (its
        original_commit_timestamp's second, else its GTID event's) is at
        least ``when``, and the GTID set just before it (``position``);
        none that late: the end of the last binlog and the set there. A
        file whose trusted catalog entry says all of it is older is passed
        over unread (``older``); the others are walked (``via`` "scan", as
        MariaDB's answers a walk)."""
        t = parse_time(when)
        first = first_second(t)
        for path in self.files:
            if path != self.files[-1] and self.older(path, first):
                continue
            b = self.opened(path)
            have = self.previous_gtids(path).copy()
            for g in b.transactions():
                if g.timestamp >= first:
                    return TimePoint(t, b.path, g.start, g.gtid, have, g.timestamp, "scan")
                if g.gtid is not None:
                    have.add(*g.gtid)
        b = self.opened(self.files[-1])
        entry = self._catalog.get(b.path)
        end = self._end(b, b.body_start if entry is None else entry.raw["end"])
        return TimePoint(t, b.path, end, None, self.end_set(), None, "scan")
