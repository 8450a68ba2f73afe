"""Where binlogs and indexes are: a local file system or an object store.

A ``Store`` is the one place that knows the medium. Everything that reads
or writes a file by name asks the store it came with (a ``Binlog`` keeps
the store it was opened from in ``.store``; its index is opened, written and
listed through that store):

* ``LOCAL`` (``LocalStore``): plain paths, ``file://`` URLs. Files are opened
  as ``filebuf.ReadFile`` (a descriptor and ``pread``: today's code path,
  unchanged) and written with ``safefile`` (exclusive temporary file, rename).
* ``FsspecStore``: any other fsspec URL (``s3://bucket/prefix/...``), through
  fsspec and s3fs, imported only when such a URL is given. An object is
  opened as a ``RemoteFile``: its size from one HEAD, then only the ranges
  asked for, each one ranged GET (``fs.cat_file(path, start, end)``: no
  readahead, no cache); a walk reads windows of up to 8 MiB per GET. A whole
  file is written with one PUT (``fs.pipe_file``): atomic for a reader.

``resolve(path, storage_options)`` gives ``(store, path)`` for what a user
typed. Credentials and endpoint: fsspec's ``storage_options`` (``key``,
``secret``, ``endpoint_url``, ``client_kwargs``, ...) or, without them, what
botocore reads itself: the ``AWS_*`` environment variables (``AWS_ENDPOINT_URL``
included) and profiles. Every failure of the object store is a
``GtidxIOError`` (exit 3, as a missing or unreadable local file is) naming
the URL: a missing bucket, key or prefix, access denied, an endpoint that
does not answer.
"""
from __future__ import annotations

import os
import posixpath
import stat
import sys

from . import filebuf
from .errors import BadInputError, GtidxError, GtidxIOError
from .storefail import CUT, failure, reason

# a PreadBuffer over an object fills 4 KiB chunks, one GET per run of them:
# the preamble is one GET (two when a GTID_LIST of hundreds of domains
# crosses a chunk), an event header at an index record (--time) one; at
# 64 KiB chunks a lookup read 64 KiB for the preamble alone
REMOTE_CHUNK_SHIFT = 12
REMOTE_WINDOW_FIRST = 64 << 10   # a walk over an object: first GET of 64 KiB (a lookup's walk: one GET)
REMOTE_WINDOW = 8 << 20          # then 8 MiB per GET
REMOTE_GROWTH = 4                # 64 KiB, 256 KiB, 1 MiB, 4 MiB, 8 MiB: a walk stopped early reads little
# the check of the event at an index record reads what the walk from there
# reads first (REMOTE_WINDOW_FIRST): a lookup's check and walk are one GET
REMOTE_CHECK_AHEAD = REMOTE_WINDOW_FIRST
# an upload's part (``FsspecStore.upload``): a file of at most one part is one PUT; its ETag (``s3_etag``)
# depends on it. 16 MiB: a 1 GiB binlog is 64 parts, well under S3's 10,000
UPLOAD_PART = 16 << 20


def is_url(path) -> bool:
    return isinstance(path, str) and "://" in path


