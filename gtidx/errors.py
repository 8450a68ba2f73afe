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


def quoted(text: str) -> str:
    """A user's bad input as an error message quotes it: repr, cut when long
    (a megabyte of digits must not become a megabyte error line)."""
    if len(text) <= _QUOTE_MAX:
        return repr(text)
    return f"{text[:_QUOTE_MAX]!r}... ({len(text)} characters)"


class GtidxError(Exception):
    """Base class. ``str(err)`` is the one line shown to users."""

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
        return text

    def as_dict(self) -> dict:
        """The error as ``--json`` prints it: ``{"error": err.as_dict()}``."""
        return {"message": self.message, "path": self.path, "offset": self.offset,
                "page": self.page, "hint": self.hint, "exit_code": self.exit_code}


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
