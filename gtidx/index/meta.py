"""What gtidx stores with the indexes it writes, and the states of an index.

``IndexMeta`` is the one owner of the fingerprint: the binlog prefix an
index was made for (its size and the CRC32 and Adler-32 of its first and last 64 KiB,
the FDE's IN_USE flag masked) and, for ``gtidx tail``, its progress. Of
a binlog in an object store it also records the object's ETag
(``binlog_etag``): while the object has that ETag and size it holds the
bytes fingerprinted (an ETag names one object's content), so ``matches``
trusts it without reading the first and last 64 KiB; another ETag (the same
bytes uploaded again, in other parts) or none falls back to the CRCs:
content decides. It is
kept in the index's ``user.gtidx`` xattr, set through the open file
descriptor (so it lands on the inode that was written, whatever has been
renamed over the name since). On a filesystem without user xattrs (ramfs,
some network filesystems), or when it outgrows the filesystem's xattr
limit (the seq_no ranges of many domains), it goes to a hidden sidecar file beside the index,
``.<name>.idx.gtidx``, written like every gtidx file (exclusive temporary
file, rename); the sidecar names the index's inode, so a sidecar left from
another file at that name is never believed. Read and written only here.

It is stored as bytes laid out like the index's own (``META_HEAD`` and the
structs below it: fixed widths, checked on reading like every number read
from disk). gtidx before this layout stored JSON (version 1): that is still
read, and rewritten in the new layout when the index is written again.
"""
from __future__ import annotations

import errno
import os
import struct
import time
import zlib
from enum import StrEnum

from ..binlog.events import IN_USE_FLAG
from ..binlog.mariadb import Binlog
from ..errors import GtidxError
from ..filebuf import ReadFile

XATTR = "user.gtidx"
FINGERPRINT_SPAN = 65536
_NO_XATTRS = (errno.ENOTSUP, errno.EOPNOTSUPP)
_TOO_BIG = (errno.ENOSPC, errno.E2BIG, errno.ERANGE)    # what filesystems say to a value over their limit
_MAX_META = 65536

# The stored fingerprint, version 2 (little-endian): META_HEAD, then each
# optional field whose bit is set in ``present`` (OPTIONAL's order, each its
# own width), then with ``HAS_ETAG`` the ETag (ETAG_LEN bytes of UTF-8), then
# with ``HAS_SEEN`` SEEN_COUNTS and that many RANGE and REPEAT entries.
# Nothing may follow. A local sidecar is SIDECAR_LOCAL + the fingerprint; an
# object's sidecar SIDECAR_OBJECT + ETAG_LEN + its index object's ETag + the fingerprint.
META_MAGIC, META_VERSION = b"GTXM", 2
META_HEAD = struct.Struct("<4sBBHQII")      # magic, version, state (0 complete, 1 partial), present,
#                                             size, head_crc32, tail_crc32
OPTIONAL = (("page_size", struct.Struct("<I")), ("span_min", struct.Struct("<Q")),
            ("processed", struct.Struct("<Q")), ("records", struct.Struct("<Q")),
            ("updated", struct.Struct("<d")), ("head_adler32", struct.Struct("<I")),
            ("tail_adler32", struct.Struct("<I")))
HAS_ETAG, HAS_SEEN = 1 << len(OPTIONAL), 1 << (len(OPTIONAL) + 1)
ETAG_LEN = struct.Struct("<H")
SEEN_COUNTS = struct.Struct("<II")          # ranges, repeats
RANGE = struct.Struct("<IIQQ")              # domain_id, server_id, lowest seq_no, highest seq_no
REPEAT = struct.Struct("<II")               # domain_id, server_id
SIDECAR_LOCAL = struct.Struct("<4sQQ")      # b"GTXS", the index's st_dev, st_ino
SIDECAR_OBJECT = struct.Struct("<4sQ")      # b"GTXO", the index object's size; then its ETag


class IndexState(StrEnum):
    """Whether an index can serve its binlog (``open_index``'s verdict)."""
    OK = "ok"
    MISSING = "missing"
    INCOMPLETE = "incomplete"
    CORRUPT = "corrupt"
    STALE = "stale"