class LocalStore:
    """The local file system: paths as the OS takes them."""

    remote = False

    def open(self, path: str) -> filebuf.ReadFile:
        """Raises OSError as the OS does (the caller decides what a missing file means)."""
        return filebuf.ReadFile(path)

    def open_file(self, path: str) -> filebuf.ReadFile:
        return filebuf.open_file(path)

    def join(self, directory: str, name: str) -> str:
        return os.path.join(directory, name)

    def split(self, path: str) -> tuple[str, str]:
        return os.path.split(path)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path or ".")

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def kind(self, path: str) -> str | None:
        """"directory", "file", "other" (a FIFO...) or None (nothing there)."""
        try:
            mode = os.stat(path).st_mode
        except (OSError, ValueError):
            return None
        return "directory" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"

    def is_regular(self, path: str) -> bool:
        from . import safefile      # the writers' module: a lookup does not load it
        return safefile.is_regular(path)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """The file's bytes (at most ``limit``): a regular file only
        (``filebuf.ReadFile``: a FIFO at the name is refused, not waited on);
        OSError as the OS says."""
        with filebuf.ReadFile(path) as f, open(f.fd, "rb", closefd=False) as stream:
            return stream.read(-1 if limit is None else limit)

    def read_object(self, path: str) -> bytes | None:
        """The whole file, or None when there is none (a catalog not made yet)."""
        try:
            return self.read_bytes(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise GtidxIOError.from_os(e, path) from None

    def write_index(self, target: str, data: bytes, meta, *, make_dirs: bool = False) -> None:
        """``data`` as ``target`` (exclusive temporary file, rename), ``meta``
        (an IndexMeta) stamped on the new file before it is renamed.
        ``make_dirs``: create its directory (under an --index-dir; beside a
        binlog never: a binlog directory that vanished is not made again)."""
        from . import safefile      # the writers' module: a lookup does not load it
        meta.remove_orphans(target)
        try:
            if make_dirs:
                os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            safefile.write_file(target, [data], before_publish=lambda fd: meta.write(fd, target))
        except OSError as e:
            raise GtidxIOError.from_os(e, target) from None


LOCAL = LocalStore()


class FsspecStore:
    """An fsspec file system (an object store): paths are URLs, ``s3://bucket/key``."""

    remote = True

    def __init__(self, fs, protocol: str):
        self.fs = fs
        self.protocol = protocol

    def _url(self, stripped: str) -> str:
        return f"{self.protocol}://{stripped}"

    def fail(self, e: BaseException, path: str) -> GtidxError:
        """An fsspec/botocore failure as one line (``storefail.failure``)."""
        return failure(e, path)

    def _call(self, path: str, fn, *args, none_if_missing: bool = False, **kw):
        """``fn(*args, **kw)``, any failure its GtidxError (``fail``); with
        ``none_if_missing`` a missing object is None."""
        try:
            return fn(*args, **kw)
        except FileNotFoundError as e:
            if none_if_missing:
                return None
            raise self.fail(e, path) from None
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except Exception as e:          # botocore, aiohttp, OSError: all of them mean "cannot read it"
            raise self.fail(e, path) from None

    def info(self, path: str) -> dict:
        return self._call(path, self.fs.info, path)

    def open(self, path: str) -> "RemoteFile":
        """Raises FileNotFoundError for a missing object (as LocalStore.open does)."""
        try:
            info = self.fs.info(path)
        except FileNotFoundError:
            raise
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except Exception as e:
            raise self.fail(e, path) from None
        if info.get("type") != "file":
            raise BadInputError("not an object (a prefix)", path=path,
                                hint="gtidx reads binlogs and .idx files from objects only")
        return RemoteFile(self, path, info)

    def open_file(self, path: str) -> "RemoteFile":
        try:
            return self.open(path)
        except FileNotFoundError:
            raise self.fail(FileNotFoundError(path), path) from None

    def cat(self, path: str, start: int, end: int, etag: str | None = None) -> bytes:
        """Bytes ``[start, end)`` of the object: one ranged GET. With
        ``etag`` (what the HEAD that opened it saw) an S3 read is pinned to
        that object: ``If-Match``, so a replaced object fails the read (412)
        instead of lending its bytes to a walk that began on the old one.
        Other file systems cannot pin a read: their objects are read as
        they are at each GET."""
        if etag and self.protocol in ("s3", "s3a"):
            return self._call(path, self._s3_range, path, start, end, etag)
        return self._call(path, self.fs.cat_file, path, start=start, end=end)

    def _s3_range(self, path: str, start: int, end: int, etag: str) -> bytes:
        from fsspec.asyn import sync
        fs = self.fs
        bucket, key, version = fs.split_path(path)

        async def get():
            resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}",
                                     IfMatch=etag, **({"VersionId": version} if version else {}))
            try:
                return await resp["Body"].read()
            finally:
                resp["Body"].close()
        return sync(fs.loop, get)

    def join(self, directory: str, name: str) -> str:
        return directory.rstrip("/") + "/" + name

    def split(self, path: str) -> tuple[str, str]:
        return posixpath.split(path)

    def listdir(self, path: str) -> list[str]:
        """Names of the objects directly under the prefix ``path``: one LIST."""
        return list(self.listing(path))

    def listing(self, path: str, empty_if_missing: bool = False) -> dict[str, tuple[int, str | None]]:
        """{name: (size, ETag)} of the objects directly under the prefix
        ``path``: one LIST request per 1,000 keys (S3's page). A prefix with
        no object is missing (FileNotFoundError), or with ``empty_if_missing`` empty."""
        entries = self._call(path, self.fs.ls, path.rstrip("/") + "/", detail=True,
                             none_if_missing=empty_if_missing) or []
        return {posixpath.basename(e["name"].rstrip("/")): (int(e.get("size") or 0), e.get("ETag") or e.get("etag"))
                for e in entries if e.get("type") == "file"}

    def kind(self, path: str) -> str | None:
        """"directory" (a URL ending in "/": a prefix, listed to see), "file" or None: one HEAD."""
        if path.endswith("/"):
            return "directory"
        return self._kind(path)

    def look(self, path: str) -> tuple[str | None, "RemoteFile | None"]:
        """``kind(path)`` and, for an object, the object open (``RemoteFile``:
        its size and ETag from that same HEAD), with one HEAD at most: the
        listing that asks what a URL names opens the object it names once."""
        if path.endswith("/"):
            return "directory", None
        info = self._call(path, self.fs.info, path, none_if_missing=True)
        kind = None if info is None else info.get("type")
        return kind, RemoteFile(self, path, info) if kind == "file" else None

    def _kind(self, path: str) -> str | None:
        info = self._call(path, self.fs.info, path, none_if_missing=True)
        return None if info is None else info.get("type")

    def exists(self, path: str) -> bool:
        return self._kind(path) is not None

    def is_regular(self, path: str) -> bool:
        return self.kind(path) == "file"

    def size(self, path: str) -> int:
        return int(self.info(path)["size"])

    def read_bytes(self, path: str, limit: int | None = None) -> bytes:
        """The object (its first ``limit`` bytes: one ranged GET, no HEAD)."""
        if limit is not None:
            return self._call(path, self.fs.cat_file, path, start=0, end=limit)
        return self._call(path, self.fs.cat_file, path)

    def read_object(self, path: str) -> bytes | None:
        """The whole object (one GET: a range past any end, so that s3fs
        asks no HEAD first), or None when there is none."""
        return self._call(path, self.fs.cat_file, path, start=0, end=1 << 40, none_if_missing=True)

    def put(self, path: str, data: bytes) -> None:
        """``data`` as the object ``path``: one PUT (readers see the old
        object or the new one, never a part)."""
        self._call(path, self.fs.pipe_file, path, data)

    def upload(self, path: str, local: str, part_size: int = UPLOAD_PART, stopping=lambda: False) -> str:
        """The local file ``local`` as the object ``path`` (S3 only), read
        ``part_size`` bytes at a time: one PUT when it is one part, else a
        multipart upload. Either way the object appears whole or not at all
        (S3 makes it at the PUT's end or at the upload's completion; a
        multipart upload that fails, or is stopped by ``stopping()`` between
        two parts, is aborted). Returns the object's ETag as S3 answered it."""
        from fsspec.asyn import sync
        fs = self.fs
        bucket, key, _ = fs.split_path(path)

        async def put():
            with open(local, "rb") as f:
                first = f.read(part_size)
                rest = f.read(1) if len(first) == part_size else b""
                if not rest:
                    return (await fs._call_s3("put_object", Bucket=bucket, Key=key, Body=first))["ETag"]
                up = await fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key)
                parts, data = [], first
                try:
                    while data:
                        if stopping():
                            raise InterruptedError("stopped between two parts of an upload")
                        r = await fs._call_s3("upload_part", Bucket=bucket, Key=key, UploadId=up["UploadId"],
                                              PartNumber=len(parts) + 1, Body=data)
                        parts.append({"PartNumber": len(parts) + 1, "ETag": r["ETag"]})
                        data = rest + f.read(part_size - len(rest)) if rest else f.read(part_size)
                        rest = b""
                    done = await fs._call_s3("complete_multipart_upload", Bucket=bucket, Key=key,
                                             UploadId=up["UploadId"], MultipartUpload={"Parts": parts})
                    return done["ETag"]
                except BaseException:
                    try:
                        await fs._call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=up["UploadId"])
                    except Exception:       # noqa: BLE001 - the first failure is the one to tell
                        pass
                    raise
        if self.protocol not in ("s3", "s3a"):
            raise BadInputError(f"uploads go to S3 only, not {self.protocol}://", path=path)
        try:
            return sync(fs.loop, put)
        except InterruptedError:
            raise
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except Exception as e:
            raise self.fail(e, path) from None

    def s3(self, path: str, op: str, **kw) -> dict:
        """One S3 call (botocore's ``op``) on the object ``path``; a failure is its GtidxError."""
        bucket, key, _ = self.fs.split_path(path)
        return self._call(path, self.fs.call_s3, op, Bucket=bucket, Key=key, **kw)

    def part_size(self, path: str) -> int | None:
        """The size of part 1 of the object ``path`` when it was made by a
        multipart upload (a HEAD of that part), else None: with the size,
        what ``s3_etag`` needs to check the object against a local file."""
        head = self.s3(path, "head_object", PartNumber=1)
        return int(head["ContentLength"]) if head.get("PartsCount") else None

    def abort_uploads(self, path: str) -> int:
        """Abort the incomplete multipart uploads to ``path`` (a process
        killed during one leaves it, invisible but stored): how many."""
        bucket, key, _ = self.fs.split_path(path)
        listed = self._call(path, self.fs.call_s3, "list_multipart_uploads", Bucket=bucket, Prefix=key)
        stale = [u["UploadId"] for u in listed.get("Uploads", []) if u["Key"] == key]
        for upload in stale:
            self.s3(path, "abort_multipart_upload", UploadId=upload)
        return len(stale)

    def remove(self, path: str) -> None:
        """Delete the object ``path`` (one DELETE)."""
        self._call(path, self.fs.rm_file, path)

    def write_index(self, target: str, data: bytes, meta, *, make_dirs: bool = False) -> None:
        """The index with one PUT, then its fingerprint (``IndexMeta``, in
        a sidecar object bound to this index object's ETag): a reader
        between the two sees a fingerprint of another index and does not
        trust it (the index is judged as a server's: record 0, the tail)."""
        self.put(target, data)
        meta.write_object(self, target)


