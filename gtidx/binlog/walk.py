"""The MariaDB binlog walks: the group walk and the state walk.

These are the hot loops of the whole project (indexing is one group walk,
a lookup's answer one state walk), kept apart from the file class
(``binlog.mariadb.Binlog``) that calls them with itself as ``b``:

* ``group_walk``: the pure-Python group walk, the definition of every group
  answer. It unpacks only (type, length) per event, handles the rare event
  types in a branch, and lets ``unpack_from`` raising at the end of the
  window replace a per-event bounds check.
* ``group_records``: the same groups packed as GROUP_RECORDs, walked by the
  compiled ``gtidx._skip.groups`` where it is built and by ``group_walk``
  wherever something is unusual.
* ``apply_until``: the GTIDs of a range applied to a state.

Where the optional compiled ``gtidx._skip`` is built, the events between
two cold ones are followed in C; the Python loops visit the same offsets
without it (tests/test_skip.py holds the two equal). Every walk runs over a
``filebuf.Window`` from ``b.window``; what it reports goes through
``b.corrupt`` (an error with the file's path and the event's offset).
"""
from __future__ import annotations

import struct

from ..gtid import BinlogState
from .events import BOUNDARY_TYPES, GROUP_RECORD, GTID, GTID_BODY_LEN, GTID_HEAD, HEADER_LEN, TYPE_LENGTH

# What the group walk must look at: GTID starts a group, the rest end one.
# A tuple indexed by event type: CPython specializes tuple[int] subscripts,
# which makes this test ~30% cheaper per event than `etype in frozenset`.
_COLD_TYPE = tuple(t in BOUNDARY_TYPES or t == GTID for t in range(256))
# The same set for the compiled skip (gtidx/_skip.c): past a cold event,
# ``group_walk`` lets C follow the lengths to the next one. Optional: without a
# compiler at install time the pure-Python loop does it all (same offsets).
_COLD_BYTES = bytes(_COLD_TYPE)
_GTID_BYTES = bytes(t == GTID for t in range(256))    # apply_until's: only GTIDs count
_NO_COLD = bytes(256)                 # complete_ends': every event followed
_BACK_GAP = 1 << 16                   # _start_before's first step back from the end
try:
    from .._skip import skip as _skip
except ImportError:                    # pragma: no cover - depends on the install
    _skip = None
try:                                   # the compiled group walk behind group_records (same module)
    from .._skip import groups as _groups
except ImportError:                    # pragma: no cover - depends on the install
    _groups = None

_GROUP_CHUNK = 65536                      # records group_records has C write per buffer
# What a walk that goes on where an earlier one stopped compares of the bytes it
# read before (``OpenGroup``'s seal; a tail's guard, ``IncrementalIndex``): the last
# CHECK_SPAN bytes before that point. A binlog cut and written again (a crashed
# server's recovery) differs right there (other GTIDs, times, checksums).
CHECK_SPAN = 4096


class OpenGroup:
    """Where a batch walk of a growing binlog left a group not complete yet
    (``group_walk``'s ``carry``): the group's ``start`` and GTID ``head``,
    ``to`` (the end of its complete events, none of them cold), ``last``
    (where the last of those starts) and ``seal``, the bytes just before
    ``to`` as ``read(buffer, lo, hi)`` gives them (the owner of that rule:
    ``index.meta.masked``, the FDE's IN_USE flag cleared). The next walk from ``start``
    of the same file goes on at ``to`` once ``b`` holds those bytes
    unchanged: a tail's look walks what was written since the last one, not
    the whole open group again (a transaction of many rows events spans
    many looks)."""

    __slots__ = ("read", "start", "head", "to", "last", "seal")

    def __init__(self, read):
        self.read = read
        self.start = -1                   # none

    def _seal(self, b, start: int, to: int):
        return self.read(b.buffer, max(start, to - CHECK_SPAN), to)

    def take(self, b, start: int) -> bool:
        """Is this the open group at ``start`` of ``b``, its bytes unchanged?
        It is used once: the walk that takes it sets it again (or not)."""
        ok = self.start == start and self.to <= b.size and self._seal(b, start, self.to) == self.seal
        self.start = -1
        return ok

    def keep(self, b, start: int, head, to: int, last: int) -> None:
        self.start, self.head, self.to, self.last = start, head, to, last
        self.seal = self._seal(b, start, to)


