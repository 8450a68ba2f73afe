"""What a series has learned of its files: start and end states, and per
(domain, server) the seq ranges each file logs and the files in which it
goes down (a walk, or what the index's build stored), with the planner's
inputs made of them."""
from __future__ import annotations

import os

from ..errors import GtidxError, MySQLBinlogError
from ..gtid import BinlogState, Gtid
from ..index.files import stored_facts
from ..liblog import log
from .planner import UNKNOWN, LocatePlan, NoFile, Planner, PlanTable, Unknown


class Facts:
    """The facts of a ``BinlogSeries``' files, learned once and kept."""

    def start_state(self, path: str) -> BinlogState:
        """The file's GTID_LIST state (cached: cheap to ask for many files)."""
        st = self._start.get(path)
        if st is None:
            st = self._start[path] = self._binlog(path).start_state.copy()
        return st

    def end_state(self) -> BinlogState:
        """The state after the last complete event of the last file."""
        return self._end_of(self.files[-1]).copy()

    def _end_of(self, path: str) -> BinlogState:
        """The end state of ``path`` (cached; not a copy: do not change it).
        An object a LIST showed to be its catalog entry's is not opened."""
        entry = self._catalog.get(path)
        if entry is not None and path in self._listed_same:
            key = (path, entry.raw["size"])
            if self._end is None or self._end[0] != key:
                self._end = (key, entry.end.copy())
            return self._end[1]
        f = self.opened(path)
        b = f.binlog
        if self._end is None or self._end[0] != (b.path, b.size):
            entry = self._catalog.get(path)        # checked against the file as opened() opened it
            if entry is not None:
                self._end = ((b.path, b.size), entry.end.copy())
                return self._end[1]
            offset, state, via = f.record(lambda r: r.last_record())
            end = b.complete_end(offset)
            state, _ = self._apply(f, state, offset, end, via)
            self._end = ((b.path, b.size), state)
        return self._end[1]

    def _latest_known(self) -> tuple[BinlogState, GtidxError | None]:
        """The end state, or, when the newest binlogs cannot be read, the end
        state of the newest one that can (a lower bound) and the error of the
        newest."""
        failed = None
        for path in reversed(self.files):
            try:
                return self._end_of(path).copy(), failed
            except GtidxError as e:
                self._warn_damaged(path, e)
                failed = failed or e
        raise failed

    def plan_table(self, domain: int, server: int) -> PlanTable:
        """The plans of every seq_no of one (domain, server), as
        ``locate_many`` plans its GTIDs: every binlog learned first (its
        stored seq ranges, else one walk), so each plan is exact."""
        self.learn(self.files)
        return PlanTable(*self._plan_inputs((domain, server)))

    def _plan(self, g: Gtid) -> LocatePlan | NoFile:
        """``plan_locate`` for ``g`` with what this series knows: the bounds
        (its pair's planner, kept), the files seen going down, and the ranges
        of the files learned. (The end state is read, also where the GTID's
        file is an older one: a damaged newest binlog is then reported by
        every lookup, as ``status`` would.)"""
        planner, dipped, ranges = self._plan_inputs((g.domain, g.server))
        return planner.plan(g.seq, dipped, ranges)

    def _plan_inputs(self, key: tuple) -> tuple:
        """(planner, dipped, ranges) of ``_plan`` for one (domain, server)."""
        last = self._end_bound(key)
        cached = self._planners.get(key)
        if cached is None or cached.bounds[-1] != last:
            cached = Planner([self._start_bound(p, key) for p in self.files] + [last])
            self._planners[key] = cached
        dipped, ranges = self._dips.get(key, ()), self._ranges.get(key, {})
        learned = self._learned
        return (cached, dipped and {i for i, p in enumerate(self.files) if p in dipped},
                {i: ranges.get(p) for i, p in enumerate(self.files) if p in ranges or p in learned})

    def learn_all(self) -> bool:
        """Learn every binlog not learned yet (``learn``): then the planner
        knows exactly which files can hold any GTID. False when there was
        nothing left to learn."""
        return self.learn([p for p in self.files if p not in self._learned])

    def learn(self, paths, walk: bool = True) -> bool:
        """Note, per (domain, server), the lowest and highest seq_no each
        binlog of ``paths`` logs and whether it goes down there (below the one
        before it, or the file's start state), so that the planner knows
        exactly which of them can hold a GTID. From what ``build``/``tail``
        stored with the index (``IndexMeta.seen``) where it covers the file,
        walking the rest of the file past what it covers (all of it
        without; ``walk=False``: only files stored whole). A file that cannot
        be read is warned about once and left unknown. False when ``paths``
        had nothing left to learn."""
        todo = [p for p in paths if p not in self._learned and p not in self._damaged_learn]
        learned = False
        for path in todo:
            try:
                seen = self._read_facts(path, walk)
            except GtidxError as e:
                self._damaged_learn.add(path)   # planned as unknown; its lookups fail with this
                self._warn_damaged(path, e)
                continue
            if seen is not None:
                self.learn_from(path, {k: (r[0], r[1], r[3]) for k, r in seen.items()})
                learned = True
        return learned

    def learn_file(self, path: str) -> dict:
        """{(domain, server): (lowest, highest, goes down)} of the seq_nos one
        binlog of the series logs: what ``build``/``tail`` stored with its
        index, the rest walked. GtidxError when it cannot be read."""
        return {k: (r[0], r[1], r[3]) for k, r in self._read_facts(self.resolve(path)).items()}

    def learn_from(self, path: str, ranges: dict) -> None:
        """Take ``learn_file(path)`` from elsewhere (a planning job that
        asked each file once): the planner then knows the file exactly."""
        path = self.resolve(path)
        self._learned.add(path)
        for key, (lo, hi, down) in ranges.items():
            if down:
                self._dips.setdefault(key, set()).add(path)
            self._ranges.setdefault(key, {})[path] = (lo, hi)

    def _read_facts(self, path: str, walk: bool = True) -> dict | None:
        """{(domain, server): [lowest, highest, last, went down]} of one
        binlog; None when that needs a walk and ``walk`` is False."""
        f = self._open.get(path)
        if f is not None:
            index = f.index
            stored = stored_facts(f.binlog, index.meta if index is not None else None,
                                 checked=index is not None and index.usable)
            size = f.binlog.size
        else:
            b = self._binlog(path)                      # the stored ranges need no index opened
            stored = stored_facts(b, index_root=self.index_root)
            size = b.size
        seen: dict = {}
        offset = None
        if stored is not None:
            offset, ranges, repeats = stored
            for key, (lo, hi) in ranges.items():
                seen[key] = [lo, hi, hi, key in repeats]     # last: hi while it only grew
            if offset >= size:
                return seen
        if not walk:
            return None
        b = self.opened(path).binlog
        start = b.start_state
        for _, _, (_, server, seq, domain, _) in b.group_spans(offset):
            key = (domain, server)
            r = seen.get(key)
            if r is None:
                before = start.get(domain, server)
                seen[key] = [seq, seq, seq, before is not None and seq <= before]
                continue
            if seq <= r[2]:
                r[3] = True
            r[2] = seq
            if seq < r[0]:
                r[0] = seq
            elif seq > r[1]:
                r[1] = seq
        return seen

    def _start_bound(self, path: str, key: tuple) -> int | Unknown | None:
        try:
            return self.start_state(path).get(*key)
        except GtidxError as e:
            self._warn_damaged(path, e)
            return UNKNOWN

    def _end_bound(self, key: tuple) -> int | Unknown | None:
        try:
            stored = None if self.files[-1] in self._catalog else self._stored_end(self.files[-1])
            if stored is not None and key not in stored[1]:
                # the pair only grew in the newest binlog: its last seq_no is
                # its highest (or, not logged there, the start state's)
                r = stored[0].get(key)
                return r[1] if r is not None else stored[2].get(*key)
            return self._end_of(self.files[-1]).get(*key)
        except GtidxError as e:
            self._warn_damaged(self.files[-1], e)
            return UNKNOWN

    def _stored_end(self, path: str) -> tuple | None:
        """(ranges, repeats, start state) of a closed binlog whose usable
        index stored what its build saw of all of it (``stored_facts``): the
        end bound of a pair that only grew there needs no index descent and
        no walk to the end. None otherwise (kept per file and size)."""
        f = self.opened(path)
        b = f.binlog
        if self._stored is not None and self._stored[0] == (b.path, b.size):
            return self._stored[1]
        out = None
        index = f.index
        if not b.growing and index is not None and index.usable and path not in self._catalog:
            stored = stored_facts(b, index.meta, checked=True)
            if stored is not None and stored[0] == b.size:
                out = (stored[1], stored[2], b.start_state)
        self._stored = ((b.path, b.size), out)
        return out

    def _warn_damaged(self, path: str, e: GtidxError) -> None:
        if isinstance(e, MySQLBinlogError):
            raise e         # not a damaged file: a series of MySQL binlogs, refused as a whole (exit 2)
        if path not in self._damaged:
            self._damaged.add(path)
            log.warning("%s (lookups that need %s fail; the others are answered from the other "
                        "binlogs)", e if e.path else f"{path}: {e}", os.path.basename(path))