def s3_etag(local: str, part_size: int = UPLOAD_PART) -> str:
    """The ETag S3 gives the local file ``local`` uploaded by ``FsspecStore.upload``
    with ``part_size``: the MD5 (hex, quoted) of a file of one part; of more,
    the MD5 of the parts' MD5s, "-" and the number of parts. S3 computes it
    of the bytes it received, so equal ETags mean the object holds this
    file's bytes (one read of the file)."""
    import hashlib
    digests = []
    with open(local, "rb") as f:
        while True:
            data = f.read(part_size)
            if not data and digests:
                break
            digests.append(hashlib.md5(data).digest())
            if len(data) < part_size:
                break
    if len(digests) == 1:
        return '"%s"' % digests[0].hex()
    return '"%s-%d"' % (hashlib.md5(b"".join(digests)).hexdigest(), len(digests))


class RemoteFile(filebuf.Source):
    """An object open for range reads: its size (and ETag) from one HEAD at
    open; every read is one ranged GET of exactly what is asked, unless the
    bytes are among the last few ranges read (their last MiB each: an
    index record's check and the walk from it, a fingerprint and the end of
    a walk read the same bytes twice); a read that starts or ends inside
    one of them asks only for the bytes it lacks."""

    CHUNK_SHIFT = REMOTE_CHUNK_SHIFT
    CHECK_AHEAD = REMOTE_CHECK_AHEAD
    HELD = 4                        # ranges kept
    HELD_BYTES = 1 << 20            # of each, at most its last MiB

    def __init__(self, store: FsspecStore, path: str, info: dict):
        self.store = store
        self.path = path
        self.size = int(info["size"])
        self.etag = info.get("ETag") or info.get("etag")
        self._held: list[tuple[int, bytes]] = []

    def windows(self) -> tuple[int, int, int]:
        return REMOTE_WINDOW_FIRST, REMOTE_WINDOW, REMOTE_GROWTH

    def pread(self, n: int, offset: int) -> bytes:
        end = min(offset + n, self.size)
        if offset >= end:
            return b""
        head = tail = b""           # held bytes the range starts or ends with: only the rest is asked for
        for start, data in self._held:
            if start <= offset < start + len(data):
                if end <= start + len(data):
                    return data[offset - start:end - start]
                if len(data) - (offset - start) > len(head):
                    head = data[offset - start:]
        lo = offset + len(head)
        for start, data in self._held:
            if lo < start < end <= start + len(data) and end - start > len(tail):
                tail = data[:end - start]
        hi = end - len(tail)
        data = self._get(lo, hi)
        keep = data[-self.HELD_BYTES:] if len(data) > self.HELD_BYTES else data
        self._held.insert(0, (lo + len(data) - len(keep), keep))
        del self._held[self.HELD:]
        return head + data + tail if head or tail else data

    def _get(self, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` (within the size): one ranged GET; an answer
        cut in transit is asked for once more, then is an error naming the
        object and the offset. The size is the HEAD's (and an S3 read is
        pinned to its ETag), so fewer bytes than asked are a body cut on the
        way, never the end of the object: spliced, they would shift every
        byte after them."""
        for attempt in (1, 2):
            try:
                data = self.store.cat(self.path, lo, hi, self.etag)
            except GtidxError as e:
                if e.offset is None:
                    e.offset = lo
                if attempt == 2 or not e.message.startswith(CUT):
                    raise
                continue
            if len(data) == hi - lo:
                return data
        raise GtidxIOError(f"{CUT}: {len(data)} bytes of the {hi - lo} asked for", path=self.path, offset=lo,
                           hint="try again")

    def read_exact(self, offset: int, n: int) -> bytes:
        data = self.pread(n, offset) if offset + n <= self.size else b""
        if len(data) < n:
            raise filebuf.shrank(self.path, offset + len(data), self.size)
        return data

    def read_into(self, view: memoryview, offset: int) -> None:
        view[:] = self.read_exact(offset, len(view))

    def close(self) -> None:
        self._held = []


_STORES: dict = {}


def local_path(path, what: str) -> str:
    """The local path of ``path`` (a plain path or a ``file://`` URL) for
    ``what`` works only on this machine's files (a live server's directory
    followed, its index states beside it); an object-store URL is bad input
    (exit 2) saying so, rather than "no such file" for an object that exists."""
    local = _on_this_machine(path)
    if local is not None:
        return local
    raise BadInputError(f"{what} works on a local directory, not an object store",
                        path=path, hint="a live server's binlogs are followed where it writes them; "
                        "seek, pos, show, probe, scan, build, verify, info and dump read object stores")


def _on_this_machine(path) -> str | None:
    """The local path a plain path or ``file://`` URL names
    (``file:///var/log/x`` -> ``/var/log/x``); None for any other URL."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not is_url(path):
        return path
    protocol, rest = path.split("://", 1)
    return (rest or "/") if protocol == "file" else None


def resolve(path, storage_options: dict | None = None) -> tuple:
    """``(store, path)`` for a path or URL as a user gives it: a plain path
    or ``file://`` URL is local (``file:///var/log/x`` -> ``/var/log/x``);
    any other URL is opened with fsspec, ``storage_options`` passed to its
    file system with what the URL says of its server (ftp://user@host:port/),
    cached: the same URL scheme, server and options share one."""
    local = _on_this_machine(path)
    if local is not None:
        return LOCAL, local
    protocol = path.split("://", 1)[0]
    if storage_options is not None and not isinstance(storage_options, dict):
        raise BadInputError(f"storage_options must be a dict, not {type(storage_options).__name__}")
    try:
        from fsspec.registry import get_filesystem_class
        cls = get_filesystem_class(protocol)
        # where the URL names the server (ftp://user:password@host:port/): fsspec takes it from there
        options = {**cls._get_kwargs_from_urls(path), **(storage_options or {})}
    except ImportError as e:
        raise _missing_driver(e, protocol, path) from None
    except ValueError as e:
        raise BadInputError(f"cannot open {protocol}:// URLs: {reason(e)}", path=path) from None
    if protocol in ("s3", "s3a"):
        # what an object holds now, not a listing remembered from earlier in the process
        options.setdefault("use_listings_cache", False)
    key = (protocol, repr(sorted(options.items())))
    store = _STORES.get(key)
    if store is None:
        store = _STORES[key] = FsspecStore(_file_system(cls, options, protocol, path), protocol)
    return store, path


def _missing_driver(e: ImportError, protocol: str, path: str) -> BadInputError:
    """The error for a URL whose fsspec driver is not installed, naming what
    to install: fsspec's own words for its drivers ("Please install gcsfs to
    access Google Storage", 'SFTPFileSystem requires "paramiko"...')."""
    s3 = protocol in ("s3", "s3a")
    if e.name == "fsspec":
        return BadInputError(f"{protocol}:// URLs need fsspec, which is not installed", path=path,
                             hint="pip install 'gtidx[s3]'" if s3 else f"pip install fsspec and its {protocol} driver")
    return BadInputError(f"{protocol}:// URLs need a driver that is not installed: {reason(e)}", path=path,
                         hint="pip install 'gtidx[s3]'" if s3 else None)


def _file_system(cls, options: dict, protocol: str, path: str):
    """``cls(**options)``: the file system, or its GtidxError (bad input for
    options it does not take, exit 3 for a server that does not answer). A
    file system whose ``__init__`` failed (FTPFileSystem: the connection
    refused) is destroyed half-made, and its ``__del__`` then fails on what
    ``__init__`` did not set ("no attribute 'ftp'"), which Python prints as
    "Exception ignored in ...": that report is dropped while the half-made
    object goes (once the failure is handled), and no other."""
    report = sys.unraisablehook

    def half_made(unraisable) -> None:
        if not (unraisable.exc_type is AttributeError and
                getattr(unraisable.object, "__module__", "").startswith("fsspec.")):
            report(unraisable)
    sys.unraisablehook = half_made
    try:
        try:
            return cls(**options)
        except (KeyboardInterrupt, SystemExit, MemoryError):
            raise
        except TypeError as e:
            failure = BadInputError(f"bad storage option: {reason(e)}", path=path)
        except ValueError as e:
            failure = BadInputError(f"cannot open {protocol}:// URLs: {reason(e)}", path=path)
        except Exception as e:      # OSError (refused, no such host), ftplib's errors...: it cannot be reached
            failure = GtidxIOError(f"cannot connect: {reason(e)}", path=path,
                                   hint="is the server up, and the URL's host and port right?")
    finally:
        sys.unraisablehook = report
    raise failure


def store_of(path) -> "LocalStore | FsspecStore":
    return resolve(path)[0]


def parse_option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` (the CLI's ``--storage-option``): VALUE as JSON when it
    is JSON (``anon=true``, ``client_kwargs={"region_name": "eu-west-1"}``),
    else the string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise BadInputError(f"storage option {text!r} is not KEY=VALUE")
    import json             # only for --storage-option: a lookup does not load it
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return key, parsed