def group_walk(b, off: int, span: int | None, previous: int, carry: OpenGroup | None = None):
    """The one event walk behind ``Binlog.group_spans`` (``span`` None: a
    yield per group) and ``Binlog.group_batches`` (a yield per ``span``
    bytes), over ``b`` (a ``Binlog``) from the event boundary ``off``.

    It runs over a moving ``filebuf.Window``: ``off`` and every offset
    the loop keeps (``mark``, ``cur_start``, ``last_end``, ``due``,
    ``rsize``) are relative to the window's ``base``; file offsets are
    ``base + ...`` where they leave the loop (yields, errors), so the cold
    branch does what it did over a mapping. Where ``unpack`` (or
    ``gtid_head``) does not fit in the window it raises struct.error with
    ``off`` not yet advanced: the window moves to ``base + off``, the kept
    offsets shift by the move, and the same iteration runs again. That
    re-run is exact: before the only raise after state changes
    (``gtid_head``), the open group was yielded or added and ``cur`` set
    to None, so the re-run skips that part, and ``mark = off`` is the same
    assignment again.

    ``carry`` (batch walks): an ``OpenGroup`` where the walk of a growing
    file that ends inside a group leaves it, and from which the next walk
    from that group's start resumes (its events before ``carry.to`` are
    not walked again, nor, where the check of the open group's new events
    met a cold one, those before it)."""
    start = off
    resumed = carry is not None and carry.take(b, start)
    at = carry.to if resumed else start
    if resumed and not per_group_of(span):
        done, last, cold, w, mm, base = _chain(b, at, _COLD_BYTES)
        if not cold:                 # the open group's events alone since: walked once, here
            w.release()
            yield from _open_group_tail(b, carry, start, span, previous, done, last)
            return
        # [at, done): the open group's events (no cold one), their lengths just followed: the
        # loop goes on at the cold event there, in the same window (it skips such events, changing
        # nothing), each byte read once
        off = done - base
    else:
        w = b.window(at, b.size)     # the walk reads to the end
        mm, base, off = w.view, at, 0
    rsize = b.size - base            # the file's size, relative to base
    unpack = TYPE_LENGTH.unpack_from
    gtid_head = GTID_HEAD.unpack_from
    cold = _COLD_TYPE
    skip, cold_bytes = _skip, _COLD_BYTES
    body_min = HEADER_LEN + GTID_BODY_LEN + b.checksum_len
    per_group = span is None
    due = 0 if per_group else previous + span - base   # the group end that closes a batch
    batch = []
    add = batch.append
    last_end = start - base   # end of the last complete group walked
    cur = carry.head if resumed else None     # GTID_HEAD fields of the open group
    cur_start = start - base
    mark = off          # a boundary we know is good: the tail check restarts here
    if resumed and skip is not None:           # compiled: straight to the next cold event
        off = skip(mm, off, cold_bytes)
    while True:
        try:
            while True:
                # Hot path: one unpack, two tests, one add per event. At
                # the end of the window unpack_from raises struct.error:
                # that is the loop's exit, no per-event bounds check.
                etype, ln = unpack(mm, off)
                if ln < 19 or cold[etype]:            # 19 = HEADER_LEN (a literal: no global lookup)
                    if ln < HEADER_LEN:
                        raise b.corrupt(f"event length {ln} is below the {HEADER_LEN}-byte header",
                                        base + off)
                    if cur is not None:
                        if per_group:
                            yield base + cur_start, base + off, cur
                        else:
                            add(cur)
                            last_end = off
                            if off >= due:
                                yield base + off, batch, True
                                batch = []
                                add = batch.append
                                due = off + span
                        cur = None
                    mark = off
                    if etype == GTID:
                        if off + ln > rsize:
                            break              # partial GTID event at the end
                        if ln < body_min:
                            raise b.corrupt(f"GTID event length {ln} is below {body_min}", base + off)
                        cur = gtid_head(mm, off)
                        if not cur[2]:
                            raise b.corrupt("GTID event with seq_no 0", base + off)
                        cur_start = off
                    if skip is not None:       # compiled: straight to the next cold event
                        off = skip(mm, off + ln, cold_bytes)
                        continue
                off += ln
            break
        except struct.error:                   # the end of the window: move it, or the end
            view = w.advance(base + off)
            if view is None:
                break                              # (``mm``: the last view, read below)
            mm = view
            shift = base - w.base
            base = w.base
            off += shift                        # 0
            mark += shift
            cur_start += shift
            last_end += shift
            due += shift
            rsize += shift
    walked = _ends_in_view(mm, mark, off, rsize, base) if skip is not None else None
    w.release()                                 # the walk kept numbers only (offsets, GTID_HEAD tuples)
    mark += base                                # file offsets again
    cur_start += base
    last_end += base
    due += base
    # Cold tail: where do complete events end, and is the open group done? (resumed and no cold
    # event since: the group's events before mark are complete, the last of them at carry.last)
    known = carry.last if resumed and mark == at else None
    end, cut, done, last = b.tail_end(mark, cur_start if cur is not None else None, cur[4] if cur is not None else 0,
                                      known, walked)
    if carry is not None and cur is not None and end is None and cut is None and done > cur_start:
        carry.keep(b, cur_start, cur, done, last)
    if per_group:
        if end is not None:
            yield cur_start, end, cur
        if cut is not None:
            raise cut
        return
    if cut is not None:
        raise cut
    if end is not None:
        add(cur)
        last_end = end
        if end >= due:
            yield end, batch, True
            batch = []
    yield last_end, batch, False


