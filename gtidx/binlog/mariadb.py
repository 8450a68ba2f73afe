"""Read MariaDB binlog files: framing, the events gtidx needs, event groups.

What the bytes mean (event types, flags, layouts; the records ``Event``/``Group``: ``records``) is
``binlog.events``'s; this module walks a file with them.

A ``Binlog`` reads the file through ``filebuf`` and answers from the bytes:

* ``headers()`` / ``events()``: every event, walked by summing event lengths
  (never by the next-position field: it wraps at 4 GiB and MariaDB 11.4+
  writes 0 for events from the transaction cache).
* ``groups()``: event groups ``(gtid, start, end, timestamp, flags2)``.
* ``state_at(offset)``: the GTID state at an offset, as ``BINLOG_GTID_POS``.

A file whose FORMAT_DESCRIPTION has LOG_EVENT_BINLOG_IN_USE_F set is still
being written (or its server crashed): a partial last event is where the walk
stops, not corruption. In a closed file the same thing is corruption. Either
way an event length below 19 is corruption, reported with its offset.

No binlog is mapped: any binlog can shrink under us, a closed one too
(docs/design.md, "Files that change under a reader"), and a mapping past
the new end kills the process with SIGBUS. The bytes are read with
``pread`` (``filebuf``), two ways:

* the walks (``walk.group_walk``, ``walk.apply_until``, ``complete_end``,
  ``_headers_between``) run over a ``filebuf.Window``: one reused buffer
  moved along the file, at most ``filebuf.WINDOW`` bytes, with offsets
  relative to the window's ``base``; the file offset is ``base + off``,
  computed only where an event is looked at (the cold branch);
* everything else (the preamble, a lookup's event, ``buffer``) reads the
  ``PreadBuffer`` ``self._mm`` after ``self._fill(lo, hi)`` for its range:
  16 KiB chunks read on first use and kept.

A file that shrank below what is read gives a GtidxIOError ("shrank"),
never a signal.

The group walk and the state walk, the hot loops of the whole project, are
``binlog.walk``'s: this class opens the file, reads its preamble and format
description, checks framing and checksums, and hands the walks itself.
"""
from __future__ import annotations

import os
import zlib
from typing import Iterator

from .. import filebuf, storage
from ..errors import (BadInputError, CorruptBinlogError, EncryptedBinlogError, GtidxError, GtidxIOError,
                     MySQLBinlogError, UnsupportedBinlogError, quoted)
from ..gtid import BinlogState, Gtid

from . import walk
from .events import (CHECKSUM_CRC32, CHECKSUM_NONE, CHECKSUM_UNDEF, CRC_LEN,
                     EVENT_HEADER, EVENT_NAMES, FDE_FIXED, FL_STANDALONE, FORMAT_DESCRIPTION, GTID,
                     GTID_LIST, HEADER_LEN, IN_USE_FLAG, MAGIC, MYSQL_ANONYMOUS_GTID,
                     MYSQL_GTID, MYSQL_PREVIOUS_GTIDS, ROTATE, START_ENCRYPTION, START_EVENT_V3, STOP, TYPE_LENGTH,
                     TYPE_SERVER_LENGTH, U32, FormatDescription, decode_gtid_list, event_crcs,
                     has_checksum_alg, is_group_terminator, is_mariadb, KNOWN_TYPES)
from .events import GROUP_RECORD  # noqa: F401 - re-exported: callers unpack group_records with it



# -- the file ----------------------------------------------------------------

