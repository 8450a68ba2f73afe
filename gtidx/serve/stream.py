"""The binlog stream a source sends a replica after COM_BINLOG_DUMP.

For each file from the start: a fake ROTATE naming it (log_pos 0, timestamp
0, the artificial flag: what a replica takes for "you are now reading this
file"), its FORMAT_DESCRIPTION, then its events. The FDE goes out as the
file has it, except for a file/offset start past the file's first event:
log_pos and created zeroed, its checksum computed again. A GTID start reads
the file from its start (or, where the index says what that walk does, from
the first group sent: ``serve.jump``) and skips, per domain, the groups the
replica already has (``ReplicaStart.skip``, gtidx's answer of where the server
starts: ``series.mariadb.BinlogSeries.replica_start`` states the rule), and
once a domain is reached, at the end of what was left out (or right after
the reaching GTID event, when that one is sent), a fake GTID_LIST of the
binlog state read so far, as MariaDB 10.11 does. The FDE of a binlog still
being written goes out without its in-use flag, as the server sends it.
At the end of the last file of a local directory the stream follows it
(``Stream.follow``: the newest binlog's complete groups as they are
written, new files at rotation); when nothing is sent for a heartbeat
period, a HEARTBEAT (log_pos: the end of the last event read), until the
replica goes away. Every event is one packet (the OK byte 0 and the event's
bytes), pieces of it when larger than a packet; the files are read in large
reads (``serve.readahead``), short packets sent many at a time.
"""
from __future__ import annotations

import os
import select
import struct
import time
from typing import Callable

from ..binlog.events import (ANNOTATE_ROWS, BOUNDARY_TYPES, CRC_LEN, EVENT_HEADER, FDE_FIXED, GTID, GTID_BODY,
                             GTID_ENTRY, GTID_LIST, HEADER_LEN, ROTATE, event_crc)
from ..binlog.mariadb import Binlog
from ..index.files import still_written
from ..series.mariadb import start_leaves_out
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
FLAGS = struct.Struct("<H")
FLAGS_AT = LOG_POS_AT + U32.size    # the flags field within the event header, after log_pos
BINLOG_IN_USE = 0x01                # LOG_EVENT_BINLOG_IN_USE_F: an FDE's "this binlog is still open"
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


def cleared_fde(event: bytes, checksum: bool, log_pos: bool = True, created: bool = True) -> bytes:
    """A FORMAT_DESCRIPTION as the source sends it: without the in-use flag
    (the server clears it for a binlog it is still writing); ``log_pos``
    zeroed for a file/offset start past the file's first event, ``created``
    zeroed for it and for a GTID start not yet at its position (either way
    the replica must not take it for a server restart, which drops its
    temporary tables); its CRC32 computed again when changed."""
    out = bytearray(event)
    flags = FLAGS.unpack_from(out, FLAGS_AT)[0]
    FLAGS.pack_into(out, FLAGS_AT, flags & ~BINLOG_IN_USE)
    if log_pos:
        U32.pack_into(out, LOG_POS_AT, 0)
    if created:
        U32.pack_into(out, CREATED_AT, 0)
    if out == event:
        return event
    if checksum:
        U32.pack_into(out, len(out) - CRC_LEN, event_crc(out[:len(out) - CRC_LEN], out[4]))
    return bytes(out)


class Skipper:
    """Which groups a GTID start leaves out: the series' rule
    (``series.mariadb.start_leaves_out``: per domain still to reach, the
    groups up to the requested GTID's server logging a seq at least the
    requested one; equal: left out too; greater: the first sent), applied as
    the stream goes. A domain the replica did not name, or one reached,
    sends everything. Each
    time a domain is reached the source owes a fake GTID_LIST (``owed``),
    sent once the group is not left out. ``strict`` (the replica's
    gtid_strict_mode): a domain reached by a greater seq is the "hole"
    refusal, met where the stream meets it, as the server meets it
    (``BinlogSeries.replica_start`` finds it only before the first group
    sent)."""

    def __init__(self, skip: Position, strict: bool = False):
        self.pending = {g.domain: g for g in skip}
        self.owed, self.strict = False, strict

    def leaves_out(self, domain: int, server: int, seq: int, path=None, offset: int | None = None) -> bool:
        before = len(self.pending)
        out = start_leaves_out(self.pending, domain, server, seq, self.strict, path, offset)
        self.owed = self.owed or len(self.pending) < before
        return out


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