def _ends_in_view(mm, mark: int, stop: int, rsize: int, base: int) -> tuple | None:
    """What ``complete_ends`` from ``mark`` would find, read off the last
    view of the group walk that just ended, so that the end of the binlog is
    not read again (a tail's look ended in a group of thousands of rows
    events: all of them since its GTID). Offsets relative to the view
    (``mark`` negative: in an earlier one); ``stop``: where the walk stopped,
    the first boundary of the chain whose header the file does not hold
    whole enough to read (``rsize``: the file's size), or a partial GTID
    event. The view starts at a boundary of the chain that reaches ``stop``,
    with every header before it. File offsets ``(end, last)``, or None where
    the view cannot tell (the last complete event starts in an earlier one)."""
    r = mark if mark >= 0 else 0
    end = stop if stop <= rsize else _start_before(mm, r, stop)   # past the size: its last event is partial
    if end > r:
        return base + end, base + _start_before(mm, r, end)
    return (base + end, None) if r == mark else None


def per_group_of(span: int | None) -> bool:
    return span is None


def _open_group_tail(b, carry: OpenGroup, start: int, span: int, previous: int, done: int, last: int | None):
    """``group_walk``'s batch answer where it resumed inside the group open
    at ``start`` and the events since (complete to ``done``, the last at
    ``last``: ``complete_ends``) hold no cold event: the group ends there
    when its last event terminates it, else it is still open (``carry``)."""
    head = carry.head
    end, cut, done, last = b.tail_end(carry.to, start, head[4], carry.last, (done, last))
    if cut is not None:
        raise cut
    if end is None:
        if done > start:
            carry.keep(b, start, head, done, last)
        yield start, [], False
        return
    batch = [head]
    if end >= previous + span:
        yield end, batch, True
        batch = []
    yield end, batch, False


def group_records(b, start: int | None = None) -> bytes:
    """``Binlog.group_spans`` of ``b`` packed, for many groups at once: one GROUP_RECORD
    (start, end, seq_no, timestamp, server_id, domain_id, flags2) per
    group, in file order; the same groups, and the same error where that
    walk raises (then no records). ``group_record_chunks`` joined."""
    return b"".join(group_record_chunks(b, start))


