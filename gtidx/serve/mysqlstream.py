"""The binlog stream a MySQL source sends a replica after
COM_BINLOG_DUMP_GTID (auto-position) or COM_BINLOG_DUMP (file and offset),
from MySQL binlogs.

For each file from the start: a fake ROTATE naming it (as MariaDB's:
``stream.fake_rotate``), its FORMAT_DESCRIPTION (its IN_USE flag cleared;
log_pos and created zeroed where a file/offset start begins past it,
created zeroed where the replica holds the start file's first GTID; its
CRC32 computed again), then every event. With auto-position the source
leaves out each transaction whose GTID the replica's executed set holds,
the GTID event and every event up to the next GTID event or file boundary
(ROTATE, STOP, FORMAT_DESCRIPTION, PREVIOUS_GTIDS are always sent); before
the next event it sends after such a run, a heartbeat whose log_pos is the
run's end, so the replica's idea of the source's position moves over the
gap (and one each heartbeat period within a long run). An anonymous
transaction is ER_CANT_REPLICATE_ANONYMOUS_WITH_AUTO_POSITION: the stream
ends with error 1236 in the server's words (``anonymous_text``). At the
end of the last file: heartbeats (``Stream.idle``), or an EOF packet for a
dump that asked not to wait. A dump that sets USE_HEARTBEAT_V2 (a 9.7
replica does) gets HEARTBEAT_V2 events, else HEARTBEAT ones. All of it as
MySQL 9.7's sender does it, recorded with a raw client
(tests/test_serve_mysql.py compares the two streams byte for byte).

The files are read through the archive's store (a local directory, an
object-store prefix: ``serve.archive``), in the large reads MariaDB's
stream reads them in (``serve.readahead.events``: the framing checked as
the walk goes); a GTID event's GTID is read from the bytes the walk holds.
"""
from __future__ import annotations

import os
import time
from typing import Callable

from ..binlog.events import CRC_LEN, event_crc
from ..binlog.mysql import MysqlBinlog
from ..binlog.mysqlevents import ANONYMOUS_GTID, BOUNDARY, GTID_TYPES, HEARTBEAT_V2
from ..mysqlgtid import GtidSet
from .readahead import events
from .stream import CREATED_AT, U32, Stream, artificial_event, cleared_fde, fake_rotate, heartbeat
from .wire import U8, ER_MASTER_FATAL_READING_BINLOG, Connection, eof_packet, err_packet, lenenc_int

FLAGS_AT = 17                        # the flags field within the event header (EVENT_HEADER's sixth)
IN_USE = 0x0001                      # LOG_EVENT_BINLOG_IN_USE_F: a FORMAT_DESCRIPTION of a binlog still written
NON_BLOCK = 0x01                     # a dump flag: at the end of the binlogs an EOF packet, not idling
USE_HEARTBEAT_V2 = 0x02              # a dump flag: the replica wants HEARTBEAT_LOG_EVENT_V2
HB_END, HB_FILENAME, HB_POSITION = 0, 1, 2      # HEARTBEAT_V2's body field types


def anonymous_text(name: str, offset: int, end: int, requested: tuple[str, int] = ("", 4)) -> str:
    """MySQL 9.7's error 1236 for an anonymous transaction met by an
    auto-positioned dump (its GTID event at ``offset`` of binlog ``name``,
    ending at ``end``), as its source sends it: the error's text, then where
    the dump began (``requested``: the file name and position the replica
    sent) and where the source stopped reading (recorded with a raw client)."""
    return (f"Cannot replicate anonymous transaction when AUTO_POSITION = 1, at file ./{name}, position "
            f"{offset}.; the first event '{requested[0]}' at {requested[1]}, the last event read from "
            f"'./{name}' at {end}, the last byte read from './{name}' at {end}.")


class AnonymousTransaction(Exception):
    """An anonymous transaction met by an auto-positioned stream: the
    server's error ends it."""


def closed_fde(event: bytes, checksum: bool, clear_created: bool = False) -> bytes:
    """A FORMAT_DESCRIPTION as a MySQL source sends it: without the IN_USE
    flag (a copy of the binlog being written has it); ``clear_created``: its
    created field zeroed too (an auto-positioned replica that holds the
    start file's first transaction must not take the FDE for a source
    restart, which drops its temporary tables: 9.7 then zeroes it in every
    FDE of the dump); its CRC32 computed again where that changed it."""
    flags = int.from_bytes(event[FLAGS_AT:FLAGS_AT + 2], "little")
    if not flags & IN_USE and not (clear_created and any(event[CREATED_AT:CREATED_AT + 4])):
        return event
    out = bytearray(event)
    out[FLAGS_AT:FLAGS_AT + 2] = (flags & ~IN_USE).to_bytes(2, "little")
    if clear_created:
        U32.pack_into(out, CREATED_AT, 0)
    if checksum:
        U32.pack_into(out, len(out) - CRC_LEN, event_crc(out[:len(out) - CRC_LEN], out[4]))
    return bytes(out)