class Progress(StrEnum):
    """How far gtidx got writing an index: ``tail`` leaves PARTIAL ones
    (complete leaves, no root yet) while a binlog grows."""
    PARTIAL = "partial"
    COMPLETE = "complete"


STATES = (Progress.COMPLETE, Progress.PARTIAL)     # META_HEAD's state byte: the index in this tuple


# The server clears the FDE's IN_USE flag (byte 21) when it closes a binlog:
# the same binlog before and after its rotation must fingerprint the same.
_IN_USE_BYTE = 4 + 17


def masked(mm, lo: int, hi: int) -> bytes:
    """``mm[lo:hi]`` of a binlog (clipped to its end) as bytes, its FDE's
    IN_USE flag cleared: a binlog before and after its rotation reads the
    same. What a tail keeps of what it read, to compare (``IncrementalIndex``'s
    guard, ``walk.OpenGroup``'s seal), and what ``digest_masked`` sums."""
    part = bytes(mm[lo:hi])
    if lo <= _IN_USE_BYTE < lo + len(part):
        part = bytearray(part)
        part[_IN_USE_BYTE - lo] &= ~IN_USE_FLAG & 0xFF
        return bytes(part)
    return part


def digest_masked(mm, lo: int, hi: int) -> tuple[int, int]:
    """(CRC32, Adler-32) of ``masked(mm, lo, hi)``. Both, because a CRC32
    alone is blind here: in a binlog with checksums every event ends with
    the CRC32 of its own bytes, and CRC32(M + CRC32(M)) is a constant, so a
    CRC32 over whole events depends on their lengths only (a GTID's seq_no
    changed, its event's CRC fixed, and the CRC32 of the span is the same).
    Adler-32 sums the bytes themselves."""
    part = masked(mm, lo, hi)
    return zlib.crc32(part), zlib.adler32(part)


def sidecar_path(index: str) -> str:
    d, name = os.path.split(os.fspath(index))       # an object's URL splits at its last "/" too
    return os.path.join(d, f".{name}.gtidx")


def object_etag(b: Binlog) -> str | None:
    """The ETag of the object ``b`` was opened from when it may stand for
    its content (``strong_etag``); None for a local file."""
    return strong_etag(b.etag)


# A local binlog's identity stands for its content like an object's ETag
# (``binlog_etag`` "stat:dev:ino:size:mtime_ns:ctime_ns"): a write changes
# its mtime and ctime, a replacement its inode (ctime cannot be set back).
# Recorded only for a file not written in the last QUIET_S seconds: a write
# within the clock tick of the one before may keep the timestamps.
QUIET_S = 2.0


def local_identity(b: Binlog, quiet: bool = False) -> str | None:
    """``b``'s identity as a local file (``quiet``: None when it was written
    in the last QUIET_S seconds); None for an object."""
    st = b.file_stat
    if st is None or (quiet and time.time() - st.st_mtime < QUIET_S):
        return None
    return stat_identity(st)


def stat_identity(st: os.stat_result) -> str:
    """The identity of the local file whose ``stat`` is ``st`` (see above)."""
    return f"stat:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def strong_etag(etag) -> str | None:
    """An ETag (as a HEAD or a LIST gives it) that names one content: a
    strong one (a weak ``W/...`` validator promises equivalent content, not
    the same bytes); else None."""
    return etag if isinstance(etag, str) and etag and not etag.startswith("W/") else None


