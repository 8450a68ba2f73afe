"""The binlog stream a source sends a replica after COM_BINLOG_DUMP.

For each file from the start: a fake ROTATE naming it (log_pos 0, timestamp
0, the artificial flag: what a replica takes for "you are now reading this
file"), its FORMAT_DESCRIPTION, then its events. The FDE goes out as the
file has it, except for a file/offset start past the file's first event:
log_pos and created zeroed, its checksum computed again. A GTID start reads
the file from its start (or, where the index says what that walk does, from
the first group sent: ``serve.jump``) and skips, per domain, the groups the
replica already has (``ReplicaStart.skip``, gtidx's answer of where the server
starts: ``series.mariadb.BinlogSeries.replica_start`` states the rule), then
sends a fake GTID_LIST of the GTIDs it skipped to, as MariaDB 10.11 does.
At the end of the last file the stream idles: a HEARTBEAT (log_pos: the
end of the last event read) every heartbeat period, until the replica
goes away. Every event is one packet (the OK byte 0 and the event's
bytes), pieces of it when larger than a packet; the files are read in large
reads (``serve.readahead``), short packets sent many at a time.
"""
from __future__ import annotations

import os
import select
import struct
from typing import Callable

from ..binlog.events import (ANNOTATE_ROWS, BOUNDARY_TYPES, CRC_LEN, EVENT_HEADER, FDE_FIXED, GTID, GTID_BODY,
                             GTID_ENTRY, GTID_LIST, HEADER_LEN, ROTATE, event_crc)
from ..binlog.mariadb import Binlog
from ..gtid import BinlogState, Position
from .readahead import events, jumped
from .wire import Connection, ProtocolError, eof_packet

HEARTBEAT = 27                      # HEARTBEAT_LOG_EVENT: only ever on the wire, never in a file
ARTIFICIAL = 0x20                   # LOG_EVENT_ARTIFICIAL_F: made up by the source, not read from a binlog
ROTATE_POSITION = struct.Struct("<Q")
U32 = struct.Struct("<I")
LOG_POS_AT = 13                     # the log_pos field within the event header (EVENT_HEADER's fifth field)
CREATED_AT = HEADER_LEN + FDE_FIXED.size - 5    # the FDE's created field: before its header_len byte
UNTIL_REACHED = 1 << 28             # a GTID_LIST's count flag on the wire: the replica's UNTIL position is reached
# Events shorter than GATHER_EVENT are gathered and sent GATHER_BYTES at a time: a send per event (a
# system call per ~100-byte event of a typical OLTP binlog) was most of a stream's CPU time.
GATHER_EVENT = 1 << 16
GATHER_BYTES = 1 << 18


def artificial_event(etype: int, server_id: int, log_pos: int, body: bytes, checksum: bool,
                     flags: int = ARTIFICIAL) -> bytes:
    """An event the source makes up (fake ROTATE, fake GTID_LIST, HEARTBEAT):
    timestamp 0, ``flags`` (the artificial flag), a CRC32 when the stream
    has checksums."""
    size = HEADER_LEN + len(body) + (CRC_LEN if checksum else 0)
    event = EVENT_HEADER.pack(0, etype, server_id, size, log_pos, flags) + body
    return event + U32.pack(event_crc(event, etype)) if checksum else event


def fake_rotate(name: str, offset: int, server_id: int, checksum: bool) -> bytes:
    return artificial_event(ROTATE, server_id, 0, ROTATE_POSITION.pack(offset) + name.encode(), checksum)


def heartbeat(name: str, log_pos: int, server_id: int, checksum: bool) -> bytes:
    """The HEARTBEAT of a source idle at ``log_pos`` in ``name``: timestamp 0
    and, as MariaDB 10.11 sends it, no artificial flag."""
    return artificial_event(HEARTBEAT, server_id, log_pos, name.encode(), checksum, flags=0)


