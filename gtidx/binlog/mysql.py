"""Read MySQL binlog files (5.7 to 9.x): the start set and the transactions.

The framing is MariaDB's (``binlog.mariadb``: magic, 19-byte headers, lengths,
CRC32, the FORMAT_DESCRIPTION with its IN_USE flag): ``MysqlBinlog`` is a
``Binlog`` for all of that, and reads what differs:

* the flavor: the FDE's server version has no "MariaDB" (``binlog.is_mariadb``);
* PREVIOUS_GTIDS (35) after the FDE: the GTID set executed before this file
  (``previous_gtids``, a ``GtidSet``), untagged or, from 8.3, tagged format;
* transactions: a GTID (33), GTID_TAGGED (42, from 8.3: uuid:tag:gno) or
  ANONYMOUS_GTID (34, gtid_mode OFF) event starts one; it ends as MySQL's
  transaction boundary parser (trx_boundary_parser.cpp) ends it: at an XID,
  XA_PREPARE, a ``COMMIT``/``ROLLBACK``/``XA ROLLBACK`` query, a
  TRANSACTION_PAYLOAD (a compressed transaction: all of it is in that one
  event), an INCIDENT, or the single statement of a DDL (a query other than
  ``BEGIN``/``XA START`` right after the GTID event, after any INTVAR/RAND/
  USER_VAR); else at the next GTID or boundary event (ROTATE, STOP, ...).

``groups()`` yields ``MysqlGroup`` per transaction; ``end_set()`` is the
set after the file (previous_gtids plus every GTID of a complete
transaction). MariaDB's answers of ``Binlog`` (``group_spans``,
``group_records``, ``group_batches``, ``apply_until``, ``state_at``,
``start_state``) are not
MySQL's: on a MySQL file they raise ``MySQLBinlogError`` (exit 2, "not
supported yet") rather than answer wrongly. ``open_binlog`` opens a file as
the class its FDE names.

The events' types, layouts and decoders are ``binlog.mysqlevents``'s
(re-exported here for the callers that name them from this module).

The walk reads each event's header and, for the few event types that
decide a boundary, its first bytes: it is not the tuned MariaDB walk
(``walk.group_walk``), which stays as it was.
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import Iterator

from .events import (EVENT_HEADER, GROUP_RECORD, HEADER_LEN, INCIDENT, QUERY, TYPE_LENGTH, U32, XA_PREPARE, XID,
                     decode_query_text, is_mariadb)
from .mariadb import Binlog
from .mysqlevents import (ANONYMOUS_GTID, BOUNDARY, GTID_LOG, GTID_TAGGED, GTID_TYPES, IGNORABLE_FLAG, IGNORED,
                          MYSQL_EVENT_NAMES, MYSQL_KNOWN_TYPES, PRE_STATEMENT, PREVIOUS_GTIDS, TRANSACTION_PAYLOAD,
                          U16, GtidFields, MysqlGroup, decode_previous_gtids, decode_tagged_gtid,
                          decode_untagged_gtid)
from .. import filebuf
from ..errors import CorruptBinlogError, MySQLBinlogError, UnsupportedBinlogError
from ..mysqlgtid import GtidSet, uuid_text

# Where the header chain from a GTID event ends its transaction: the next
# transaction's GTID event, or an event no transaction holds (``_chain``).
LANDING = bytes(t in GTID_TYPES or t in BOUNDARY for t in range(256))
try:                                   # the compiled header walks (gtidx/_skip.c); optional
    from .._skip import mysql_walk as _mysql_walk, skip as _skip
except ImportError:                    # pragma: no cover - depends on the install
    _mysql_walk = _skip = None
try:                                   # the transaction records of the row changes (gtidx/_skip.c)
    from .._skip import mysql_records as _mysql_records
except ImportError:                    # pragma: no cover - depends on the install
    _mysql_records = None
# The bytes of a file filled (``fill``) and walked by ``transaction_runs``
# at a time, and the most records one of its runs holds.
RUN_BYTES = 8 << 20
RUN_RECORDS = 65_536

# -- the file -------------------------------------------------------------------

class MysqlBinlog(Binlog):
    """One MySQL binlog file, read-only (see the module doc)."""

    flavor = "mysql"
    known_types = MYSQL_KNOWN_TYPES

    def _read_preamble(self) -> None:
        length = self._read_fde()
        path = self.path
        if is_mariadb(self.fde.server_version):
            raise UnsupportedBinlogError(f"a MariaDB binlog (written by server {self.fde.server_version!r}), "
                                         "not a MySQL one", path=path, offset=4, hint="open it with gtidx.Binlog")
        self.gtid_list_offset = self.gtid_list_end = None      # MariaDB's; a MySQL file has none
        self.previous_gtids: GtidSet | None = None             # None: the file has no PREVIOUS_GTIDS event
        self.previous_gtids_offset: int | None = None
        off = 4 + length
        self.body_start = off
        if off + HEADER_LEN <= self.size:
            self._fill(off, off + HEADER_LEN)
            etype, elen = TYPE_LENGTH.unpack_from(self._mm, off)
            if etype == PREVIOUS_GTIDS and HEADER_LEN + self.checksum_len + 8 <= elen and off + elen <= self.size:
                if self.checksum_len:
                    self._verify_crc(off, elen, etype)
                body = memoryview(self._mm)[off + HEADER_LEN:off + elen - self.checksum_len]
                try:
                    self.previous_gtids = decode_previous_gtids(body)
                except (ValueError, struct.error, UnicodeDecodeError) as e:
                    raise CorruptBinlogError(f"PREVIOUS_GTIDS event does not decode: {e}", path=path,
                                             offset=off) from None
                self.previous_gtids_offset = off
                self.body_start = off + elen

    def truncation(self, last: int, open_start: int | None) -> CorruptBinlogError | None:
        """As ``Binlog.truncation``, but a closed MySQL binlog may end after
        a whole transaction without ROTATE or STOP: the server's crash
        recovery closes the binlog it recovers so (it clears IN_USE, seen on
        9.7: tests/test_mysql_answers_live.py reads every binlog of the live
        server) and serves it as whole. Ending inside a transaction is still
        a cut."""
        if open_start is None and not self.fde.in_use:
            return None
        return super().truncation(last, open_start)

    # -- MariaDB's answers: not MySQL's ----------------------------------------
    def not_yet(self, what: str) -> MySQLBinlogError:
        """The error of an answer gtidx gives for MariaDB binlogs only: ``what`` is not supported yet here."""
        return MySQLBinlogError(f"a MySQL binlog (written by server {self.fde.server_version!r}): {what} "
                                "is not supported yet", path=self.path,
                                hint="gtidx answers MariaDB binlogs; MySQL support is being built")

    @property
    def start_state(self):
        raise self.not_yet("a MariaDB binlog state")

    def group_spans(self, start=None):
        raise self.not_yet("the MariaDB group walk")

    def group_batches(self, span, start=None, previous=0, carry=None):
        raise self.not_yet("indexing")

    def group_records(self, start=None):
        raise self.not_yet("the MariaDB group walk")

    def apply_until(self, state, start, target):
        raise self.not_yet("the GTID state at an offset")

    def state_at(self, offset):
        raise self.not_yet("the GTID state at an offset")

    # -- transactions ---------------------------------------------------------
    def gtid_at(self, off: int, etype: int, ln: int) -> GtidFields:
        """The fields of the GTID event at ``off`` (type ``etype``, ``ln``
        bytes long); a damaged body is a CorruptBinlogError there."""
        self._fill(off, off + ln)
        return self.gtid_of(off, etype, memoryview(self._mm)[off:off + ln])

    def gtid_of(self, off: int, etype: int, event) -> GtidFields:
        """The fields of the GTID event ``event`` (its bytes, header to
        checksum, as a walk over the file read them) at ``off``: as
        ``gtid_at``, without reading the file again."""
        body = event[HEADER_LEN:len(event) - self.checksum_len]
        try:
            return decode_tagged_gtid(body) if etype == GTID_TAGGED else decode_untagged_gtid(body, etype)
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            raise self.corrupt(f"{MYSQL_EVENT_NAMES[etype]} event does not decode: {e}", off) from None

    def add_gtid(self, state: GtidSet, etype: int, event) -> None:
        """Add to ``state`` the GTID of the whole GTID or GTID_TAGGED
        ``event`` (its bytes, header to checksum) of type ``etype``: a
        probe's walk (``binlog.probe.walk_to``) keeps the set so."""
        body = event[HEADER_LEN:len(event) - self.checksum_len]
        try:
            g = decode_tagged_gtid(body) if etype == GTID_TAGGED else decode_untagged_gtid(body, etype)
        except (ValueError, struct.error, UnicodeDecodeError):
            return                   # its CRC32 passed (with checksums): a layout gtidx does not read
        if g.gtid is not None:
            state.add(*g.gtid)

    def _query_at(self, off: int, ln: int) -> bytes:
        self._fill(off, off + ln)
        return decode_query_text(memoryview(self._mm)[off + HEADER_LEN:off + ln - self.checksum_len],
                                 path=self.path, offset=off)

    def groups(self, start: int | None = None) -> Iterator[MysqlGroup]:
        """Every transaction from ``start`` (an event boundary; default:
        after PREVIOUS_GTIDS) to the end of the file, as ``MysqlGroup``s
        (a transaction begun before ``start`` is left out).
        In a file still being written, the last one is yielded once its
        terminating event is on disk. A closed file cut short raises after
        the complete ones (as ``Binlog.groups``).

        This is the event-by-event walk, the definition of a transaction;
        ``transactions`` gives the same faster."""
        # From an explicit start inside a transaction, its rest is no transaction's
        # (skipped); from the file's start an event outside any is an error.
        return self._event_groups(self.body_start if start is None else start, start is not None)

    def transactions(self, start: int | None = None, *, jump: bool = True) -> Iterator[MysqlGroup]:
        """The transactions ``groups(start)`` yields, the same ones (and the
        same error at the end of a file cut short), found faster: from each
        GTID event that states its ``transaction_length`` (8.0.2+), along
        the event headers alone (``_chain``: each event's length, no body
        read) to where the next transaction starts (``_chained``). The
        length is a cross-check, never a jump. Where the header walk cannot
        decide (the headers and the length disagree; a GTID event that
        states no length: files before 8.0.2; a damaged one; the last
        transaction of the file) the event-by-event walk takes that
        transaction, up to the next GTID event, and the header walk goes on
        from there; the event walk also takes the end of the file. A length
        that neither the headers nor the event walk end the transaction at
        is a lie: CorruptBinlogError at its GTID event, never an answer.
        ``jump=False``: the event-by-event walk all the way (the tests hold
        the two equal on every fixture)."""
        off = self.body_start if start is None else start
        mid = start is not None
        if not jump:
            return self._event_groups(off, mid)
        return self._transactions(off, mid)

    def _transactions(self, off: int, mid: bool) -> Iterator[MysqlGroup]:
        """``transactions`` from ``off`` (``mid``: as ``_event_groups``)."""
        while True:
            off, mid, stated = yield from self._chained(off, mid)
            nxt = self._next_gtid_event(off)
            walk = self._event_groups(off, mid, stop=nxt)
            if stated is not None:
                # the headers disagree with the GTID event's length: the event
                # walk ends the transaction where the length says (events no
                # transaction holds follow: it says what they are), or the
                # length lies
                first = next(walk, None)
                if first is not None:
                    if first.end != off + stated[1]:
                        raise self._length_disagrees(off, *stated, first.end)
                    yield first
            yield from walk
            if nxt is None:
                return
            off, mid = nxt, False

    def _chain(self, w: filebuf.Window, at: int) -> int:
        """The header chain from the event boundary ``at``: each event's type
        and length (the bytes ``TYPE_LENGTH`` reads) while they are in the
        file, each length followed, to the first event whose type is in
        ``LANDING`` or whose length is below a header. Returns its offset, or
        the first offset whose type and length are not in the file. Every
        event on the way is seen: nothing a length stated elsewhere says is
        skipped. ``w``: a walk's window at or before ``at``. The compiled
        ``skip`` (gtidx/_skip.c) visits the same offsets."""
        size, skip, unpack, landing = self.size, _skip, TYPE_LENGTH.unpack_from, LANDING
        while at + TYPE_LENGTH.size <= size:
            mm, rel = w.view, at - w.base
            if rel + TYPE_LENGTH.size > len(mm):
                mm, rel = w.move(at), 0
            if skip is not None:
                rel = skip(mm, rel, landing)
                if rel + TYPE_LENGTH.size <= len(mm):
                    return w.base + rel
            else:
                try:
                    while True:
                        etype, ln = unpack(mm, rel)
                        if ln < HEADER_LEN or landing[etype]:
                            return w.base + rel
                        rel += ln
                except struct.error:       # the window ends: move it (or the file ends)
                    pass
            at = w.base + rel
        return at

    @staticmethod
    def _header_in(w: filebuf.Window, at: int) -> tuple[memoryview, int]:
        """The window's view holding the header at ``at`` (in the file), and
        ``at`` relative to it."""
        mm, rel = w.view, at - w.base
        if rel + HEADER_LEN > len(mm):
            mm, rel = w.move(at), 0
        return mm, rel

    def _next_gtid_event(self, off: int) -> int | None:
        """The offset of the first GTID, GTID_TAGGED or ANONYMOUS_GTID event
        after the event at ``off``, along the header chain (``_chain``);
        None when a ROTATE, STOP (or another event no transaction holds), a
        length below a header or the end of what is on disk comes first:
        the event walk from ``off`` then goes to the end (and says what is
        wrong)."""
        size = self.size
        if off + HEADER_LEN > size:
            return None
        self._fill(off, off + HEADER_LEN)
        ln = TYPE_LENGTH.unpack_from(self._mm, off)[1]
        if ln < HEADER_LEN or off + ln + HEADER_LEN > size:
            return None
        w = self.window(off + ln, size)
        at = self._chain(w, off + ln)
        if at + HEADER_LEN > size:
            return None
        mm, rel = self._header_in(w, at)
        etype, ln = TYPE_LENGTH.unpack_from(mm, rel)
        return at if etype in GTID_TYPES and ln >= HEADER_LEN and at + ln <= size else None

    def _chained(self, off: int, mid: bool):
        """Yield the transactions from ``off`` along the header chain;
        return ``(offset, mid, stated)`` where the event walk must go on
        (``mid``: as ``_event_groups`` takes it; ``stated``: None, or the
        GTID event's ``(type, transaction_length)`` there when the headers
        end its transaction elsewhere).

        From the GTID event at ``off`` (whole, its CRC32 checked when the
        file has checksums, decoding, stating a ``transaction_length``) the
        header chain (``_chain``) goes to the next event that starts a
        transaction or that no transaction holds (``LANDING``): the
        transaction is ``[off, there)``, what the event walk finds (it ends
        a transaction at the next GTID, ROTATE or STOP at the latest), when
        the GTID event's ``transaction_length`` says the same. The event
        walk takes over, from ``off``, where this walk cannot decide: the
        length ends the transaction elsewhere (``stated``: a lie, or events
        no transaction holds after it, ``_transactions`` tells which), a
        GTID event that is damaged or states no length, a length below a
        header on the chain, and the last transaction of the file (the chain
        meets the end of what is on disk), whose end rules the event walk
        knows."""
        size, crc = self.size, self.checksum_len
        header, unpack = EVENT_HEADER.unpack_from, TYPE_LENGTH.unpack_from
        crc32, u32 = zlib.crc32, U32.unpack_from
        skip, landing = _skip, LANDING
        new = tuple.__new__
        w = self.window(off, size)
        mm, base = w.view, w.base
        while off + HEADER_LEN <= size:
            rel = off - base
            if rel + HEADER_LEN > len(mm):
                mm, base, rel = w.move(off), off, 0
            ts, etype, _, ln, _, _ = header(mm, rel)
            if etype not in GTID_TYPES or ln < HEADER_LEN + crc or off + ln > size:
                break
            if rel + ln > len(mm):
                mm, base, rel = w.move(off), off, 0
                if ln > len(mm):
                    break
            if crc and crc32(mm[rel:rel + ln - crc]) != u32(mm, rel + ln - crc)[0]:
                break
            body = mm[rel + HEADER_LEN:rel + ln - crc]
            try:
                g = decode_tagged_gtid(body) if etype == GTID_TAGGED else decode_untagged_gtid(body, etype)
            except (ValueError, struct.error, UnicodeDecodeError):
                break                # the event walk says what is wrong
            length = g.length
            if length is None:
                break
            # the header chain (_chain), inline where the compiled skip finds its end in this window
            at = rel + ln
            if skip is not None:
                at = skip(mm, at, landing)
            if skip is not None and at + HEADER_LEN <= len(mm):
                end = base + at
            else:
                end = self._chain(w, base + at)
                if end + HEADER_LEN > size:
                    break            # the last transaction on disk
                mm, at = self._header_in(w, end)
                base = w.base
            if unpack(mm, at)[1] < HEADER_LEN:
                break                # the event walk reports the broken length
            if length != end - off:
                return off, mid, (etype, length)
            commit = g.commit_us
            yield new(MysqlGroup, (g.gtid, off, end, commit // 1_000_000 if commit else ts, commit, length))
            off, mid = end, False
        return off, mid, None

    def transaction_runs(self, start: int | None = None, limit: int | None = None) -> Iterator:
        """``transactions(start)`` up to the first that starts at or past
        ``limit``, for the row decoder: runs of the transactions with GTIDs
        that the compiled ``mysql_records`` takes (gtidx/_skip.c: the checks
        of ``_chained``, on ``mapping`` filled ``RUN_BYTES`` at a time) as
        ``(records, texts)``: GROUP_RECORDs (seq: the start, as the offset
        column; timestamp: ``MysqlGroup.timestamp``) and their GTIDs' texts;
        the others (anonymous, tagged, what ``_chained`` and the event walk
        decide) one at a time as ``MysqlGroup``s from ``_transactions``, up to
        the next GTID event. The bytes of a run stay filled until the caller
        ``release``s them. Without the compiled walk: ``MysqlGroup``s only.
        The same transactions, and the same errors, as ``transactions``; a
        transaction at or past ``limit`` is not walked (a damaged one there is
        the next piece's error)."""
        limit = (1 << 64) - 1 if limit is None else limit
        walk = _mysql_records
        off = self.body_start if start is None else start
        mid = start is not None
        while walk is not None and off < limit:
            hi = min(off + RUN_BYTES, self.size)
            self.fill(off, hi)
            out, texts = bytearray(RUN_RECORDS * GROUP_RECORD.size), []
            n, stop, code = walk(self.mapping[off:hi], 0, off, self.size, self.checksum_len, LANDING, limit, out,
                                 texts)
            if n:
                yield bytes(memoryview(out)[:n * GROUP_RECORD.size]), texts
            if code in (1, 3) and stop > off:
                off, mid = stop, False
                continue
            if code == 0:
                return
            off, mid = stop, mid and not n   # what the compiled walk does not take: the Python walk's
            for g in self._transactions(off, mid):
                if g.start >= limit:
                    return
                yield g
                off, mid = g.end, False
                if off >= limit:
                    return                   # the next starts at or past the limit: not walked
                if self._type_at(off) == GTID_LOG:
                    break                    # back to the compiled walk
            else:
                return
        for g in self._transactions(off, mid):
            if g.start >= limit:
                return
            yield g
            if g.end >= limit:
                return

    def _length_disagrees(self, off: int, etype: int, length: int, end: int) -> CorruptBinlogError:
        """The error for a GTID event at ``off`` whose transaction_length
        (``length``) ends its transaction where neither the event headers
        nor the event walk do (``end``: where the event walk ends it)."""
        return CorruptBinlogError(
            f"{MYSQL_EVENT_NAMES[etype]} event's transaction_length {length} ends its transaction at offset "
            f"{off + length}, but its events end it at offset {end}", path=self.path, offset=off,
            hint="the binlog is damaged: the GTID event and the event lengths disagree")

    def set_batches(self, span: int, max_offset: int, previous: int = 0) -> Iterator[tuple[int, GtidSet]]:
        """The walk an index build needs (``index.mysql.MysqlRecordPolicy``):
        yields ``(end, gtids)`` at the end of the first transaction ending
        ``span`` bytes or more past the previous yield (the first counted
        from ``previous``), ``gtids`` the GTIDs of the transactions since
        (a ``GtidSet``); none past ``max_offset`` (the walk stops there).

        The same records (and errors) as a loop over ``transactions()``: the
        compiled ``mysql_walk`` (gtidx/_skip.c) follows the header chain as
        ``_chained`` does (the same checks) and hands back GTID runs, not
        transactions; where it stops (a GTID_TAGGED event, a transaction
        bigger than the window, a length that disagrees, anything it does
        not take) ``_chained`` goes on until the next event it does (and
        raises for a length that disagrees), and the event walk where that
        cannot decide."""
        off = self.body_start
        pending = GtidSet()
        add = pending.add
        due = previous + span
        walk = _mysql_walk
        if walk is not None:
            size, crc = self.size, self.checksum_len
            w = self.window(off, size)
            mm, base = w.view, off
            while True:
                stop, runs, code = walk(mm, off - base, base, size, crc, due, LANDING)
                off = base + stop
                if runs:
                    pending |= GtidSet.from_intervals((uuid_text(u), "", a, b) for u, a, b in runs)
                if code == 0:
                    if off > max_offset:
                        return
                    yield off, pending
                    pending = GtidSet()
                    due = off + span
                    continue
                if code == 1 and stop > 0:      # the window ends: read on from there
                    mm, base = w.move(off), off
                    continue
                # what the compiled walk does not take: the Python loop
                # (``_transactions``) takes over up to the next event it does,
                # or to the end
                resume = None
                for g in self._transactions(off, False):
                    if g.gtid is not None:
                        pending.add(*g.gtid)
                    off = g.end
                    if off >= due:
                        if off > max_offset:
                            return
                        yield off, pending
                        pending = GtidSet()
                        due = off + span
                    if self._type_at(off) in (GTID_LOG, ANONYMOUS_GTID):
                        resume = off
                        break
                if resume is None:
                    return
                mm, base = w.move(resume), resume     # back to the compiled walk
        add = pending.add
        for g in self.transactions():
            if g.gtid is not None:
                add(*g.gtid)
            end = g.end
            if end >= due:
                if end > max_offset:
                    return
                yield end, pending
                pending = GtidSet()
                add = pending.add
                due = end + span

    def _type_at(self, off: int) -> int | None:
        """The type of the event at ``off``; None when no header is there."""
        if off + HEADER_LEN > self.size:
            return None
        self._fill(off, off + HEADER_LEN)
        return self._mm[off + 4]

    def _event_groups(self, off: int, mid: bool, stop: int | None = None) -> Iterator[MysqlGroup]:
        """``groups`` from ``off``: ``mid`` says whether ``off`` may be
        inside a transaction begun before (its rest is skipped). ``stop``:
        only up to there, where a GTID event starts (``_next_gtid_event``):
        a transaction still open there ends there, as the next GTID event
        ends it in the walk of the whole file."""
        # to the end: checked as it goes (a lookup that finds its transaction walks no further)
        headers = self.checked_headers(off) if stop is None else self._headers_between(off, stop)
        cur = None           # (GtidFields, start offset, header timestamp) of the open transaction
        state = None         # None (outside), "gtid", "ddl", "dml"
        last = None          # offset of the last event walked
        mm = self._mm

        def close(at: int) -> MysqlGroup:
            g, begin, ts = cur
            return MysqlGroup(g.gtid, begin, at, g.commit_us // 1_000_000 if g.commit_us else ts,
                              g.commit_us, g.length)

        for off, etype, _, ln in headers:
            last = off
            if etype in GTID_TYPES:
                mid = False
                if cur is not None:
                    yield close(off)             # no terminator: the next GTID ends it
                self._fill(off, off + HEADER_LEN)
                cur = (self.gtid_at(off, etype, ln), off, U32.unpack_from(mm, off)[0])
                state = "gtid"
                continue
            if etype in BOUNDARY or etype in IGNORED:
                mid = mid and etype in IGNORED
                if cur is not None and etype in BOUNDARY:
                    yield close(off)
                    cur = state = None
                continue
            terminal = False
            if etype == QUERY:
                text = self._query_at(off, ln)         # compared as the server's parser does: no strip
                upper = text[:12].upper()
                if text == b"BEGIN" or text.startswith(b"XA START"):
                    if state in ("gtid", None):
                        state = "dml"
                elif text == b"COMMIT" or (upper.startswith(b"ROLLBACK") and not upper.startswith(b"ROLLBACK TO ")) \
                        or upper.startswith(b"XA ROLLBACK"):
                    terminal = True
                elif state in ("gtid", "ddl"):
                    terminal = True             # a DDL's single statement (or XA COMMIT after its GTID)
            elif etype in (XID, XA_PREPARE, INCIDENT):
                terminal = True
            elif etype == TRANSACTION_PAYLOAD:
                terminal = state == "gtid"
            elif etype in PRE_STATEMENT:
                if state == "gtid":
                    state = "ddl"
            elif state in ("gtid", "ddl"):
                self._fill(off, off + HEADER_LEN)
                if not (U16.unpack_from(mm, off + 17)[0] & IGNORABLE_FLAG):
                    terminal = True             # the parser's "statement" after a GTID ends it
            if cur is None:
                if etype == INCIDENT or mid:
                    continue                     # an incident without its GTID; the rest of one begun before start
                self._fill(off, off + HEADER_LEN)
                if not (U16.unpack_from(mm, off + 17)[0] & IGNORABLE_FLAG):
                    raise MySQLBinlogError(
                        f"a {MYSQL_EVENT_NAMES.get(etype, f'type {etype}')} event outside any transaction's GTID "
                        "event (a binlog without GTIDs, from MySQL 5.6 or gtid_mode switched): not supported yet",
                        path=self.path, offset=off)
                continue
            if terminal:
                yield close(off + ln)
                cur = state = None
        if stop is not None:
            if cur is not None:
                yield close(stop)
            return
        if last is not None:
            # a closed file ends with ROTATE or STOP after a whole transaction
            # (the open one here has no terminator: a file still being written)
            cut = self.truncation(last, cur[1] if cur is not None else None)
            if cut is not None:
                raise cut

    def end_set(self) -> GtidSet:
        """The GTID set after this file (as far as it has complete
        transactions): previous_gtids plus every transaction's GTID."""
        out = self.previous_gtids.copy() if self.previous_gtids is not None else GtidSet()
        for g in self.groups():
            if g.gtid is not None:
                out.add(*g.gtid)
        return out


def open_binlog(path: str | os.PathLike, store=None) -> Binlog:
    """A binlog file opened as the class its FORMAT_DESCRIPTION names:
    ``MysqlBinlog`` for MySQL's, ``Binlog`` for MariaDB's."""
    try:
        return Binlog(path, store)
    except MySQLBinlogError as e:
        if e.offset != 4:
            raise                   # a MariaDB FDE with MySQL events: neither reads it
    return MysqlBinlog(path, store)
