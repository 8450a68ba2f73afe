"""Which files can hold a GTID: the one planner of ``BinlogSeries.locate``
and ``gtidx.spark``. Pure: it reads no file, it is given each file's bounds
(the seq_no of a (domain, server) in its start state, and at the end of the
last) and what walks showed (dips, seq ranges)."""

import bisect

from ..gtid import Gtid



class Unknown(str):
    """The type of ``UNKNOWN``: a bound (or a start state, in ``gtidx.spark``)
    that could not be read, a damaged binlog's. One value, distinct from every
    seq_no and from None (absent); it is the text "unknown" too, which is how
    Spark's plans carry it from the driver to the executors."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown("unknown")


class NoFile(str):
    """Why no file can hold a GTID: ``Planner.plan``'s answer when it has no
    LocatePlan. A str (its reason, as the answers print it) of its own type,
    so that ``isinstance(plan, NoFile)`` tells it from a plan."""

    __slots__ = ()

    @property
    def reason(self) -> str:
        return str(self)


class LocatePlan:
    """The files (indexes into the binlog list, in file order) that can hold a
    GTID, and whether its (domain, server) looked monotonic (then at most one
    file can hold it, and it holds it at most once). Read by name, never
    unpacked: a plain class (a NamedTuple class costs every lookup's
    start-up more to create); equal when both fields are (the Spark plan's
    table is checked against the planner so)."""

    __slots__ = ("files", "monotone")

    def __init__(self, files: tuple, monotone: bool):
        self.files = files
        self.monotone = monotone

    def __eq__(self, other) -> bool:
        if type(other) is not LocatePlan:
            return NotImplemented
        return self.files == other.files and self.monotone == other.monotone

    __hash__ = None

    def __repr__(self) -> str:
        return f"LocatePlan(files={self.files!r}, monotone={self.monotone!r})"


class Planner:
    """Which files can hold a GTID of one (domain, server) (the rule of
    ``plan_locate``), prepared once from its bounds so that each GTID costs a
    bisection while the pair grows monotonically."""

    __slots__ = ("bounds", "monotone", "_below", "_above")

    def __init__(self, bounds: list):
        self.bounds = bounds
        known = [0 if b is None else b for b in bounds if b != UNKNOWN]
        self.monotone = all(a <= b for a, b in zip(known, known[1:]))
        # while monotonic, an unknown bound lies between the known ones around it
        below, last = [], 0
        for b in bounds:
            last = last if b == UNKNOWN else (b or 0)
            below.append(last)
        above, nxt = [], _INFINITE
        for b in reversed(bounds):
            nxt = nxt if b == UNKNOWN else (b or 0)
            above.append(nxt)
        above.reverse()
        self._below, self._above = below, above

    def plan(self, n: int, dipped=(), ranges=None) -> "LocatePlan | NoFile":
        bounds, count = self.bounds, len(self.bounds) - 1
        monotone = self.monotone and not dipped
        if monotone and not ranges:
            # file i can hold n when below[i] < n <= above[i + 1]: both grow with i
            hi = bisect.bisect_left(self._below, n, 0, count)
            lo = bisect.bisect_left(self._above, n, 1, count + 1) - 1
            files = tuple(range(lo, hi))
        else:
            files = []
            for i in range(count):
                if ranges and i in ranges:
                    can = ranges[i] is not None and ranges[i][0] <= n <= ranges[i][1]
                else:
                    can = not monotone or self._below[i] < n <= self._above[i + 1]
                if can:
                    files.append(i)
            files = tuple(files)
        if files:
            return LocatePlan(files, monotone)
        if bounds[-1] != UNKNOWN and n > (bounds[-1] or 0):
            return NoFile("never written")
        if bounds[0] != UNKNOWN and n <= (bounds[0] or 0):
            return NoFile("purged: the earliest binlog starts after it")
        return NoFile("no binlog that can hold it has it")

    def table(self, dipped=(), ranges=None) -> "PlanTable":
        """``plan`` for every seq_no of the pair at once (many GTIDs, one
        ``dipped`` and ``ranges``): see PlanTable."""
        return PlanTable(self, dipped, ranges)


class PlanTable:
    """``Planner.plan(n, dipped, ranges)`` tabulated over n: its answer only
    changes where n crosses a bound or an end of a range, so ``plan`` itself
    is asked once per stretch between those cuts (``points``, ascending;
    ``plans[k]``: the answer for ``points[k - 1] <= n < points[k]``) and each
    GTID then costs a bisection, also with ranges or a pair that went down."""

    __slots__ = ("points", "plans")

    def __init__(self, planner: Planner, dipped=(), ranges=None):
        cuts = {b + 1 for b in planner._below}
        cuts.update(a + 1 for a in planner._above if a != _INFINITE)
        cuts.update(r[k] + k for r in (ranges or {}).values() if r is not None for k in (0, 1))
        cuts.update((b or 0) + 1 for b in (planner.bounds[0], planner.bounds[-1]) if b != UNKNOWN)
        self.points = sorted(cuts)
        self.plans = [planner.plan(n, dipped, ranges) for n in [self.points[0] - 1] + self.points]

    def plan(self, n: int) -> "LocatePlan | NoFile":
        return self.plans[bisect.bisect_right(self.points, n)]


_INFINITE = float("inf")


def plan_locate(g: Gtid, bounds: list, dipped=(), ranges=None) -> LocatePlan | NoFile:
    """Which files can hold ``g``: ``bounds[i]`` is the seq_no of ``g``'s
    (domain, server) in the start state (GTID_LIST) of file ``i`` (None:
    absent), ``bounds[-1]`` the one at the end of the last file; ``UNKNOWN``
    where a file could not be read. ``dipped``: files in which a scan saw that
    seq go down; ``ranges``: for files scanned whole, the (lowest, highest)
    seq of the pair in them (None: it logged nothing there).
    Returns a LocatePlan, or why no file can hold ``g`` (a ``NoFile``).

    While the (domain, server) only grows (every bound at least the one
    before, no dip seen) it is the server's rule: ``g`` is in the one file
    whose start state lacks it and whose end has it; never written when the
    end lacks it, purged when the first start has it. Once it is seen to go
    down anywhere (``gtid_strict_mode=OFF``, ``SET gtid_seq_no``), a seq can
    be anywhere, any number of times, even in a file whose bounds grow (it
    may dip and recover inside): every file can hold it, except those whose
    scanned range excludes it. An unknown bound counts as anything between
    the known ones around it while the pair is monotonic, else as anything.

    Not detected here: a dip that recovers before the file ends, in a history
    whose bounds never go down, in a file no scan has walked through.
    ``BinlogSeries.locate`` therefore walks every binlog once before it says
    "not in these binlogs" (``ranges`` then exact); a GTID found by the bounds
    is a real occurrence, but an earlier one can hide in such a dip."""
    return Planner(bounds).plan(g.seq, dipped, ranges)