def group_record_chunks(b, start: int | None = None):
    """``group_records`` a piece at a time: bytes of GROUP_RECORDs (at most
    ``_GROUP_CHUNK`` records each, in file order), then the error that walk
    raises where it raises one (the records before it were yielded). A
    reader that stops early stops the walk (memory: one chunk). Where the
    compiled ``gtidx._skip`` is built, the groups are walked in C
    (``groups``) as long as nothing is unusual, and ``group_walk`` (the
    definition) takes over from the last group start where something is:
    the file's tail, a damaged event, a group longer than the walk's
    largest window (``group_walk`` walks that one group, then C goes on);
    without it, ``group_walk`` walks it all."""
    off = b.body_start if start is None else start
    pack = GROUP_RECORD.pack

    def walked(at: int, one: bool = False):
        # group_walk from a point where a walk may start: all its groups, or
        # (one) its first group only where C can go on after it (its end
        # is an event that is complete, so no tail yield): chunks of records,
        # then (one) None or that end
        out = []
        walk = group_walk(b, at, None, 0)
        try:
            for gs, e, (ts, server, seq, domain, flags2) in walk:
                out.append(pack(gs, e, seq, ts, server, domain, flags2))
                if one and b.complete_at(e):
                    yield b"".join(out)
                    yield e
                    return
                if len(out) == _GROUP_CHUNK:
                    yield b"".join(out)
                    out = []
        finally:
            walk.close()
        yield b"".join(out)
        if one:
            yield None

    if _groups is None:
        yield from walked(off)
        return
    size = b.size
    body_min = HEADER_LEN + GTID_BODY_LEN + b.checksum_len
    rec = GROUP_RECORD.size
    out = bytearray(rec * _GROUP_CHUNK)
    used = 0                            # bytes of out written
    w = b.window(off, size)
    while True:
        n, off, why = _groups(w.view, off - w.base, w.base, size, _COLD_BYTES, GTID, body_min,
                              memoryview(out)[used:])
        used += n * rec
        if why == 2:                    # out is full: hand it on, go on in it again
            yield bytes(out[:used])
            used = 0
            continue
        if why == 1 or w.base + len(w.view) >= w.end:
            break                       # something unusual, or the end of the file: group_walk's
        base, have = w.base, len(w.view)
        w.move(off)
        if off == base and len(w.view) <= have:      # no group ends in the largest window
            yield bytes(out[:used])
            used = 0
            *parts, off = walked(off, one=True)
            yield from parts
            if off is None:
                return
            w.move(off)
    yield bytes(out[:used])
    yield from walked(off)


def apply_until(b, state: BinlogState, start: int, target: int) -> bool:
    """Apply to ``state`` every GTID whose event in ``b`` lies in [start, target),
    walking from the event boundary ``start``. True when ``target`` is an
    event boundary (then ``state`` is the state there), else False."""
    if target > b.size:
        return False
    unpack = TYPE_LENGTH.unpack_from
    gtid_head = GTID_HEAD.unpack_from
    apply = state.apply
    skip, gtid_bytes = _skip, _GTID_BYTES
    body_min = HEADER_LEN + GTID_BODY_LEN + b.checksum_len
    w = b.window(start, target)   # a moving window: offsets in it are relative to base
    mm, pos = w.view, start
    while True:
        base = pos
        tgt = target - base
        final = base + len(mm) >= target
        # An event starting past `last` cannot end at target (the last
        # window), or its header and GTID head may not fit (the others).
        last = tgt - HEADER_LEN if final else len(mm) - GTID_HEAD.size
        off = 0
        while off <= last:
            etype, ln = unpack(mm, off)
            if ln < 19 or etype == 162:               # HEADER_LEN, GTID as literals: no global lookups
                if ln < HEADER_LEN:
                    raise b.corrupt(f"event length {ln} is below the {HEADER_LEN}-byte header", base + off)
                if off + ln <= tgt:             # a GTID counts once its event is complete
                    if ln < body_min:
                        raise b.corrupt(f"GTID event length {ln} is below {body_min}", base + off)
                    _, server_id, seq, domain, _ = gtid_head(mm, off)
                    if not seq:
                        # as the group walk says: no state may hold a seq_no 0
                        raise b.corrupt("GTID event with seq_no 0", base + off)
                    apply(domain, server_id, seq)
                if skip is not None:           # compiled: straight to the next GTID (or short event)
                    off = skip(mm, off + ln, gtid_bytes, last)
                    continue
            off += ln
        pos = base + off
        if final or pos > target - HEADER_LEN:
            return pos == target
        mm = w.move(pos)


