"""Row changes of MySQL binlogs: how ``changes.ChangeSource`` reads a MySQL
file (``MysqlReading``, mixed into ``changes.MysqlChangeSource``; the façade
picks that class for the binlogs a listing found to be MySQL's).

The rows are the definition's: each transaction decoded by
``show_mysql.decode_transaction`` (what ``gtidx show`` prints for it, as
``mysqlbinlog -v`` prints it: compressed transactions through their inner
events, column names or ``@N``, JSON as text, partial JSON updates as
``JSON_REPLACE(...)``). What the columns hold where MySQL differs from
MariaDB:

* ``gtid``: the MySQL GTID text (``uuid:n``, ``uuid:tag:n``); null for an
  anonymous transaction (gtid_mode OFF);
* ``offset``: the transaction's GTID (or ANONYMOUS_GTID) event, as
  ``gtidx show FILE OFFSET`` takes it;
* ``timestamp``: the transaction's ``original_commit_timestamp`` in unix
  seconds (floored), the GTID event header's where the event has none
  (before 8.0.1): the commit time on the server that first committed it,
  the same on every replica's binlog, as ``gtidx show`` and ``seek --time``
  read it (``binlog.mysql.MysqlGroup.timestamp``).

Arrow batches (``records`` is False: no GROUP_RECORD runs of MariaDB GTID
events): ``rowbatch.named_batches`` hands the compiled decoder runs of these
transactions with their gtid texts, a compressed one again as its inner
events (``unpacked``), and decodes what it declines (anonymous
transactions, JSON columns, ...) with ``decode``; without it, ``rowbatch.rows_batches`` of ``rows``. A big file's pieces
(``splits``) start at transaction starts found by one walk of the event
headers (``MysqlBinlog.transactions``: GTID events and lengths, no body);
gtidx's MySQL index is not used for them (its records are at transaction
ends, which ROTATE-like events may follow).
"""
from __future__ import annotations

from typing import Iterator

import zlib

from . import show_mysql
from .binlog import mysqlpayload
from .binlog.events import EVENT_HEADER, GROUP_RECORD, HEADER_LEN, U32
from .binlog.mysql import MysqlBinlog
from .binlog.mysqlevents import GTID_TYPES, TRANSACTION_PAYLOAD
from .errors import CorruptBinlogError, GtidxError
from .mysqlgtid import MysqlGtid