def heartbeat_v2(name: str, log_pos: int, server_id: int, checksum: bool) -> bytes:
    """HEARTBEAT_LOG_EVENT_V2 (type 41), what 9.7 sends a replica whose dump
    asked for it (flag USE_HEARTBEAT_EVENT_V2; a 9.7 replica does): as the
    HEARTBEAT (timestamp 0, flags 0), its body fields of (type, length,
    value): 1 the file name, 2 the position (length-coded), then the end
    mark 0 (recorded from 9.7). The header's log_pos is 32 bits: the
    position there, capped (past 4 GiB not yet recorded)."""
    pos = lenenc_int(log_pos)
    body = (U8.pack(HB_FILENAME) + lenenc_int(len(name)) + name.encode() + U8.pack(HB_POSITION) + lenenc_int(len(pos))
            + pos + U8.pack(HB_END))
    return artificial_event(HEARTBEAT_V2, server_id, min(log_pos, 0xFFFFFFFF), body, checksum, flags=0)


def first_gtid(b: MysqlBinlog, start: int):
    """The GTID of the file's first GTID event from ``start`` (None: an
    anonymous one first, or none): what decides ``closed_fde``'s created.
    The walk stops there: what it read is the file's first events."""
    for off, etype, _, ln in b.checked_headers(start):
        if etype in GTID_TYPES:
            return None if etype == ANONYMOUS_GTID else b.gtid_at(off, etype, ln).gtid
    return None


class MysqlStream(Stream):
    """One MySQL replica's stream: ``files`` from ``files[first]`` at
    ``offset``; ``exclude`` the replica's executed set (auto-position: the
    transactions it holds are left out), None for a file/offset start;
    ``requested``: the file name and position the dump named (an error
    says them); ``flags``: the dump's; ``declared_checksum``: the replica
    said it handles CRC32 (the first fake ROTATE has one then); ``store``:
    where the files are (``Stream``'s)."""

    def __init__(self, conn: Connection, files: list[str], first: int, offset: int, exclude: GtidSet | None,
                 server_id: int, heartbeat_seconds: float, log: Callable[[str], None],
                 requested: tuple[str, int] = ("", 4), flags: int = 0, declared_checksum: bool = True,
                 store=None):
        super().__init__(conn, files, first, offset, None, server_id, heartbeat_seconds, log, store=store)
        # the events this stream makes up have a CRC32 as the last FORMAT_DESCRIPTION sent says;
        # before the first one, as the replica said it handles (@source_binlog_checksum), as 9.7 does
        self.checksum = declared_checksum
        self.exclude, self.requested = exclude, requested
        self.clear_created = False
        self.v2, self.non_block = bool(flags & USE_HEARTBEAT_V2), bool(flags & NON_BLOCK)
        self.last_sent = time.monotonic()

    def event(self, event) -> None:
        """One event to the replica, as ``Stream.event`` sends it (small ones
        gathered); when, for the heartbeats over what is left out."""
        super().event(event)
        self.last_sent = time.monotonic()

    def idle(self, name: str, end: int) -> None:
        """At the end of the binlogs: heartbeats until the replica goes, or,
        for a dump that said BINLOG_DUMP_NON_BLOCK (``mysqlbinlog
        --read-from-remote-source`` without ``--stop-never``), an EOF packet."""
        if self.non_block:
            self.flush()
            self.conn.send(eof_packet())
            return
        super().idle(name, end)

    def heartbeat_event(self, name: str, log_pos: int) -> bytes:
        return (heartbeat_v2 if self.v2 else heartbeat)(name, log_pos, self.server_id, self.checksum)

    def run(self) -> None:
        try:
            super().run()
        except AnonymousTransaction as e:
            self.flush()
            self.conn.send(err_packet(ER_MASTER_FATAL_READING_BINLOG, str(e)))
            self.log(f"stream ended: {e}")

    def send_file(self, path: str, first: bool) -> tuple[str, int]:
        """Sends one file's events; (its name, the end of its last event)."""
        name = os.path.basename(path)
        with MysqlBinlog(path, self.store) as b:
            checksum = bool(b.checksum_len)
            start = self.offset if first else 4
            self.event(fake_rotate(name, start, self.server_id, self.checksum))
            self.checksum = checksum
            fde_end = 4 + b.fde.length
            if first and self.exclude is not None:     # decided at the start file, kept for the dump
                gtid = first_gtid(b, fde_end)
                self.clear_created = gtid is not None and gtid in self.exclude
            fde = closed_fde(bytes(b.buffer[4:fde_end]), checksum, self.clear_created)
            self.event(cleared_fde(fde, checksum) if first and start > 4 else fde)
            end = max(start, fde_end)
            return name, self.send_events(b, name, end)

    def send_events(self, b: MysqlBinlog, name: str, end: int) -> int:
        """The file's events from ``end`` (an event boundary); the end of the last one."""
        leaving_out, skipped_to = False, None
        for off, etype, _, ln, data in events(b, end):
            if etype in GTID_TYPES:
                if etype == ANONYMOUS_GTID and self.exclude is not None:
                    raise AnonymousTransaction(anonymous_text(name, off, off + ln, self.requested))
                gtid = b.gtid_of(off, etype, data).gtid
                leaving_out = self.exclude is not None and gtid in self.exclude
            elif etype in BOUNDARY:
                leaving_out = False
            if leaving_out:                     # a heartbeat each period while leaving out, else after
                skipped_to = off + ln
                if time.monotonic() - self.last_sent >= self.heartbeat_seconds:
                    self.event(self.heartbeat_event(name, skipped_to))
                    self.flush()                # it keeps the connection alive: it goes now
                    skipped_to = None
            else:
                if skipped_to is not None:      # the replica's position moved over what was left out
                    self.event(self.heartbeat_event(name, skipped_to))
                    skipped_to = None
                self.event(data)
            end = off + ln
        return end