class IndexMeta:
    """The fingerprint of the binlog prefix an index covers, and progress.

    Immutable, compared and hashed by its fields, ``replace(**changes)`` for a
    changed copy: a frozen dataclass written out, since every lookup reads
    one and a lookup does not import ``dataclasses``."""

    _FIELDS = ("size", "head_crc32", "tail_crc32", "state", "page_size", "span_min", "processed", "records",
               "updated", "ranges", "repeats", "head_adler32", "tail_adler32", "binlog_etag")

    def __init__(self, size: int, head_crc32: int, tail_crc32: int, state: Progress = Progress.COMPLETE,
                 page_size: int | None = None, span_min: int | None = None,
                 processed: int | None = None,      # tail: the binlog is read up to here
                 records: int | None = None,        # tail: records so far
                 updated: float | None = None,      # tail: when progress was saved (epoch seconds)
                 # what the walk saw of the binlog up to ``covers`` (a SeqRanges): per
                 # (domain, server) its lowest and highest seq_no, and the pairs whose
                 # seq_no does not grow; None: unknown
                 ranges: tuple[tuple[int, int, int, int], ...] | None = None,
                 repeats: tuple[tuple[int, int], ...] | None = None,
                 # the Adler-32s of the same spans (see ``digest_masked``): without them
                 # (a fingerprint from a gtidx before they were kept) the content cannot
                 # be told, only the event lengths: ``legacy``
                 head_adler32: int | None = None, tail_adler32: int | None = None,
                 # the binlog object's ETag when the fingerprint was taken of all of an
                 # object (``object_etag``); None: a local file, or not recorded
                 binlog_etag: str | None = None):
        values = self.__dict__
        values["size"], values["head_crc32"], values["tail_crc32"], values["state"] = \
            size, head_crc32, tail_crc32, state
        values["page_size"], values["span_min"], values["processed"], values["records"] = \
            page_size, span_min, processed, records
        values["updated"], values["ranges"], values["repeats"] = updated, ranges, repeats
        values["head_adler32"], values["tail_adler32"], values["binlog_etag"] = \
            head_adler32, tail_adler32, binlog_etag

    def _values(self) -> tuple:
        return tuple(getattr(self, k) for k in self._FIELDS)

    def replace(self, **changes) -> "IndexMeta":
        """A copy with these fields changed."""
        return IndexMeta(**{**dict(zip(self._FIELDS, self._values())), **changes})

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r}")

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"IndexMeta({', '.join(f'{k}={getattr(self, k)!r}' for k in self._FIELDS)})"

    @classmethod
    def of(cls, b: Binlog, size: int | None = None, **progress) -> "IndexMeta":
        """Fingerprint ``b`` up to ``size`` (default: all of it; then an
        object's ETag is recorded with it)."""
        size = b.size if size is None else size
        mm = b.buffer
        head, head_adler = digest_masked(mm, 0, min(size, FINGERPRINT_SPAN))
        tail, tail_adler = digest_masked(mm, max(0, size - FINGERPRINT_SPAN), size)
        if size == b.size and "binlog_etag" not in progress:
            progress["binlog_etag"] = object_etag(b) or local_identity(b, quiet=True)
        return cls(size, head, tail, head_adler32=head_adler, tail_adler32=tail_adler, **progress)

    def matches(self, b: Binlog) -> bool:
        """Is ``b``, up to this fingerprint's size, the binlog it was taken
        of? An object of the recorded size and ETag is, unread; else the
        CRC32s and Adler-32s decide. (Progress fields are not compared.)"""
        if self.size > b.size:
            return False
        if self.same_object(b):
            return True
        if self.legacy:
            return False            # its CRC32s alone cannot tell the content
        other = IndexMeta.of(b, self.size, binlog_etag=None)
        return (other.head_crc32, other.tail_crc32, other.head_adler32, other.tail_adler32) == \
            (self.head_crc32, self.tail_crc32, self.head_adler32, self.tail_adler32)

    @property
    def legacy(self) -> bool:
        """A fingerprint from before gtidx kept Adler-32s: the CRC32s of a
        binlog with checksums depend on its event lengths only, so it cannot
        tell the content (an index with one is judged as a server's, and
        ``build`` makes it again)."""
        return self.head_adler32 is None or self.tail_adler32 is None

    def same_object(self, b: Binlog) -> bool:
        """Is ``b`` the very object fingerprinted (its size and ETag the
        recorded ones; a local file: its identity, ``local_identity``)?
        False says nothing: compare the content."""
        if b.etag is not None:
            return self.is_object(b.size, b.etag)
        return self.binlog_etag is not None and self.size == b.size and local_identity(b) == self.binlog_etag

    def is_object(self, size: int, etag) -> bool:
        """Is an object of this ``size`` and ``etag`` (from a HEAD or a
        LIST) the very object fingerprinted? False says nothing."""
        return self.binlog_etag is not None and self.size == size and strong_etag(etag) == self.binlog_etag

    @property
    def partial(self) -> bool:
        return self.state is Progress.PARTIAL

    # -- encoding ------------------------------------------------------------------
    @property
    def covers(self) -> int:
        """How far into the binlog ``ranges`` and ``repeats`` were seen."""
        return self.processed if self.partial and self.processed is not None else self.size

    def seen(self) -> "tuple[dict, frozenset] | None":
        """({(domain, server): (lowest, highest)}, repeats) up to ``covers``, or None."""
        if self.ranges is None or self.repeats is None:
            return None
        return {(d, s): (lo, hi) for d, s, lo, hi in self.ranges}, frozenset(self.repeats)

    def encode(self) -> bytes:
        """This fingerprint in the stored layout (version 2, ``META_HEAD``)."""
        present, parts = 0, []
        for bit, (name, width) in enumerate(OPTIONAL):
            value = getattr(self, name)
            if value is not None:
                present |= 1 << bit
                parts.append(width.pack(value))
        if self.binlog_etag is not None:
            etag = self.binlog_etag.encode()
            present |= HAS_ETAG
            parts += [ETAG_LEN.pack(len(etag)), etag]
        if self.ranges is not None and self.repeats is not None:
            present |= HAS_SEEN
            parts.append(SEEN_COUNTS.pack(len(self.ranges), len(self.repeats)))
            parts += [RANGE.pack(*r) for r in self.ranges]
            parts += [REPEAT.pack(*r) for r in self.repeats]
        head = META_HEAD.pack(META_MAGIC, META_VERSION, STATES.index(self.state), present,
                              self.size, self.head_crc32, self.tail_crc32)
        return head + b"".join(parts)

    @classmethod
    def decode(cls, raw: bytes) -> "IndexMeta | None":
        """The fingerprint stored as ``raw`` (``encode``'s layout, or the
        JSON of gtidx before it: ``from_json``); None for anything else:
        another magic or version, a field cut short, bytes left over, a
        state or ETag that is not one."""
        raw = bytes(raw)
        if raw[:1] == b"{":
            return cls.from_json(raw)
        if len(raw) < META_HEAD.size:
            return None
        magic, version, state, present, size, head, tail = META_HEAD.unpack_from(raw)
        if magic != META_MAGIC or version != META_VERSION or state >= len(STATES) or \
                present >= HAS_SEEN << 1:
            return None
        at, extra = META_HEAD.size, {}
        try:
            for bit, (name, width) in enumerate(OPTIONAL):
                if present & 1 << bit:
                    extra[name], = width.unpack_from(raw, at)
                    at += width.size
            if present & HAS_ETAG:
                n, = ETAG_LEN.unpack_from(raw, at)
                at += ETAG_LEN.size
                if at + n > len(raw):
                    return None
                extra["binlog_etag"] = raw[at:at + n].decode()
                at += n
            if present & HAS_SEEN:
                n_ranges, n_repeats = SEEN_COUNTS.unpack_from(raw, at)
                at += SEEN_COUNTS.size
                if at + n_ranges * RANGE.size + n_repeats * REPEAT.size != len(raw):
                    return None
                extra["ranges"] = tuple(sorted(set(RANGE.iter_unpack(raw[at:at + n_ranges * RANGE.size]))))
                at += n_ranges * RANGE.size
                extra["repeats"] = tuple(sorted(set(REPEAT.iter_unpack(raw[at:]))))
                at = len(raw)
        except (struct.error, UnicodeDecodeError):
            return None
        if at != len(raw):
            return None
        return cls(size, head, tail, STATES[state], **extra)

    @classmethod
    def from_json(cls, raw: bytes) -> "IndexMeta | None":
        """A fingerprint as gtidx stored it before ``encode``'s layout (JSON,
        version 1); None for anything that is not one."""
        import json         # only for indexes written before the layout: a lookup does not load it
        try:
            return cls.from_fields(json.loads(raw))
        except ValueError:
            return None

    @classmethod
    def from_fields(cls, d) -> "IndexMeta | None":
        """The fingerprint whose version-1 JSON fields are ``d`` (parsed);
        None for anything that is not one."""
        try:
            if not isinstance(d, dict) or d.get("v") != 1:
                return None
            ints = [d[k] for k in ("size", "head_crc32", "tail_crc32")]
            if not all(type(i) is int and i >= 0 for i in ints):
                return None
            extra = {}
            for k in ("page_size", "span_min", "processed", "records", "head_adler32", "tail_adler32"):
                if d.get(k) is not None:
                    if type(d[k]) is not int:
                        return None
                    extra[k] = d[k]
            if d.get("updated") is not None:
                extra["updated"] = float(d["updated"])
            if d.get("binlog_etag") is not None:
                if not isinstance(d["binlog_etag"], str):
                    return None
                extra["binlog_etag"] = d["binlog_etag"]
            if d.get("ranges") is not None and d.get("repeats") is not None:
                extra["ranges"] = _ints(d["ranges"], 4)
                extra["repeats"] = _ints(d["repeats"], 2)
            return cls(*ints, state=Progress(d.get("state", "complete")), **extra)
        except (ValueError, TypeError, KeyError):
            return None

    # -- on disk -------------------------------------------------------------------
    @classmethod
    def read(cls, index: str, store=None) -> "IndexMeta | None":
        """The fingerprint gtidx stored with the index at ``index`` (not
        followed if a link; in ``store`` when given, a ``storage`` store);
        None when there is none (a server's index, or no index)."""
        if store is not None and store.remote:
            try:
                f = store.open(index)
            except (OSError, GtidxError):
                return None
            return cls.read_object(f)
        try:
            f = ReadFile(index, nofollow=True)
        except (OSError, GtidxError):       # none, a link, a FIFO...: no fingerprint
            return None
        with f:
            return cls.read_fd(f.fd, index)

    @classmethod
    def read_fd(cls, fd: int, index: str) -> "IndexMeta | None":
        """The fingerprint of the index open as ``fd`` (found at ``index``; a
        regular file, as ``filebuf.ReadFile`` opens them)."""
        try:
            st = os.fstat(fd)
        except OSError:
            return None
        try:
            return cls.decode(os.getxattr(fd, XATTR))
        except OSError as e:
            if e.errno not in _NO_XATTRS + (errno.ENODATA,):
                return None
        return cls._read_sidecar(index, st)

    @classmethod
    def _read_sidecar(cls, index: str, st: os.stat_result) -> "IndexMeta | None":
        try:
            with ReadFile(sidecar_path(index), nofollow=True) as f:
                raw = f.pread(_MAX_META, 0)
        except (OSError, GtidxError):
            return None
        if raw[:1] == b"{":
            return _legacy_sidecar(raw, {"dev": st.st_dev, "ino": st.st_ino})
        if len(raw) < SIDECAR_LOCAL.size or \
                SIDECAR_LOCAL.unpack_from(raw) != (b"GTXS", st.st_dev, st.st_ino):
            return None               # made for another file at this name
        return cls.decode(raw[SIDECAR_LOCAL.size:])

    def write(self, fd: int, index: str) -> None:
        """Store this with the index open as ``fd`` (to be found at
        ``index``): its xattr, or the sidecar where the filesystem has no
        user xattrs. Raises OSError (disk full, read-only, ...)."""
        raw = self.encode()
        try:
            os.setxattr(fd, XATTR, raw)
            return
        except OSError as e:
            if e.errno not in _NO_XATTRS + _TOO_BIG:
                raise
            if e.errno in _TOO_BIG:          # ranges of many domains: beyond the xattr's block
                try:
                    os.removexattr(fd, XATTR)
                except OSError as gone:
                    if gone.errno not in _NO_XATTRS + (errno.ENODATA,):
                        raise
        from .. import safefile     # the writers' module: a lookup does not load it
        st = os.fstat(fd)
        safefile.write_file(sidecar_path(index), [SIDECAR_LOCAL.pack(b"GTXS", st.st_dev, st.st_ino), raw])

    # -- in an object store --------------------------------------------------------
    # No xattrs there: the sidecar object ``.<name>.idx.gtidx`` beside the
    # index, bound to the index object by its ETag and size (as the local
    # sidecar is by dev/ino): a sidecar left from another index object at
    # that name is never believed.
    @classmethod
    def read_object(cls, f) -> "IndexMeta | None":
        """The fingerprint stored with the index object open as ``f`` (a
        ``storage.RemoteFile``); None when there is none or it is not this
        object's."""
        if not f.etag:
            return None
        try:
            raw = f.store.read_bytes(sidecar_path(f.path), _MAX_META)
        except GtidxError:
            return None
        if raw[:1] == b"{":
            return _legacy_sidecar(raw, {"etag": f.etag, "index_size": f.size})
        at = SIDECAR_OBJECT.size + ETAG_LEN.size
        if len(raw) < at:
            return None
        magic, size = SIDECAR_OBJECT.unpack_from(raw)
        n, = ETAG_LEN.unpack_from(raw, SIDECAR_OBJECT.size)
        if magic != b"GTXO" or size != f.size or raw[at:at + n] != f.etag.encode():
            return None
        return cls.decode(raw[at + n:])

    def write_object(self, store, index: str, index_etag: str | None = None) -> bool:
        """Store this beside the index object just written at ``index``
        (with ``index_etag``: only while it is still that object; False if not)."""
        info = store.info(index)
        etag = info.get("ETag") or info.get("etag")
        if index_etag is not None and etag != index_etag:
            return False
        tag = (etag or "").encode()
        store.put(sidecar_path(index),
                  SIDECAR_OBJECT.pack(b"GTXO", int(info["size"])) + ETAG_LEN.pack(len(tag)) + tag + self.encode())
        return True

    @classmethod
    def read_of(cls, f) -> "IndexMeta | None":
        """The fingerprint stored with the open index ``f``: a local file's
        xattr or sidecar, an object's sidecar object."""
        if f.fd is not None:
            return cls.read_fd(f.fd, f.path)
        return cls.read_object(f)

    @staticmethod
    def remove(index: str) -> None:
        """Remove the sidecar of ``index`` (the xattr goes with its file)."""
        from .. import safefile
        safefile.discard(sidecar_path(index))

    @staticmethod
    def remove_orphans(index: str) -> None:
        """Temporary files of ``index`` and of its sidecar left by writers
        that were killed."""
        from .. import safefile
        safefile.remove_orphans(index, sidecar_path(index))


