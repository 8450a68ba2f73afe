"""Driver-side planning of ``locate``: each binlog's summary (start state,
end state of the last, seq ranges), and the plans built from them that
assign every input row to the file whose task answers it (``Plan`` for
MariaDB binlogs, ``MysqlPlan`` for MySQL's). Both are picklable: they are
broadcast to the executors.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import api, catalog, catalog_mysql
from ..errors import GtidxError
from ..gtid import BinlogState, Gtid, Position
from ..mysqlgtid import GtidSet, MysqlGtid
from ..series.mysql import holder, parse_spec
from .where import Where

if TYPE_CHECKING:
    import pyarrow as pa

# The planner's rows (``Plan.assign_batch``): the input value, the index of
# the file whose task answers it (null: none, ``reason`` says why) and the
# GTID parsed (null for a position, or a seq_no beyond a signed long).
ASSIGNED = "gtid string, file int, domain long, server long, seq long, reason string"
ASSIGNED_NAMES = ["gtid", "file", "domain", "server", "seq", "reason"]


def summary(path: str, last: bool, where: "Where") -> tuple[str, str, str | None, list | None]:
    """(file, start state, end state for the last file, seq ranges): what
    planning needs; ``api.UNKNOWN`` for a state a damaged binlog does not
    give, None for its ranges (the lookups that need that file then fail with
    its error, the others are answered). The ranges
    (``BinlogSeries.learn_file``, [[domain, server, lowest, highest, goes
    down], ...]) are what build stored with the index, else one walk of the
    file: with them the plan is exact (a seq that steps back and recovers
    inside a binlog cannot hide a GTID from it)."""
    start = end = api.UNKNOWN
    ranges = None
    try:
        with where.series([path]) as logs:
            start = str(logs.start_state(path))
            end = str(logs.end_state()) if last else None
            ranges = [[d, s, lo, hi, down] for (d, s), (lo, hi, down) in logs.learn_file(path).items()]
    except GtidxError:
        pass
    return path, start, end, ranges


def summary_of_entry(path: str, entry, last: bool) -> tuple[str, str, str | None, list]:
    """``summary`` of a file from its catalog entry (``BinlogSeries.cataloged``)."""
    return (path, str(entry.start), str(entry.end) if last else None,
            [[d, s, lo, hi, down] for (d, s), (lo, hi, down) in entry.seq_ranges().items()])


class Plan:
    """The summaries, and the assignment of one GTID to its file (the rules of
    BinlogSeries.locate); picklable, so it is broadcast to the executors."""

    def __init__(self, files: list[str], starts: list[str], latest: str, ranges: list,
                 entries: dict | None = None):
        self.files = files
        self.starts = starts          # text, parsed lazily on each executor
        self.latest = latest
        self.ranges = ranges          # per file: summary's ranges, or None
        self.entries = entries or {}  # path -> its catalog entry's JSON object, where planned from it
        self._parsed = None
        self._planners = {}           # (domain, server) -> its api.PlanTable
        self._learned = None          # (domain, server) -> (dipped file indexes, {file index: range})

    def _states(self):
        if self._parsed is None:
            self._parsed = ([_parse_state(s) for s in self.starts], _parse_state(self.latest))
        return self._parsed

    def assign(self, value: str | None) -> tuple[int | None, Gtid | None, str | None]:
        """(file index, the GTID or None for a position, None), or (None,
        None, why) when no file is to answer it: a GTID goes where
        ``BinlogSeries.locate`` finds it (text without a comma, parsed as
        ``locate`` parses it), a replication position (a comma) where
        ``replica_start`` starts."""
        if value is None:
            return None, None, "empty input row"
        try:
            if "," in value:
                pos, g = Position.parse(value), None
            else:
                g = Gtid.parse(value)
        except GtidxError as e:
            return None, None, str(e)
        if g is None:
            # A replica position: the newest file whose start state is before it.
            starts, _ = self._states()
            for i in range(len(self.files) - 1, -1, -1):
                if starts[i] != api.UNKNOWN and starts[i].is_before(pos):
                    return i, None, None
            return len(self.files) - 1, None, None       # replica_start explains the refusal
        return self._file_of(self.plan(g)), g, None

    def _file_of(self, plan: api.LocatePlan | str) -> int:
        # "not here" by the plan alone is not certain (a seq_no may step back
        # and recover inside a binlog): BinlogSeries.locate decides, in the last file's task
        return len(self.files) - 1 if isinstance(plan, str) else plan.files[0]

    def assign_batch(self, texts, codes=None) -> "pa.RecordBatch":
        """``assign`` for an Arrow array of input values, as an ASSIGNED
        batch. Values that are plainly ``D-S-N`` (at most 9, 9 and 18
        digits, seq_no not 0: in range) are parsed and planned as columns
        (numpy: each pair's PlanTable searched for all its seq_nos at once);
        the others one by one. ``codes``: the value the file column gets for
        each file index (default: the index)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        n = len(texts)
        fast = pc.fill_null(pc.match_substring_regex(texts, r"^[0-9]{1,9}-[0-9]{1,9}-[0-9]{1,18}$"), False)
        idx = np.flatnonzero(fast.to_numpy(zero_copy_only=False))
        plain = texts if len(idx) == n else texts.take(pa.array(idx))
        nums = pc.cast(pc.list_flatten(pc.split_pattern(plain, "-")), pa.int64()).to_numpy().reshape(-1, 3)
        good = nums[:, 2] != 0                        # seq_no 0: Gtid.parse says why, below
        idx, nums = idx[good], nums[good]
        domain = np.zeros(n, np.int64)
        server = np.zeros(n, np.int64)
        seq = np.zeros(n, np.int64)
        has_gtid = np.zeros(n, bool)
        file = np.full(n, -1, np.int32)
        reason = {}                                   # row -> why no file answers it
        domain[idx], server[idx], seq[idx], has_gtid[idx] = nums[:, 0], nums[:, 1], nums[:, 2], True
        keys = (nums[:, 0] << 32) | nums[:, 1]
        for key in np.unique(keys):
            sel = keys == key
            table = self._table((int(key) >> 32, int(key) & 0xFFFFFFFF))
            points = np.array([min(p, 2**63 - 1) for p in table.points], np.int64)
            files = np.array([self._file_of(p) for p in table.plans], np.int32)
            file[idx[sel]] = files[np.searchsorted(points, nums[sel, 2], side="right")]
        done = np.zeros(n, bool)
        done[idx] = True
        rest = np.flatnonzero(~done)
        values = texts.take(pa.array(rest)).to_pylist() if len(rest) else []
        for i, v in zip(rest.tolist(), values):
            f, g, why = self.assign(v)
            if f is not None:
                file[i] = f
            else:
                reason[i] = why
            if g is not None and g.seq < 2**63:
                domain[i], server[i], seq[i], has_gtid[i] = g.domain, g.server, g.seq, True
        absent = ~has_gtid
        none = file < 0
        if codes is not None:
            file = np.asarray(codes, np.int32)[np.where(none, 0, file)]
        if reason:
            why = [None] * n
            for i, text in reason.items():
                why[i] = text
            reasons = pa.array(why, pa.string())
        else:
            reasons = pa.nulls(n, pa.string())
        return pa.RecordBatch.from_arrays(
            [texts.cast(pa.string()), pa.array(file, mask=none),
             pa.array(domain, mask=absent), pa.array(server, mask=absent), pa.array(seq, mask=absent),
             reasons], names=ASSIGNED_NAMES)

    def plan(self, g: Gtid) -> api.LocatePlan | str:
        """``api.Planner`` on the summaries, with the seq ranges of every file
        that has them (each pair's plans tabulated once: ``_table``)."""
        return self._table((g.domain, g.server)).plan(g.seq)

    def _table(self, key: tuple) -> api.PlanTable:
        table = self._planners.get(key)
        if table is None:
            starts, latest = self._states()
            planner = api.Planner([st if st == api.UNKNOWN else st.get(*key) for st in starts + [latest]])
            dipped, ranges = self._per_pair().get(key, (set(), {}))
            known = {i: ranges.get(i) for i, r in enumerate(self.ranges) if r is not None}
            table = self._planners[key] = planner.table(dipped, known)
        return table

    def _per_pair(self) -> dict:
        if self._learned is None:
            self._learned = {}
            for i, rows in enumerate(self.ranges):
                for d, s, lo, hi, down in rows or ():
                    dipped, ranges = self._learned.setdefault((d, s), (set(), {}))
                    ranges[i] = (lo, hi)
                    if down:
                        dipped.add(i)
        return self._learned

    def share(self, logs: api.BinlogSeries) -> None:
        """Give ``logs`` the ranges of every file (its lookups need no walk)
        and the catalog entries the plan was made from (their files' start
        states need no read; each is checked when its file is opened)."""
        if self.entries:
            logs.trust({f: catalog.Entry.of(raw) for f, raw in self.entries.items()})
        for f, rows in zip(self.files, self.ranges):
            if rows is not None and f not in self.entries:
                logs.learn_from(f, {(d, s): (lo, hi, down) for d, s, lo, hi, down in rows})

    def __getstate__(self):
        return {"files": self.files, "starts": self.starts, "latest": self.latest, "ranges": self.ranges,
                "entries": self.entries}

    def __setstate__(self, state):
        self.__init__(state["files"], state["starts"], state["latest"], state["ranges"], state["entries"])


class MysqlPlan:
    """MySQL binlogs: each file's Previous_gtids (text, parsed lazily on each
    executor) and the assignment of a row to the file whose task answers it
    (``series.mysql.holder``: a GTID to the file holding it; a GTID set, a
    replica's, to its start file); picklable, broadcast. ``entries``: path ->
    the JSON object of the catalog entry a file's Previous_gtids was taken
    from (``MysqlSeries.cataloged``), handed to the executors' series
    (``share``) so that their bisections read no preamble either."""

    def __init__(self, files: list[str], prevs: list[str | None], entries: dict | None = None):
        self.files = files
        self.prevs = prevs
        self.entries = entries or {}
        self._parsed = None

    def _sets(self):
        if self._parsed is None:
            self._parsed = [None if p is None else GtidSet.parse(p) for p in self.prevs]
        return self._parsed

    def assign(self, value: str | None) -> tuple[int | None, str | None]:
        """(file index, None) or (None, why no file answers it). A file
        whose Previous_gtids could not be read stops the bisection there:
        its task gives its error."""
        if value is None:
            return None, "empty input row"
        try:
            spec = parse_spec(value)
        except GtidxError as e:
            return None, str(e)
        sets = self._sets()
        if isinstance(spec, MysqlGtid):
            known = [s for s in sets if s is not None]
            if len(known) < len(sets):
                return len(sets) - 1, None          # unread Previous_gtids: the series decides
            i = holder(sets, spec)
            return (0 if i is None else i), None    # purged: the first file's task says so
        for i in range(len(sets) - 1, -1, -1):
            if sets[i] is not None and sets[i].issubset(spec):
                return i, None
        return len(sets) - 1, None                  # replica_start explains the refusal

    def assign_batch(self, texts, codes=None) -> "pa.RecordBatch":
        import pyarrow as pa
        file, reason = [], []
        for v in texts.to_pylist():
            f, why = self.assign(v)
            file.append(None if f is None else (codes[f] if codes is not None else f))
            reason.append(why)
        nulls = pa.nulls(len(file), pa.int64())
        return pa.RecordBatch.from_arrays([texts.cast(pa.string()), pa.array(file, pa.int32()), nulls, nulls,
                                           nulls, pa.array(reason, pa.string())], names=ASSIGNED_NAMES)

    def share(self, logs) -> None:
        """Give ``logs`` (an executor's ``MysqlSeries``) the catalog entries the
        plan was made from: each is checked as the driver's were (identity,
        or one LIST of the prefix) and again when its file is opened."""
        if self.entries:
            logs.trust({f: catalog_mysql.MysqlEntry.of(raw) for f, raw in self.entries.items()})

    def gtids(self, values: list) -> list:
        """The rows of one task as ``_answer_file`` takes them: the GTID, or
        None for a replica's set."""
        out = []
        for v in values:
            try:
                spec = parse_spec(v)
            except GtidxError:
                spec = None
            out.append(spec if isinstance(spec, MysqlGtid) else None)
        return out

    def __getstate__(self):
        return {"files": self.files, "prevs": self.prevs, "entries": self.entries}

    def __setstate__(self, state):
        self.__init__(state["files"], state["prevs"], state["entries"])


def _parse_state(text: str):
    return api.UNKNOWN if text == api.UNKNOWN else BinlogState.parse(text)