class StreamEnd(Exception):
    """The stream ends before the binlogs' end."""


class UntilReached(StreamEnd):
    """The stream ended at the replica's UNTIL position."""


class Stream:
    """One replica's stream: ``files`` (paths, binlog order) from
    ``files[first]`` at ``offset``, groups left out by ``skipper`` (None: a
    file/offset start leaves none out). ``annotate``: the replica asked for
    ANNOTATE_ROWS events (COM_BINLOG_DUMP's flag 2); without it the source
    leaves them out, as MariaDB's does. ``relist`` (the binlogs, listed
    again): at the end the stream follows them (``follow``), else it idles.
    ``store``: where the files are (a storage store; None: the paths' own).
    ``jump``: a GTID start's jump in its first file (``serve.jump.Jump``)."""

    def __init__(self, conn: Connection, files: list[str], first: int, offset: int, skipper: Skipper | None,
                 server_id: int, heartbeat_seconds: float, log: Callable[[str], None], annotate: bool = True,
                 until: Until | None = None, relist: Callable[[], list[str]] | None = None, store=None,
                 jump=None):
        self.conn, self.files, self.first, self.offset = conn, files, first, offset
        self.annotate, self.until, self.relist = annotate, until, relist
        self.store, self.jump = store, jump
        self.state: BinlogState | None = None
        self.out = bytearray()      # packets gathered, not sent yet (``flush``)
        self.skipper, self.server_id = skipper, server_id
        self.heartbeat_seconds, self.log = heartbeat_seconds, log
        self.sent = 0
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

    def run(self) -> bool:
        """The stream to its end: False where it ended early (UNTIL); else it
        idles at the binlogs' end until the replica goes. A refusal met on
        the way (``Skipper``) is raised, after the events before it."""
        name, end = "", 4
        try:
            for i in range(self.first, len(self.files)):
                name, end = self.send_file(self.files[i], i == self.first)
            if self.relist is not None:
                self.follow(name, end)
        except StreamEnd:
            return False
        self.idle(name, end)
        return True

    def announce(self, log_pos: int, checksum: bool) -> None:
        """The fake GTID_LIST a GTID start owes once a skipped domain is
        reached: the binlog state read so far (every GTID read while a domain
        was still to reach, from the file's GTID_LIST on with an UNTIL
        position), at ``log_pos``, the end of the group left out or of the
        reaching GTID event sent."""
        skipper = self.skipper
        if skipper is not None and skipper.owed:
            skipper.owed = False
            self.event(fake_gtid_list(self.state.entries(), log_pos, self.server_id, checksum))

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
            past_start = first and start > 4
            self.event(cleared_fde(bytes(b.buffer[4:fde_end]), checksum, log_pos=past_start,
                                   created=past_start or (self.skipper is not None and bool(self.skipper.pending))))
            end = max(start, fde_end)
            if self.state is None and self.until is not None:
                self.state = b.start_state.copy() if end <= b.body_start else b.state_at(end)
                for g in self.state or ():
                    self.until.group(*g)          # a domain the start state already has is reached
            elif self.state is None:
                self.state = BinlogState()        # the server's: the GTIDs it reads while a domain is to reach
            self.checksum = checksum
            return name, self.send_events(b, end, first and self.jump is not None)

    def send_events(self, b: Binlog, end: int, jump: bool = False) -> int:
        """Sends ``b``'s events from ``end`` (an event boundary, outside a
        group): all of a closed binlog, and of one still written only its
        complete groups (the framing's walk says where the last one ends) and
        the complete events outside groups after them (BINLOG_CHECKPOINT), so
        a replica never gets part of a group. ``jump``: from the file's
        leading events to the first group sent (``serve.jump``). Returns where
        it stopped."""
        checksum = bool(b.checksum_len)
        limit = None
        if still_written(b, newest=True):
            limit = end
            for limit, _, _ in b.group_batches(1 << 62, end):
                pass
            for off, etype, _, ln in b.headers(limit):     # and the events outside groups after them
                if etype not in BOUNDARY_TYPES:
                    break
                limit = off + ln
        leaving_out = False                       # a call starts at a group's end
        skipper = self.skipper
        if limit is None or limit > end:
            walk = jumped(b, end, self.jump.spans(), self.at_jump) if jump else events(b, end)
            for off, etype, server_id, ln, data in walk:
                if limit is not None and off >= limit:
                    break
                if etype == GTID or etype in BOUNDARY_TYPES:
                    leaving_out = False           # the group left out ended before this event
                    self.announce(off, checksum)
                    self.stop_at_until(end, checksum)
                if etype == GTID:
                    seq, domain, _ = GTID_BODY.unpack_from(data, HEADER_LEN)
                    if self.until is not None or (skipper is not None and skipper.pending):
                        self.state.apply(domain, server_id, seq)
                    leaving_out = skipper is not None and skipper.leaves_out(domain, server_id, seq, b.path, off)
                    if self.until is not None:
                        self.until.group(domain, server_id, seq)
                if not leaving_out and (etype != ANNOTATE_ROWS or self.annotate):
                    self.event(data)
                    if skipper is not None and skipper.owed:
                        self.announce(off + ln, checksum)
                end = off + ln
        self.announce(end, checksum)
        self.stop_at_until(end, checksum)
        return end

    def follow(self, name: str, end: int) -> None:
        """At the end of the binlogs of a live directory, as ``gtidx tail``
        follows it (``tail.watch``: inotify, else polling): the newest binlog
        read again when written (its complete groups sent), the binlogs
        listed again when the directory changes (a rotation: the closed
        file's last events, then each new file as ``send_file`` sends it); a
        heartbeat when nothing was sent for a period. Returns when the newest
        binlog is gone from the listing (purged): the stream idles there."""
        from ..tail.watch import watch_for
        self.announce(end, self.checksum)
        path = self.files[-1]
        directory = os.path.dirname(path) or "."
        watch = watch_for(directory, self.conn.sock.fileno())
        quiet = time.monotonic()
        try:
            while True:
                self.flush()
                watch.arm(directory, path)
                wake = watch.wait(self.heartbeat_seconds - (time.monotonic() - quiet))
                if wake.stop:
                    if not self.conn.sock.recv(1 << 12):
                        raise ProtocolError("the replica closed the connection")
                    continue
                sent = self.sent
                with Binlog(path) as b:
                    if b.size > end:
                        end = self.send_events(b, end)
                files = self.relist()
                if path not in files:
                    return
                later = files[files.index(path) + 1:]
                if later:                          # rotated: the closed file's last events (its ROTATE) first
                    with Binlog(path) as b:
                        if b.size > end:
                            end = self.send_events(b, end)
                    for path in later:
                        name, end = self.send_file(path, False)
                if self.sent != sent:
                    quiet = time.monotonic()
                elif time.monotonic() - quiet >= self.heartbeat_seconds:
                    self.event(heartbeat(name, end, self.server_id, self.checksum))
                    quiet = time.monotonic()
        finally:
            watch.close()

    def at_jump(self, span) -> None:
        """Where a GTID start's jump goes on (``serve.jump.Jump.spans``): the
        fake GTID_LISTs the walk over the groups jumped would have sent, and
        at the first group sent, the walk's binlog state and domains still
        to reach there."""
        for log_pos, entries in span.announced:
            self.event(fake_gtid_list(entries, log_pos, self.server_id, self.checksum))
        self.skipper.owed = False
        if span.last:
            self.skipper.pending = dict(self.jump.pending)
            self.state = self.jump.state.copy()
            if self.until is not None:
                for g in self.state:
                    self.until.group(*g)

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
            self.event(self.heartbeat_event(name, end))

    def heartbeat_event(self, name: str, log_pos: int) -> bytes:
        """The heartbeat this stream sends (a flavor's stream may send another kind)."""
        return heartbeat(name, log_pos, self.server_id, self.checksum)
