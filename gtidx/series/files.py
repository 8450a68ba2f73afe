"""The files a series keeps open: ``SeriesFile`` (a binlog with its index
status) and the series' least-recently-used caches of them (``FileCache``:
files opened with their index, and binlogs opened alone for their start
states), at most ``cache`` of each."""
from __future__ import annotations

from ..binlog.mariadb import Binlog
from ..errors import GtidxError, MySQLBinlogError
from ..gtid import BinlogState
from ..index.files import IndexState, IndexStatus, open_index, stored_facts
from ..liblog import log


class SeriesFile:
    """An open binlog with its index status, as one lookup set keeps it."""

    def __init__(self, path: str, use_index: bool, store=None, index_root=None, binlog: Binlog | None = None):
        self.binlog = binlog if binlog is not None else Binlog(path, store)
        self.index: IndexStatus | None = None
        self._down: set | None = None      # pairs_going_down(), once computed
        if use_index:
            self.index = open_index(self.binlog, index_root=index_root)
            if not self.index.usable:
                self.fall_back(f"{self.index.state}: {self.index.reason}")

    @property
    def path(self) -> str:
        return self.binlog.path

    def fall_back(self, why: str) -> None:
        """Answer this file by scan from now on (its index is unusable: ``why``), said once as a warning."""
        log.warning("%s: no usable index (%s); answering by scan", self.path, why)
        if self.index is not None:
            self.index.close()
            self.index = IndexStatus(self.index.path, IndexState.STALE, why)

    @property
    def reader(self):
        return self.index.reader if self.index is not None and self.index.usable else None

    def start_record(self) -> tuple[int, BinlogState]:
        b = self.binlog
        return b.body_start, b.start_state.copy()

    def trusted(self, offset: int) -> bool:
        """An index record's offset must be the end of the file or hold a real
        event (its CRC checks out): a cheap guard against a stale index."""
        b = self.binlog
        return (offset == b.size and not b.growing) or b.event_ok(offset)

    def record(self, search) -> tuple[int, BinlogState, str]:
        """(offset, state, via) to scan from: the index record ``search``
        picks, or the start of the file."""
        r = self.reader
        if r is not None:
            try:
                rec = search(r)
            except GtidxError as e:
                self.fall_back(f"index failed: {e}")
            else:
                if rec is None or rec.offset <= self.binlog.body_start:
                    return (*self.start_record(), "index")    # record 0: checked at open
                if self.trusted(rec.offset):
                    return rec.offset, rec.state.copy(), "index"
                self.fall_back(f"record at offset {rec.offset} is not an event in this binlog (stale index)")
        return (*self.start_record(), "scan")

    def pairs_going_down(self) -> set | None:
        """The (domain, server) pairs whose seq_no goes down from one index
        record of this file to a later one, or that may have been logged
        again between two records (gtid_strict_mode=OFF); None when there is
        no usable index. Records lie at group ends, so two consecutive
        records with the same state had groups between them that changed
        nothing: GTIDs logged again, each its domain's last. One walk over
        the records, kept. A domain whose last GTID moves back to a server at
        the seq that server already had: that server logged it again.

        Where the index stored what its build saw of the whole file
        (``stored_facts``: its ``repeats``, from every group), those pairs
        are the answer, exact (also a repeat between two records) and with
        no walk of the records."""
        if self._down is None and self.reader is not None:
            meta = self.index.meta
            stored = stored_facts(self.binlog, meta, checked=True) if meta is not None else None
            if stored is not None and stored[0] >= self.binlog.size:
                self._down = set(stored[2])
                return self._down
            records = getattr(self.reader, "records", None)
            if records is None:
                return None
            down, last, prev = set(), {}, None
            try:
                for rec in records():
                    for d, s, q in rec.state:
                        if q < last.get((d, s), 0):
                            down.add((d, s))
                        last[(d, s)] = q
                    if prev is not None:
                        if rec.state == prev:
                            down.update((g.domain, g.server) for g in rec.state.position())
                        for g in rec.state.position():
                            # the domain's last moved back to a server at the seq it had
                            if prev.last(g.domain) != g and prev.get(g.domain, g.server) == g.seq:
                                down.add((g.domain, g.server))
                    prev = rec.state
            except GtidxError:
                return None
            self._down = down
        return self._down

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
        self.binlog.close()


class FileCache:
    """The open files of a ``BinlogSeries`` (``_open``: SeriesFiles,
    ``_bare``: Binlogs opened without their index), least recently used
    closed first past ``_cache`` of each."""

    def opened(self, path: str) -> SeriesFile:
        """The open ``SeriesFile`` of ``path`` (one of the series' files),
        opened now if it is not (the least recently used closed beyond the
        cache's size)."""
        f = self._open.get(path)
        if f is not None:
            self._open.move_to_end(path)
            return f
        b = self._bare.pop(path, None)
        f = SeriesFile(path, self.use_index, self.store, self.index_root, self.open_binlog(path) if b is None else b)
        entry = self._catalog.get(path)
        if entry is not None:
            why = entry.problem(f.binlog)
            if why:
                self._distrust(path, why)
        self._open[path] = f
        if len(self._open) > self._cache:
            _, old = self._open.popitem(last=False)
            old.close()
        return f

    def _binlog(self, path: str) -> Binlog:
        """The file, open: its ``SeriesFile``'s binlog, else one opened without
        its index and kept (up to ``cache`` of them, the least recently used
        closed first) until ``opened`` needs it or the series closes: planning
        reads every file's start state, and a lookup then opens some of the
        same files again."""
        f = self._open.get(path)
        if f is not None:
            return f.binlog
        b = self._bare.get(path)
        if b is not None:
            self._bare.move_to_end(path)
            return b
        b = self._bare[path] = self.open_binlog(path)
        if len(self._bare) > self._cache:
            _, old = self._bare.popitem(last=False)
            old.close()
        return b

    def open_binlog(self, path: str) -> Binlog:
        """``path`` opened (the object its listing opened, when it did). A
        MySQL binlog in a series whose listing read one flavor (an object
        store reads one object for it) is the mix it is: a MySQLBinlogError
        (exit 2) saying so, not "not supported"."""
        head = self.head(path)
        try:
            return Binlog(path, self.store) if head is None else Binlog(path, self.store, head)
        except MySQLBinlogError as e:
            if not self.one_flavor or e.offset != 4:       # 4: its FORMAT_DESCRIPTION is a MySQL server's
                raise
            raise MySQLBinlogError("a MySQL binlog among MariaDB binlogs: one series is one server's history",
                                   path=path, offset=4,
                                   hint="give the files of one server (a directory or binlog.index of its own)"
                                   ) from None

    def binlog(self, path: str) -> Binlog:
        """The open ``Binlog`` of one file of the series (kept open with the
        series' other files, as lookups keep it)."""
        return self.opened(self.resolve(path)).binlog

    def close(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()
        for b in self._bare.values():
            b.close()
        self._bare.clear()