def fake_gtid_list(gtids, log_pos: int, server_id: int, checksum: bool, flags: int = 0) -> bytes:
    """The GTID_LIST a source makes up: when a GTID start has reached every
    domain it skipped in, those domains' requested GTIDs, ``log_pos`` the
    offset of the first event sent after them; when the replica's UNTIL
    position is reached (``flags`` UNTIL_REACHED), the binlog state there,
    ``log_pos`` the end of the last event sent. ``gtids``: (domain, server, seq)s."""
    body = U32.pack(len(gtids) | flags) + b"".join(GTID_ENTRY.pack(*g) for g in gtids)
    return artificial_event(GTID_LIST, server_id, log_pos, body, checksum)


def cleared_fde(event: bytes, checksum: bool) -> bytes:
    """A FORMAT_DESCRIPTION with log_pos and created zeroed (a replica that
    does not start at the file's first event must not take it for the
    server's start), its CRC32 computed again."""
    out = bytearray(event)
    U32.pack_into(out, LOG_POS_AT, 0)
    U32.pack_into(out, CREATED_AT, 0)
    if checksum:
        U32.pack_into(out, len(out) - CRC_LEN, event_crc(out[:len(out) - CRC_LEN], out[4]))
    return bytes(out)


class Skipper:
    """Which groups a GTID start leaves out: per domain still to reach, the
    groups up to the requested GTID's server logging a seq at least the
    requested one (equal: left out too; greater: the first sent). A domain
    the replica did not name, or one reached, sends everything. Once every
    domain is reached, the source announces the requested GTIDs in a fake
    GTID_LIST before the next event it sends (``announce``)."""

    def __init__(self, skip: Position):
        self.pending = {g.domain: g for g in skip}
        self.requested = list(skip)
        self.announce = bool(self.pending)       # a fake GTID_LIST is owed once every domain is reached

    def leaves_out(self, domain: int, server: int, seq: int) -> bool:
        want = self.pending.get(domain)
        if want is None:
            return False
        if server != want.server or seq < want.seq:
            return True
        del self.pending[domain]
        return seq == want.seq


class Until:
    """``START SLAVE UNTIL master_gtid_pos`` (``@slave_until_gtid``): the
    source stops after the group that reaches the position in its last
    domain (a domain is reached by its GTID's server logging a seq at least
    the position's), says so in a fake GTID_LIST flagged UNTIL_REACHED that
    carries the binlog state there, and ends the stream (an EOF packet), as
    MariaDB 10.11 does. Every group counts, the ones a GTID start leaves out
    too, and so does the state the stream starts from: a position the
    replica already holds is reached at once."""

    def __init__(self, until: Position):
        self.pending = {g.domain: g for g in until}

    def group(self, domain: int, server: int, seq: int) -> None:
        want = self.pending.get(domain)
        if want is not None and server == want.server and seq >= want.seq:
            del self.pending[domain]

    @property
    def reached(self) -> bool:
        return not self.pending


class UntilReached(Exception):
    """The stream ended at the replica's UNTIL position."""


