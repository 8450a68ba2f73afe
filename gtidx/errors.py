"""The one exception hierarchy of gtidx.

Every error a user can meet is a ``GtidxError``: it carries what went wrong,
where (path, binlog offset or index page) and a hint, renders as one line, and
maps to the CLI's exit code:

    0 found, 1 not found, 2 bad input or usage, 3 corrupt data or I/O error.
"""
from __future__ import annotations

EXIT_NOT_FOUND = 1
EXIT_BAD_INPUT = 2
EXIT_CORRUPT = 3

_QUOTE_MAX = 60     # characters of a user's bad input quoted in a message
_SHOWN_MAX = 200    # characters of a batch's input line echoed beside its answer


def _cut(text: str, limit: int, render) -> str:
    """``render(text)``, of its first ``limit`` characters when it is longer,
    saying how long it was (a megabyte of digits must not become a megabyte
    line)."""
    if len(text) <= limit:
        return render(text)
    return f"{render(text[:limit])}... ({len(text)} characters)"


def quoted(text: str) -> str:
    """A user's bad input as an error message quotes it: repr, cut when long."""
    return _cut(text, _QUOTE_MAX, repr)


def _escape(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:        # a byte that is not UTF-8, as surrogateescape decoded it
        return f"\\x{code - 0xDC00:02x}"
    return repr(ch)[1:-1]


def printable(text: str) -> str:
    """``text`` with every character that is not printable (NUL, escape
    sequences, line breaks, bytes that are not UTF-8 as surrogateescape
    keeps them) as its backslash escape: one line a terminal shows as it is."""
    return text if text.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in text)


def shown(text: str) -> str:
    """Input text as an output line echoes it (a batch's line beside its
    error): unquoted, ``redact``-ed, ``printable``, cut to about 200
    characters: one harmless line whatever came in."""
    return _cut(redact(text), _SHOWN_MAX, printable)


_USERINFO = r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@"      # compiled on first use


def redact(text):
    """``text`` with the user information of every URL in it (``s3://KEY:SECRET@bucket/``,
    ``ftp://user:password@host/``) replaced by ``***``: a password written in a
    URL is never shown. The user information is what URL parsers take it to
    be: the URL's authority (up to ``/``, ``?``, ``#``; in a sentence, a space)
    up to its last ``@``. For a path or a message before it is put into JSON
    (a JSON string escapes what it holds). Anything but a str is returned as
    it is."""
    if not isinstance(text, str) or "@" not in text or "://" not in text:
        return text
    import re           # here: `import gtidx` (this module) does not load re
    return re.sub(_USERINFO, r"\1***@", text)


class GtidxError(Exception):
    """Base class. ``str(err)`` is the one line shown to users (URLs in it
    ``redact``-ed, as in ``as_dict``; ``printable``)."""

    exit_code = EXIT_CORRUPT

    def __init__(self, message: str, *, path=None, offset: int | None = None,
                 page: int | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = None if path is None else str(path)
        self.offset = offset
        self.page = page
        self.hint = hint

    def __str__(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        if self.page is not None:
            where.append(f"page {self.page}")
        text = f"{', '.join(where)}: {self.message}" if where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return printable(redact(text))

    def as_dict(self) -> dict:
        """The error as ``--json`` prints it: ``{"error": err.as_dict()}``."""
        return {"message": redact(self.message), "path": redact(self.path), "offset": self.offset,
                "page": self.page, "hint": redact(self.hint), "exit_code": self.exit_code}


class BadInputError(GtidxError):
    """The user gave something that cannot be right: a malformed GTID, a bad option."""

    exit_code = EXIT_BAD_INPUT


class GtidSyntaxError(BadInputError):
    """A GTID, binlog state or replication position that does not parse."""


class UnsupportedBinlogError(BadInputError):
    """A file that is not a MariaDB binlog gtidx can read: not a binlog at all,
    binlog format v1/v3, a MySQL binlog, an encrypted binlog."""


class EncryptedBinlogError(UnsupportedBinlogError):
    """The binlog is encrypted (START_ENCRYPTION event): its events cannot be read."""


class MySQLBinlogError(UnsupportedBinlogError):
    """A MySQL binlog (GTID_LOG / PREVIOUS_GTIDS events): not supported yet."""


class NotFoundError(GtidxError):
    """The thing asked for is not there: an offset that is not an event
    boundary, a GTID that is not in these binlogs."""

    exit_code = EXIT_NOT_FOUND


class ReplicaStartRefused(NotFoundError):
    """A replica position the binlogs cannot serve, as the server refuses it:
    ``reason`` "absent" (``gtid`` is not in the binlogs), "diverged" (not in
    them, and its domain went past its seq_no), "purged" (the position is
    older than every binlog; ``gtid`` None) or "hole" (gtid_strict_mode:
    ``gtid`` is missing between a prior and a later seq_no; ``path`` and
    ``offset``: the later one's group). MySQL's (``series.mysql``):
    "purged" with ``gtid`` the GTID set the replica lacks, "ahead" with
    ``gtid`` its GTIDs the binlogs never logged, "anonymous" (an anonymous
    transaction at ``path`` and ``offset``, met from ``start``, the file the
    source reads first). A replication source speaks it in the server's
    words (``serve.session``, ``serve.mysqlsession``)."""

    def __init__(self, message: str, *, reason: str, gtid=None, hint: str | None = None, start=None, **where):
        super().__init__(message, hint=hint, **where)
        self.reason = reason
        self.gtid = gtid
        self.start = start


class CorruptBinlogError(GtidxError):
    """The binlog's bytes contradict its own framing (bad length, bad CRC)."""

    exit_code = EXIT_CORRUPT


class CorruptIndexError(GtidxError):
    """An ``.idx`` file that is damaged, incomplete or not an index."""

    exit_code = EXIT_CORRUPT


class CorruptCatalogError(GtidxError):
    """A catalog (``gtidx-catalog.json``) that cannot be used: not a regular
    file, unreadable, not JSON, of another version, without its checksum or
    with one that does not match its content, or holding values of the wrong
    kind. Lookups go on without it (one warning), ``catalog show`` fails with
    it, ``catalog build``, ``build`` and ``tail`` make the catalog again."""

    exit_code = EXIT_CORRUPT


class GtidxIOError(GtidxError):
    """The operating system refused: missing file, permission, disk full."""

    exit_code = EXIT_CORRUPT

    @classmethod
    def from_os(cls, err: OSError, path=None) -> "GtidxIOError":
        return cls(err.strerror or str(err), path=path if path is not None else err.filename)