class Binlog:
    """One binlog file, read-only. Use as a context manager or close().

    What it reads is a snapshot of the file's size at open: a file that grows
    afterwards is re-read by opening it again. The bytes are read with pread
    as methods need them (a file that shrank then raises GtidxIOError, never
    SIGBUS): walks through a moving ``filebuf.Window``, the rest through the
    ``PreadBuffer`` ``_mm`` after ``_fill``.
    """
    known_types = KNOWN_TYPES      # the event types its server writes (a probe's plausible headers)

    def __init__(self, path: str | os.PathLike, store=None, opened=None):
        """``store``: where ``path`` is (a ``storage`` store); by default
        the one its form names (a plain path: local; a URL: fsspec's, with
        the environment's credentials). ``opened``: the file already open
        there (an object the listing opened to read its flavor), taken over."""
        if not isinstance(path, (str, bytes, os.PathLike)):
            raise BadInputError(f"a binlog path must be a str or os.PathLike, not {type(path).__name__}")
        self.path = os.fspath(path)
        if "\0" in os.fsdecode(self.path):
            raise BadInputError(f"binlog path {quoted(os.fsdecode(self.path))} contains a NUL character")
        self._file = None
        self._private = None           # the PreadBuffer behind _mm and _fill
        self._fill = self._read_after_close
        if store is None:
            store, self.path = storage.resolve(self.path)
        self.store = store
        self._file = store.open_file(self.path) if opened is None else opened
        try:
            self.size = self._file.size
            if self.size == 0:
                raise UnsupportedBinlogError("empty file, not a binlog", path=self.path)
            self._private = self._file.private()
            self._fill = self._private.fill
            self._read_preamble()
        except OSError as e:
            self.close()
            raise GtidxIOError.from_os(e, self.path) from None
        except BaseException:
            self.close()
            raise

    def _read_after_close(self, lo: int, hi: int = 0) -> None:
        raise GtidxIOError("read after close", path=self.path, offset=lo)

    def window(self, start: int, end: int) -> filebuf.Window:
        """A walk's moving view of [start, end) (see filebuf.Window)."""
        if self._file is None:
            self._read_after_close(start)
        return filebuf.Window(self._file, start, end)

    # -- lifecycle ---------------------------------------------------------
    def refresh(self, at_path: os.stat_result) -> bool:
        """Read the file as if opened again (a tail's next look) when ``at_path``
        (a ``stat`` of the path) is still this file, not shrunk; else False. The
        FDE's flags are read again (IN_USE clears at rotation); the whole
        preamble where open saw none of it past the FDE (a file cut inside it)."""
        if self._file is None or not hasattr(self._file, "grown") or not self._file.grown(at_path):
            return False
        self.size = self._file.size
        self._private = self._private.regrown(self.size)
        self._fill = self._private.fill
        if self.body_start > 4 + self.fde.length:
            f, flags = self.fde, EVENT_HEADER.unpack_from(self._file.read_exact(4, HEADER_LEN))[5]
            self.fde = FormatDescription(f.binlog_version, f.server_version, f.created, f.header_length,
                                         f.checksum, bool(flags & IN_USE_FLAG), f.length)
        else:
            self._read_preamble()
        return True

    def close(self) -> None:
        if self._private is not None:
            self._private.close()
            self._private = None
        self._fill = self._read_after_close
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "Binlog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def buffer(self):
        """The file's bytes, for slicing and indexing (read-only): a view that
        reads each slice from the file first (``filebuf.FillingView``)."""
        return self._private.view()

    def fill(self, lo: int, hi: int) -> None:
        """Make ``[lo, hi)`` of ``mapping`` hold the file's bytes."""
        self._fill(lo, hi)

    def release(self, lo: int, hi: int) -> None:
        """Give back the memory ``mapping`` holds for ``[lo, hi)`` (``PreadBuffer.release``)."""
        if self._private is not None:
            self._private.release(lo, hi)

    @property
    def _mm(self):
        return None if self._private is None else self._private.mem

    @property
    def mapping(self):
        """The file's bytes at their offsets, read-only, where ``fill`` put them
        (a compiled reader's input: ``fill`` first, ``release`` after)."""
        return memoryview(self._mm).toreadonly()

    @property
    def etag(self) -> str | None:
        """The object's ETag as the HEAD that opened it saw it (every read
        is pinned to it); None for a local file."""
        return getattr(self._file, "etag", None)

    @property
    def file_stat(self) -> os.stat_result | None:
        """The local file's ``fstat`` at open (None for an object)."""
        return getattr(self._file, "stat", None)

    @property
    def growing(self) -> bool:
        """True when the file may still be written (IN_USE flag on its FDE)."""
        return self.fde.in_use

    # -- preamble: magic, FDE, START_ENCRYPTION / MySQL detection, GTID_LIST
    flavor = "mariadb"      # the server family whose binlogs this class reads (binlog.mysql's: "mysql")

    def _read_fde(self) -> int:
        """The framing every v4 binlog shares: the magic and the
        FORMAT_DESCRIPTION (version, header length, checksum algorithm, its
        CRC32), into ``self.fde`` and ``self.checksum_len``, whoever wrote
        it. Returns the FDE's length."""
        mm, path, fill = self._mm, self.path, self._fill
        fill(0, 4 + HEADER_LEN)
        if self.size < 4 or mm[:4] != MAGIC:
            raise UnsupportedBinlogError(
                f"not a binlog file (starts with {bytes(mm[:4]).hex(' ')}, a binlog starts with fe 62 69 6e)",
                path=path, offset=0)
        if self.size < 4 + HEADER_LEN:
            raise CorruptBinlogError("truncated binlog: no complete FORMAT_DESCRIPTION event",
                                     path=path, offset=4)
        ts, etype, server_id, length, _, flags = EVENT_HEADER.unpack_from(mm, 4)
        if etype == START_EVENT_V3:
            raise UnsupportedBinlogError("binlog format v1/v3 (MySQL 3.23 - 4.x) is not supported",
                                         path=path, offset=4, hint="only binlog format v4 is")
        if etype != FORMAT_DESCRIPTION:
            raise UnsupportedBinlogError(
                f"not a binlog: first event has type {etype}, expected FORMAT_DESCRIPTION (15)",
                path=path, offset=4)
        if length < HEADER_LEN + FDE_FIXED.size or length > 4096:
            raise CorruptBinlogError(f"FORMAT_DESCRIPTION event has impossible length {length}",
                                     path=path, offset=4)
        if 4 + length > self.size:
            raise CorruptBinlogError(
                f"truncated FORMAT_DESCRIPTION event ({self.size - 4} of {length} bytes)",
                path=path, offset=4)
        fill(4, 4 + length)
        body = mm[4 + HEADER_LEN:4 + length]
        binlog_version, raw_version, created, header_len = FDE_FIXED.unpack_from(body, 0)
        server_version = raw_version.split(b"\0", 1)[0].decode("ascii", "replace")
        if binlog_version != 4:
            raise UnsupportedBinlogError(f"binlog format v{binlog_version} is not supported",
                                         path=path, offset=4, hint="only binlog format v4 is")
        if header_len != HEADER_LEN:
            raise CorruptBinlogError(f"FORMAT_DESCRIPTION says event headers are {header_len} bytes, "
                                     f"expected {HEADER_LEN}", path=path, offset=4)
        # The checksum-algorithm byte is the 5th from the end of the FDE
        # (MariaDB >= 5.3 always writes it, followed by the CRC or 4 zero bytes).
        alg = mm[4 + length - 5] if has_checksum_alg(server_version) else CHECKSUM_NONE
        if alg == CHECKSUM_UNDEF:
            alg = CHECKSUM_NONE
        if alg not in (CHECKSUM_NONE, CHECKSUM_CRC32):
            raise CorruptBinlogError(f"unknown checksum algorithm {alg} in FORMAT_DESCRIPTION",
                                     path=path, offset=4)
        if alg == CHECKSUM_CRC32:
            event = bytearray(mm[4:4 + length])
            event[17] &= ~IN_USE_FLAG & 0xFF      # the CRC is computed with IN_USE cleared
            stored = U32.unpack_from(event, length - CRC_LEN)[0]
            if zlib.crc32(memoryview(event)[:length - CRC_LEN]) != stored:
                raise CorruptBinlogError("FORMAT_DESCRIPTION event fails its CRC32", path=path, offset=4)
        self.fde = FormatDescription(binlog_version, server_version, created, header_len, alg,
                                     bool(flags & IN_USE_FLAG), length)
        self.checksum_len = CRC_LEN if alg == CHECKSUM_CRC32 else 0
        return length

    def _read_preamble(self) -> None:
        length = self._read_fde()
        mm, path, fill = self._mm, self.path, self._fill
        if not is_mariadb(self.fde.server_version):
            raise MySQLBinlogError(
                f"a MySQL binlog (written by server {self.fde.server_version!r}): "
                "MySQL binlogs are not supported yet", path=path, offset=4,
                hint="gtidx reads MariaDB binlogs; gtidx.binlog.mysql reads a MySQL binlog's transactions")

        # Header events before the first group: START_ENCRYPTION, GTID_LIST,
        # BINLOG_CHECKPOINT. Look at a bounded number of them.
        self.start_state = BinlogState()
        self.gtid_list_offset = None      # where the GTID_LIST event starts
        self.gtid_list_end = None         # and ends: the offset of index record 0
        off = 4 + length
        for _ in range(64):
            if off + HEADER_LEN > self.size:
                break
            fill(off, off + HEADER_LEN)
            _, etype, _, elen, _, _ = EVENT_HEADER.unpack_from(mm, off)
            if elen < HEADER_LEN or off + elen > self.size:
                break           # the walks report this properly
            fill(off, off + elen)
            if etype == START_ENCRYPTION:
                raise EncryptedBinlogError(
                    "encrypted binlog: its events cannot be read without the server's key",
                    path=path, offset=off, hint="encrypt_binlog=ON; gtidx reads unencrypted binlogs only")
            if etype in (MYSQL_PREVIOUS_GTIDS, MYSQL_GTID, MYSQL_ANONYMOUS_GTID):
                raise MySQLBinlogError("a MySQL binlog (MySQL GTID events): MySQL binlogs are not supported yet",
                                       path=path, offset=off)
            if etype == GTID_LIST:
                body = mm[off + HEADER_LEN:off + elen - self.checksum_len]
                self.start_state = BinlogState(decode_gtid_list(body, path=path, offset=off))
                self.gtid_list_offset = off
                self.gtid_list_end = off + elen
                break
            if etype == GTID:
                break
            off += elen
        # First offset after the preamble: where group walks start.
        self.body_start = self.gtid_list_end if self.gtid_list_end is not None else 4 + length

    # -- event walks ---------------------------------------------------------
    def corrupt(self, message: str, offset: int) -> CorruptBinlogError:
        """The error for damage at ``offset`` of this file (what a walk raises)."""
        return CorruptBinlogError(message, path=self.path, offset=offset)

    def complete_end(self, start: int = 4, *, closed_check: bool = True) -> int:
        """The end of the last complete event, walking from ``start`` (an event
        boundary). Raises for a length < 19 anywhere, for a partial last
        event in a closed file, and (``closed_check``) for a closed file whose
        last event is not ROTATE or STOP (``truncation``)."""
        return self._complete(start, closed_check)[0]

    def _complete(self, start: int, closed_check: bool, walked: tuple | None = None) -> tuple[int, int | None]:
        """``complete_end`` and the start of the last complete event (None: not
        one); ``walked``: ``walk.complete_ends`` from ``start``, done already."""
        off, last = walked or walk.complete_ends(self, start)
        if closed_check and last is not None:
            cut = self.truncation(last, None)
            if cut is not None:
                raise cut
        if off != self.size and not self.fde.in_use:
            raise self._partial_end(off, None if off + HEADER_LEN > self.size else
                                    TYPE_LENGTH.unpack_from(self._private.read(off, off + HEADER_LEN))[1])
        return off, last

    def _partial_end(self, off: int, ln: int | None) -> CorruptBinlogError:
        """What a closed binlog whose complete events end at ``off`` before
        its size is (``ln``: the length the partial event there states, None
        when not even its header is there): truncated."""
        if ln is None:
            return self.corrupt(f"{self.size - off} trailing bytes after the last event "
                                "of a closed binlog (truncated?)", off)
        return self.corrupt(f"event of length {ln} runs past the end of the closed binlog "
                            f"(file size {self.size})", off)

    def checked_headers(self, start: int) -> Iterator[tuple[int, int, int, int]]:
        """(offset, type, server_id, length) of every complete event from the
        boundary ``start``, checked as ``complete_end`` checks them (without
        its closed_check) but as the walk goes, not up front: a length below
        the header, or a closed binlog's partial last event, raises where it
        is, after the events before it were yielded. A walk that stops early
        (it found what it wanted) reads no further."""
        size = self.size
        w = self.window(start, size)
        mm, base = w.view, start
        unpack = TYPE_SERVER_LENGTH.unpack_from
        off = start
        while off + HEADER_LEN <= size:
            if off + HEADER_LEN > base + len(mm):
                mm, base = w.move(off), off
            etype, server_id, ln = unpack(mm, off - base)
            if ln < HEADER_LEN:
                raise self.corrupt(f"event length {ln} is below the {HEADER_LEN}-byte header", off)
            if off + ln > size:
                break
            yield off, etype, server_id, ln
            off += ln
        if off != size and not self.fde.in_use:
            raise self._partial_end(off, None if off + HEADER_LEN > size else unpack(mm, off - base)[2])

    def headers(self, start: int = 4) -> Iterator[tuple[int, int, int, int]]:
        """(offset, type, server_id, length) of every complete event from
        ``start``. The framing is checked up front (``complete_end``)."""
        return self._headers_between(start, self.complete_end(start))

    def event_header(self, offset: int) -> tuple[int, int, int, int] | None:
        """(timestamp, type, server_id, length) of the event header at
        ``offset``; None when the file has no whole header there. Not
        checked: the caller knows ``offset`` starts an event."""
        if offset < 0 or offset + HEADER_LEN > self.size:
            return None
        ts, etype, server_id, length, _, _ = EVENT_HEADER.unpack(self.buffer[offset:offset + HEADER_LEN])
        return ts, etype, server_id, length

    def events(self, start: int = 4) -> Iterator[Event]:
        """Every complete event with its body. The bodies point into the
        ``PreadBuffer``: each event is read there as it is reached (the
        memory grows with what was iterated)."""
        from .records import Event
        mm, crc, fill = self._mm, self.checksum_len, self._fill
        for off, etype, server_id, ln in self.headers(start):
            fill(off, off + ln)
            ts, _, _, _, _, flags = EVENT_HEADER.unpack_from(mm, off)
            body_end = off + ln - crc
            if body_end < off + HEADER_LEN:
                raise self.corrupt(f"event length {ln} leaves no room for its checksum", off)
            yield Event(off, etype, server_id, ln, ts, flags, memoryview(mm)[off + HEADER_LEN:body_end])

    def events_between(self, start: int, end: int) -> Iterator[Event]:
        """The events of [start, end), both event boundaries (a group's start
        and end), with their bodies; each one's CRC32 checked when the binlog
        has checksums."""
        from .records import Event
        mm, crc, fill = self._mm, self.checksum_len, self._fill
        for off, etype, server_id, ln in self._headers_between(start, end):
            if ln < HEADER_LEN + crc or off + ln > end:
                raise self.corrupt(f"event length {ln} does not fit in [{start}, {end})", off)
            fill(off, off + ln)
            if crc:
                self._verify_crc(off, ln, etype)
            ts, _, _, _, _, flags = EVENT_HEADER.unpack_from(mm, off)
            yield Event(off, etype, server_id, ln, ts, flags, memoryview(mm)[off + HEADER_LEN:off + ln - crc])

    def _verify_crc(self, off: int, ln: int, etype: int) -> None:
        mm = self._mm
        self._fill(off, off + ln)
        if ln < HEADER_LEN + CRC_LEN:
            raise self.corrupt(f"event length {ln} leaves no room for its checksum", off)
        stored, computed = event_crcs(memoryview(mm)[off:off + ln], etype)
        if computed != stored:
            raise self.corrupt(f"CRC32 mismatch in {EVENT_NAMES.get(etype, etype)} event "
                               f"(stored {stored:08x}, computed {computed:08x})", off)

    def event_ok(self, offset: int, walk_end: int | None = None) -> bool:
        """Is there a complete event at ``offset`` (and does its CRC32 check
        out, when the binlog has checksums)? A cheap test that an offset
        taken from elsewhere (an index record) really is an event boundary:
        a random offset passes with probability 2**-32. Read straight from
        the file: the event, or, of an object, the ``CHECK_AHEAD`` bytes from
        ``offset`` a walk from there reads first, or, given the ``walk_end``
        of that walk's window, what it reads first (``filebuf.first_read``):
        one GET serves both (the object keeps the range, ``storage.RemoteFile``)."""
        if offset < 4 or offset + HEADER_LEN > self.size:
            return False
        src = self._file
        if src is None:
            self._read_after_close(offset)
        ahead = src.CHECK_AHEAD if walk_end is None or not src.CHECK_AHEAD else \
            filebuf.first_read(src.CHECK_AHEAD, offset, walk_end)
        head = src.read_exact(offset, min(max(HEADER_LEN, ahead), self.size - offset))
        etype, ln = TYPE_LENGTH.unpack_from(head, 0)
        if ln < HEADER_LEN + self.checksum_len or offset + ln > self.size:
            return False
        if not self.checksum_len:
            return True
        stored, computed = event_crcs(memoryview(head if len(head) >= ln else src.read_exact(offset, ln))[:ln], etype)
        return stored == computed

    # -- groups ------------------------------------------------------------
    def groups(self, start: int | None = None) -> Iterator[Group]:
        """Every event group from ``start`` (an event boundary; default: after
        the GTID_LIST) to the end of the file, as ``Group`` objects.

        A group ends where the next GTID or boundary event (GTID_LIST,
        BINLOG_CHECKPOINT, ROTATE, STOP, ...) starts, or at the end of the
        file. In a file still being written, a last group is yielded only
        once its terminating event (XID, COMMIT, ...) is on disk.
        """
        from .records import Group
        new = tuple.__new__        # NamedTuple.__new__ is Python code: 2.5x slower
        for begin, end, (ts, server_id, seq, domain, flags2) in self.group_spans(start):
            yield new(Group, (new(Gtid, (domain, server_id, seq)), begin, end, ts, flags2))

    def group_spans(self, start: int | None = None) -> Iterator[tuple[int, int, tuple]]:
        """The raw group walk: ``(start, end, (timestamp, server_id, seq,
        domain, flags2))`` per group, no objects."""
        return walk.group_walk(self, self.body_start if start is None else start, None, 0)

    def group_batches(self, span: int, start: int | None = None, previous: int = 0, carry=None):
        """The walk an index build needs, without per-group yields: yields
        ``(end, gtids, True)`` at the end of the first group at least ``span``
        bytes past the previous such yield (the first counts from
        ``previous``), where ``gtids`` are the GTID_HEAD tuples (timestamp,
        server_id, seq, domain, flags2) of the groups since then, in file order.
        Last it yields ``(end, gtids, False)``: the groups that did not reach
        a span, and where the walk stopped (the end of the last complete group,
        or ``start``): where a later walk of a growing file resumes (``carry``:
        ``walk.OpenGroup``, inside the group open there)."""
        return walk.group_walk(self, self.body_start if start is None else start, span, previous, carry)

    def group_records(self, start: int | None = None) -> bytes:
        """``group_spans`` packed, for many groups at once: one GROUP_RECORD
        (start, end, seq_no, timestamp, server_id, domain_id, flags2) per
        group, in file order; the same groups, and the same error where that
        walk raises (then no records). Compiled where it can be
        (``walk.group_records``)."""
        return walk.group_records(self, start)

    def complete_at(self, off: int) -> bool:
        """Is there a whole event at ``off`` (header length and all)? Where
        ``walk.group_records`` may hand a walk back to C."""
        if off + HEADER_LEN > self.size:
            return False
        self._fill(off, off + HEADER_LEN)
        ln = TYPE_LENGTH.unpack_from(self._mm, off)[1]
        return ln >= HEADER_LEN and off + ln <= self.size

    def truncation(self, last: int, open_start: int | None) -> CorruptBinlogError | None:
        """The error for a closed binlog (IN_USE clear) that was cut short, or
        None. The server closes a binlog with ROTATE (rotation) or STOP
        (shutdown): a closed file whose last event (at ``last``) is anything
        else, or that ends inside an event group (one opened at
        ``open_start``), is a partial copy. A file still being written (or
        left by a crash: IN_USE set) may end anywhere."""
        if self.fde.in_use:
            return None
        etype = TYPE_LENGTH.unpack_from(self._private.read(last, last + HEADER_LEN))[0]
        if etype in (ROTATE, STOP) and open_start is None:
            return None
        where = "inside the event group at offset %d" % open_start if open_start is not None else \
            f"with a {EVENT_NAMES.get(etype, f'type {etype}')} event"
        return self.corrupt(
            f"truncated binlog: a closed binlog ends with ROTATE or STOP, this one ends {where} "
            f"(a partial copy?)", self.size)

    def tail_end(self, mark: int, open_start: int | None, flags2: int, last_before: int | None = None,
                 complete: tuple | None = None):
        """After a walk: check the framing from ``mark`` to the end. Returns
        (where the open group started at ``open_start`` ends, or None when there
        is none or it is not complete; the truncation error of a closed file
        cut short, or None; the end of the complete events; where the last of
        them starts, or None). The open group of a cut file counts only when
        its terminating event (XID, COMMIT, ...) is there. ``last_before``:
        a walk resumed inside the open group at ``mark`` knows its events
        before ``mark`` complete, the last of them there (not walked again);
        ``complete``: ``walk.complete_ends`` from ``mark``, where it was walked."""
        end, last = self._complete(mark, closed_check=False, walked=complete)   # the end and its last event
        if last is None:
            last = last_before
        cut = None
        if not self.fde.in_use and last is not None:
            cut = self.truncation(last, open_start)
        if open_start is None:
            return None, cut, end, last
        if not self.fde.in_use and cut is None:
            return end, cut, end, last
        if open_start != mark and last_before is None:   # (a walk's open group starts at its mark)
            last = None
            for last, _, _, _ in self._headers_between(open_start, end):
                pass
        return end if self._group_terminated(open_start, last, flags2) else None, cut, end, last

    def _group_terminated(self, start: int, last: int | None, flags2: int) -> bool:
        """Is the event at ``last``, the last complete one of the group that
        starts at ``start``, a terminator?"""
        if last is None or last <= start:
            return False         # only the GTID event so far
        read = self._private.read      # one-off reads: a tail's look touches no page of the buffer
        etype, ln = TYPE_LENGTH.unpack_from(read(last, last + HEADER_LEN))
        body = memoryview(read(last + HEADER_LEN, last + ln - self.checksum_len))
        return is_group_terminator(etype, body, bool(flags2 & FL_STANDALONE))

    def _headers_between(self, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
        """Headers from ``start`` to ``end``, both boundaries of a checked walk."""
        w = self.window(start, end)
        mm, base = w.view, start
        unpack = TYPE_SERVER_LENGTH.unpack_from
        off = start
        while off < end:
            if off + HEADER_LEN > base + len(mm):
                mm, base = w.move(off), off
            etype, server_id, ln = unpack(mm, off - base)
            yield off, etype, server_id, ln
            off += ln

    # -- state at an offset ---------------------------------------------------
    def apply_until(self, state: BinlogState, start: int, target: int) -> bool:
        """Apply to ``state`` every GTID whose event lies in [start, target),
        walking from the event boundary ``start``. True when ``target`` is an
        event boundary (then ``state`` is the state there), else False
        (``walk.apply_until``)."""
        return walk.apply_until(self, state, start, target)

    def state_at(self, offset: int) -> BinlogState | None:
        """The binlog state at ``offset``, as ``BINLOG_GTID_POS(file, offset)``:
        the GTID_LIST state plus every GTID whose event lies before ``offset``.
        None when ``offset`` is not the start of an event (or the end of the
        file), like the server's NULL. Offsets 0-3 (inside the file magic)
        answer as offset 4 does: both MariaDB 10.11 and 11.8 do that."""
        if offset < 0 or offset > self.size:
            return None
        state = self.start_state.copy()
        if offset <= 4:
            return state
        if offset < self.body_start:
            # Inside the preamble: the answer is the GTID_LIST state if the
            # offset is an event boundary there.
            return state if self.apply_until(BinlogState(), 4, offset) else None
        return state if self.apply_until(state, self.body_start, offset) else None


def file_flavor(path: str, store=None, opened=None) -> str | None:
    """"mysql" or "mariadb": the server version in a binlog's
    FORMAT_DESCRIPTION (``binlog.is_mariadb``), read alone (its first
    75 bytes: a lookup that a catalog answers opens no ``Binlog`` for this);
    None when the file is not that (the lookup that needs it says why).
    ``opened``: the file already open (read from, left open)."""
    if store is None:
        store = storage.LOCAL
    want = len(MAGIC) + EVENT_HEADER.size + FDE_FIXED.size - 5      # up to the server version's end
    try:
        f = store.open_file(path) if opened is None else opened
    except (GtidxError, OSError):
        return None
    try:
        if f.size < want:
            return None
        head = f.read_exact(0, want)
    except (GtidxError, OSError):
        return None
    finally:
        if opened is None:
            f.close()
    etype = EVENT_HEADER.unpack_from(head, len(MAGIC))[1]
    if head[:len(MAGIC)] != MAGIC or etype != FORMAT_DESCRIPTION:
        return None
    version = FDE_FIXED.unpack_from(head + bytes(5), len(MAGIC) + EVENT_HEADER.size)[1]
    return "mariadb" if is_mariadb(version.split(b"\0", 1)[0].decode("ascii", "replace")) else "mysql"