class Stream:
    """One replica's stream: ``files`` (paths, binlog order) from
    ``files[first]`` at ``offset``, groups left out by ``skipper`` (None: a
    file/offset start leaves none out). ``annotate``: the replica asked for
    ANNOTATE_ROWS events (COM_BINLOG_DUMP's flag 2); without it the source
    leaves them out, as MariaDB's does."""

    def __init__(self, conn: Connection, files: list[str], first: int, offset: int, skipper: Skipper | None,
                 server_id: int, heartbeat_seconds: float, log: Callable[[str], None], annotate: bool = True,
                 until: Until | None = None, store=None, jump=None):
        self.conn, self.files, self.first, self.offset = conn, files, first, offset
        self.store = store          # where the files are (a storage store; None: the paths' own)
        self.annotate, self.until = annotate, until
        self.state: BinlogState | None = None
        self.jump = jump            # a GTID start's jump in its first file (``serve.jump.Jump``), or None
        if jump is not None and until is not None:
            self.state = jump.state.copy()
            for g in self.state:
                until.group(*g)
        self.skipper, self.server_id = skipper, server_id
        self.heartbeat_seconds, self.log = heartbeat_seconds, log
        self.sent = 0
        self.out = bytearray()      # packets gathered, not sent yet (``flush``)
        self.checksum = True        # the last file's: the idle stream's events

    def event(self, event) -> None:
        """One event to the replica: a packet of the OK byte and its bytes
        (a short one gathered with others: ``flush`` sends them)."""
        if len(event) < GATHER_EVENT:
            self.conn.gather(self.out, b"\0", event)
            if len(self.out) >= GATHER_BYTES:
                self.flush()
        else:
            self.flush()
            self.conn.send_prefixed(b"\0", event)
        self.sent += 1

    def flush(self) -> None:
        """Sends the packets gathered: before the stream waits, ends or
        sends anything else."""
        if self.out:
            self.conn.sock.sendall(self.out)
            self.out.clear()

    def run(self) -> None:
        name, end = "", 4
        try:
            for i in range(self.first, len(self.files)):
                name, end = self.send_file(self.files[i], i == self.first)
        except UntilReached:
            return
        self.idle(name, end)

    def announce(self, log_pos: int, checksum: bool) -> None:
        """The fake GTID_LIST a GTID start owes once every skipped domain is
        reached, sent once, before the next event (``log_pos``: its offset)."""
        skipper = self.skipper
        if skipper is not None and skipper.announce and not skipper.pending:
            skipper.announce = False
            self.event(fake_gtid_list(skipper.requested, log_pos, self.server_id, checksum))

    def stop_at_until(self, end: int, checksum: bool) -> None:
        """At a group's end: the replica's UNTIL position reached, the stream ends here."""
        if self.until is not None and self.until.reached and self.state is not None:
            self.event(fake_gtid_list(self.state.entries(), end, self.server_id, checksum, UNTIL_REACHED))
            self.flush()
            self.conn.send(eof_packet())
            self.log(f"UNTIL position reached: the stream ends at {self.state.position()}")
            raise UntilReached

    def send_file(self, path: str, first: bool) -> tuple[str, int]:
        """Sends one file's events; (its name, the end of its last event)."""
        name = os.path.basename(path)
        with Binlog(path, self.store) as b:
            checksum = bool(b.checksum_len)
            start = self.offset if first else 4
            self.event(fake_rotate(name, start, self.server_id, checksum))
            fde_end = 4 + b.fde.length
            fde = bytes(b.buffer[4:fde_end])
            self.event(cleared_fde(fde, checksum) if first and start > 4 else fde)
            leaving_out = False
            end = max(start, fde_end)
            if self.state is None and self.until is not None:
                self.state = b.start_state.copy() if end <= b.body_start else b.state_at(end)
                for g in self.state or ():
                    self.until.group(*g)          # a domain the start state already has is reached
            walk = jumped(b, end, self.jump.spans(), self.at_jump) if first and self.jump is not None \
                else events(b, end)
            for off, etype, server_id, ln, data in walk:
                if etype == GTID or etype in BOUNDARY_TYPES:
                    self.stop_at_until(end, checksum)
                if etype == GTID:
                    seq, domain, _ = GTID_BODY.unpack_from(data, HEADER_LEN)
                    leaving_out = self.skipper is not None and self.skipper.leaves_out(domain, server_id, seq)
                    if self.until is not None:
                        if self.state is not None:
                            self.state.apply(domain, server_id, seq)
                        self.until.group(domain, server_id, seq)
                elif etype in BOUNDARY_TYPES:
                    leaving_out = False
                if not leaving_out and (etype != ANNOTATE_ROWS or self.annotate):
                    self.announce(off, checksum)
                    self.event(data)
                end = off + ln
            self.stop_at_until(end, checksum)
            self.checksum = checksum
            return name, end

    def at_jump(self, reached: tuple) -> None:
        """Where a GTID start's jump goes on: the skipped domains reached
        before there send everything from there."""
        for domain in reached:
            self.skipper.pending.pop(domain, None)

    def idle(self, name: str, end: int) -> None:
        """At the end of the binlogs: a heartbeat each period until the replica
        goes. A fake GTID_LIST still owed (the skipped domains were reached in
        the last group) goes first, at the end's offset."""
        self.announce(end, self.checksum)
        sock = self.conn.sock
        while True:
            self.flush()
            readable, _, _ = select.select([sock], [], [], self.heartbeat_seconds)
            if readable:
                if not sock.recv(1 << 12):
                    raise ProtocolError("the replica closed the connection")
                continue
            self.event(heartbeat(name, end, self.server_id, self.checksum))