class MysqlReading:
    """The MySQL side of ``changes.ChangeSource`` (see the module): the
    methods that open, walk, cut and decode a file."""

    records = False          # no GROUP_RECORD runs: rowbatch.named_batches makes them, with gtid texts
    never_null = ("file", "offset", "timestamp", "table", "op")    # gtid is, for an anonymous transaction

    def open(self, path: str) -> MysqlBinlog:
        """The binlog ``path`` (one of ``files``), open, through its store."""
        return MysqlBinlog(path, self.resolved_store(path))

    @staticmethod
    def parse_gtid(text) -> MysqlGtid:
        """A GTID of these binlogs, from its text (``uuid:n``, ``uuid:tag:n``; else a BadInputError)."""
        return MysqlGtid.parse(text)

    @staticmethod
    def gtid_text(group) -> str | None:
        """A transaction's ``gtid`` column: its GTID's text, None when anonymous."""
        return None if group.gtid is None else str(group.gtid)

    @staticmethod
    def located_transactions(b: MysqlBinlog, spans: list) -> Iterator[tuple]:
        """The located transactions ``spans`` [(start, end, gtid text)] of
        ``b`` as the walk from each start reads them: (``MysqlGroup``, the
        text asked for); one that does not walk as located is a
        CorruptBinlogError."""
        for start, end, text in spans:
            g = next(b.transactions(start), None)
            if g is None or (g.start, g.end) != (start, end):
                raise CorruptBinlogError(f"the transaction of {text} located at {start}-{end} walks as "
                                         f"{'nothing' if g is None else f'{g.start}-{g.end}'}", path=b.path,
                                         offset=start)
            yield g, text

    def groups(self, b: MysqlBinlog, spans: list | None, split: tuple[int, int] | None = None) -> Iterator[tuple]:
        """The transactions of ``b`` the time conditions keep, with the gtid
        text asked for (None: their own): those located (``spans``), else
        those that start in ``split`` [lo, hi) (lo a transaction's start),
        else every one."""
        ok = self.filters.time_ok if self.filters.times else None
        if spans is not None:
            walk = self.located_transactions(b, spans)
        else:
            walk = ((g, None) for g in _starting(b, split))
        for g, text in walk:
            if ok is None or ok(g.timestamp):
                yield g, text

    def runs(self, b: MysqlBinlog, spans: list | None, split: tuple[int, int] | None = None) -> Iterator[tuple]:
        """``groups``, with runs of transactions where the compiled walk takes
        them (``MysqlBinlog.transaction_runs``: ``(records, texts)``, GROUP_RECORDs
        and their gtid texts) when no transaction is located and no time
        condition is a set ("in"): what ``rowbatch.named_batches`` takes,
        which passes over the records outside the time bounds
        (``Filters.bounds``: what ``time_ok`` keeps then). The same
        transactions, and the same errors, as ``groups``."""
        if spans is not None or any(op == "in" for op, _ in self.filters.times):
            yield from self.groups(b, spans, split)
            return
        ok = self.filters.time_ok if self.filters.times else None
        lo, hi = split if split is not None else (None, None)
        first = split is not None
        for item in b.transaction_runs(lo if first and lo > b.body_start else None, hi):
            run = type(item) is tuple
            if first:
                _starts_at(b, GROUP_RECORD.unpack_from(item[0])[0] if run else item.start, lo)
                first = False
            if run:
                yield item
            elif ok is None or ok(item.timestamp):
                yield item, None

    @staticmethod
    def unpacked(b: MysqlBinlog, group) -> bytes | None:
        """A compressed transaction's inner events (its GTID event, then one
        TRANSACTION_PAYLOAD) framed as the file's events are (a header with
        their length, a CRC32 where the file has them), for the compiled
        decoder (``rowbatch.named_batches``); None: not such a transaction,
        or one that does not read (``decode`` then says what is wrong)."""
        try:
            evs = list(b.events_between(group.start, group.end))
            if len(evs) != 2 or evs[0].type not in GTID_TYPES or evs[1].type != TRANSACTION_PAYLOAD:
                return None
            payload = mysqlpayload.decode(evs[1].body, path=b.path, offset=evs[1].offset)
        except GtidxError:
            return None
        crc, out = b.checksum_len, bytearray()
        for e in payload.events:
            at = len(out)
            out += EVENT_HEADER.pack(e.timestamp, e.type, e.server_id, HEADER_LEN + len(e.body) + crc, 0, e.flags)
            out += e.body
            if crc:
                out += U32.pack(zlib.crc32(memoryview(out)[at:]))
        return bytes(out)

    @staticmethod
    def decode(b: MysqlBinlog, group, tables) -> list:
        """The rows of one transaction (``show_mysql.decode_transaction``'s)."""
        return show_mysql.decode_transaction(b, group, tables).rows

    def split_points(self, b: MysqlBinlog, split_bytes: int) -> list[int]:
        """The first transaction start at or after each multiple of
        ``split_bytes`` past the first, from one walk of the event headers;
        a walk that meets damage: the points before it (the piece that
        reaches the damage reads it, and ends with its error)."""
        points, beyond = [], split_bytes
        try:
            for g in b.transactions():
                if g.start >= beyond:
                    points.append(g.start)
                    beyond = (g.start // split_bytes + 1) * split_bytes
        except GtidxError:
            pass
        return points


def _starting(b: MysqlBinlog, split: tuple[int, int] | None):
    """The transactions of ``b``, or those that start in ``split`` [lo, hi):
    the first must start at lo (a piece starts at a transaction, else the
    file is not the one cut: CorruptBinlogError)."""
    if split is None:
        yield from b.transactions()
        return
    lo, hi = split
    first = True
    for g in b.transactions(lo if lo > b.body_start else None):
        if first:
            _starts_at(b, g.start, lo)
        first = False
        if g.start >= hi:
            return
        yield g


def _starts_at(b: MysqlBinlog, start: int, lo: int) -> None:
    """A piece of ``b`` begins at ``lo``: its first transaction must start there."""
    if start != lo:
        raise CorruptBinlogError(f"no transaction starts at {lo}, where this piece of the binlog begins",
                                 path=b.path, offset=lo)


__all__ = ["MysqlReading"]
