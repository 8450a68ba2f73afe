"""The binlog stream a MySQL source sends a replica after
COM_BINLOG_DUMP_GTID (auto-position) or COM_BINLOG_DUMP (file and offset),
from MySQL binlogs.

For each file from the start: a fake ROTATE naming it (as MariaDB's:
``stream.fake_rotate``), its FORMAT_DESCRIPTION (its IN_USE flag cleared;
log_pos zeroed too where a file/offset start begins past it, its CRC32
computed again), then every event. With auto-position the source leaves
out each transaction whose GTID the replica's executed set holds, the
GTID event and every event up to the next GTID event or file boundary
(ROTATE, STOP, FORMAT_DESCRIPTION, PREVIOUS_GTIDS are always sent); before
the next event it sends after such a run, a HEARTBEAT whose log_pos is the
run's end, so the replica's idea of the source's position moves over the
gap. Recorded from MySQL 9.7 with a raw client (tests/test_serve_mysql.py
compares the two streams byte for byte). An anonymous transaction is
ER_CANT_REPLICATE_ANONYMOUS_WITH_AUTO_POSITION, as the server refuses it:
the stream ends with error 1236 (the text the server's error message,
not yet compared with what a 9.7 source sends). At the end of the last file: heartbeats, as MariaDB's
(``Stream.idle``: MySQL 9.7 sends the same HEARTBEAT, type 27).
"""
from __future__ import annotations

import os
from typing import Callable

from ..binlog.events import CRC_LEN, event_crc
from ..binlog.mysql import MysqlBinlog
from ..binlog.mysqlevents import ANONYMOUS_GTID, BOUNDARY, GTID_TYPES
from ..mysqlgtid import GtidSet
from .stream import U32, Stream, cleared_fde, fake_rotate, heartbeat
from .wire import ER_MASTER_FATAL_READING_BINLOG, Connection, err_packet

FLAGS_AT = 17                        # the flags field within the event header (EVENT_HEADER's sixth)
IN_USE = 0x0001                      # LOG_EVENT_BINLOG_IN_USE_F: a FORMAT_DESCRIPTION of a binlog still written
ANONYMOUS_TEXT = ("Cannot replicate anonymous transaction when AUTO_POSITION = 1, at file {file}, "
                  "position {pos}.")


class AnonymousTransaction(Exception):
    """An anonymous transaction met by an auto-positioned stream: the
    server's error ends it."""


def closed_fde(event: bytes, checksum: bool) -> bytes:
    """A FORMAT_DESCRIPTION as a MySQL source sends it: without the IN_USE
    flag (a copy of the binlog being written has it), its CRC32 computed
    again where that changed it."""
    flags = int.from_bytes(event[FLAGS_AT:FLAGS_AT + 2], "little")
    if not flags & IN_USE:
        return event
    out = bytearray(event)
    out[FLAGS_AT:FLAGS_AT + 2] = (flags & ~IN_USE).to_bytes(2, "little")
    if checksum:
        U32.pack_into(out, len(out) - CRC_LEN, event_crc(out[:len(out) - CRC_LEN], out[4]))
    return bytes(out)


class MysqlStream(Stream):
    """One MySQL replica's stream: ``files`` from ``files[first]`` at
    ``offset``; ``exclude`` the replica's executed set (auto-position: the
    transactions it holds are left out), None for a file/offset start."""

    def __init__(self, conn: Connection, files: list[str], first: int, offset: int, exclude: GtidSet | None,
                 server_id: int, heartbeat_seconds: float, log: Callable[[str], None]):
        super().__init__(conn, files, first, offset, None, server_id, heartbeat_seconds, log)
        self.exclude = exclude

    def run(self) -> None:
        try:
            super().run()
        except AnonymousTransaction as e:
            self.conn.send(err_packet(ER_MASTER_FATAL_READING_BINLOG, str(e)))
            self.log(f"stream ended: {e}")

    def send_file(self, path: str, first: bool) -> tuple[str, int]:
        """Sends one file's events; (its name, the end of its last event)."""
        name = os.path.basename(path)
        with MysqlBinlog(path) as b:
            checksum = bool(b.checksum_len)
            start = self.offset if first else 4
            self.event(fake_rotate(name, start, self.server_id, checksum))
            fde_end = 4 + b.fde.length
            fde = closed_fde(bytes(b.buffer[4:fde_end]), checksum)
            self.event(cleared_fde(fde, checksum) if first and start > 4 else fde)
            end = max(start, fde_end)
            leaving_out, skipped_to = False, None
            for off, etype, _, ln in b.headers(end):
                if etype in GTID_TYPES:
                    if etype == ANONYMOUS_GTID and self.exclude is not None:
                        raise AnonymousTransaction(ANONYMOUS_TEXT.format(file=f"./{name}", pos=off))
                    gtid = b.gtid_at(off, etype, ln).gtid
                    leaving_out = self.exclude is not None and gtid in self.exclude
                elif etype in BOUNDARY:
                    leaving_out = False
                if leaving_out:
                    skipped_to = off + ln
                else:
                    if skipped_to is not None:      # the replica's position moved over what was left out
                        self.event(heartbeat(name, skipped_to, self.server_id, checksum))
                        skipped_to = None
                    self.event(bytes(b.buffer[off:off + ln]))
                b.release(off, off + ln)
                end = off + ln
            self.checksum = checksum
            return name, end