def complete_ends(b, start: int, cold: bytes | None = None):
    """(end, last): where the complete events from the event boundary
    ``start`` of ``b`` end, and where the last of them starts (None: not
    one). Raises, as ``Binlog.complete_end``, at a length below the header.
    With ``cold`` (a type -> bool table, as ``_COLD_BYTES``): (end, last,
    stopped), the walk stopped at the first cold event whose header is
    there, or at a header the group walk would judge (cold, or too short).

    The Python loop (one unpack per event) is the definition. Where the
    compiled skip is built, C follows the lengths through each window, and
    the start of the last event it passed is found from the end back
    (``_start_before``): a tail's check of its open group (thousands of
    rows events) then costs a few calls, not a Python step per event."""
    off, last, hit, w, _, _ = _chain(b, start, cold)
    w.release()                                 # numbers only were read: the buffer goes on
    return (off, last) if cold is None else (off, last, hit)


def _chain(b, start: int, cold: bytes | None):
    """``complete_ends``' walk, and its window: ``(end, last, stopped, w,
    view, base)``, ``w`` not released (the group walk goes on in it)."""
    size = b.size
    w = b.window(start, size)
    mm, base = w.view, start
    unpack = TYPE_LENGTH.unpack_from
    skip = _skip
    follow = _NO_COLD if cold is None else cold
    off, last, hit = start, None, False
    while off + HEADER_LEN <= size:
        if off + HEADER_LEN > base + len(mm):
            mm, base = w.move(off), off
        if skip is not None:
            r = off - base
            o = skip(mm, r, follow)             # stops at a short (or cold) event or where a header leaves mm
            if o > r:
                p = _start_before(mm, r, o)     # the last event passed: [p, o)
                if base + o <= size:
                    last, off = base + p, base + o
                    continue
                if p > r:                       # [p, o) runs past the end; those before it do not
                    last = base + _start_before(mm, r, p)
                off = base + p                  # the partial event: the step below ends the walk
                if off + HEADER_LEN > size:
                    break
        etype, ln = unpack(mm, off - base)
        if ln < HEADER_LEN:
            raise b.corrupt(f"event length {ln} is below the {HEADER_LEN}-byte header", off)
        if follow[etype]:
            hit = True
            break
        if off + ln > size:
            break
        last = off
        off += ln
    if cold is not None and not hit and off + TYPE_LENGTH.size <= size:
        # a header too short for this walk, whole enough for the group walk's (a cold type, a
        # bad length): the group walk's to judge
        if off + TYPE_LENGTH.size > base + len(mm):
            mm, base = w.move(off), off
        etype, ln = unpack(mm, off - base)
        hit = bool(follow[etype]) or ln < HEADER_LEN
    return off, last, hit, w, mm, base


def _start_before(mm, r: int, o: int) -> int:
    """The start of the event that ends at ``o`` in the chain of lengths
    from ``r`` (``o`` > ``r``, reached by the compiled skip over ``mm``, so
    every header before it is in ``mm``): the skip is asked again to stop
    past ``o - gap`` (gap growing fourfold), then Python walks the last few."""
    skip, unpack = _skip, TYPE_LENGTH.unpack_from
    gap = _BACK_GAP
    while True:
        limit = o - 1 - gap
        p = r if limit < r else skip(mm, r, _NO_COLD, limit)
        if p < o:
            break
        gap <<= 2
    while True:
        nxt = p + unpack(mm, p)[1]
        if nxt >= o:
            return p
        p = nxt