def _legacy_sidecar(raw: bytes, bound: dict) -> "IndexMeta | None":
    """A sidecar as gtidx wrote it before the layout (JSON with the fingerprint's
    fields and what binds it to its index, ``bound``); None when it is not
    one or was made for another index."""
    import json         # only for sidecars written before the layout
    try:
        d = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(d, dict) or tuple(d.pop(k, None) for k in bound) != tuple(bound.values()):
        return None
    return IndexMeta.from_fields(d)


def _ints(raw, width: int) -> tuple:
    """[[int, ...], ...] as stored, each ``width`` long: a sorted tuple of tuples, or TypeError."""
    if not isinstance(raw, list) or not all(
            isinstance(p, list) and len(p) == width and all(type(i) is int and i >= 0 for i in p) for p in raw):
        raise TypeError("not a list of int lists")
    return tuple(sorted({tuple(p) for p in raw}))


MAX_SEEN_PAIRS = 1500     # more (domain, server) pairs than this: not stored (the xattr stays small)


def seen_fields(seen) -> dict:
    """A walk's ``SeqRanges`` (or None) as IndexMeta fields."""
    if seen is None:
        return {}
    ranges = seen.ranges
    if len(ranges) > MAX_SEEN_PAIRS:
        return {}
    return {"ranges": tuple(sorted((d, s, lo, hi) for (d, s), (lo, hi) in ranges.items())),
            "repeats": tuple(sorted(seen.repeats))}


def now() -> float:
    return round(time.time(), 3)
