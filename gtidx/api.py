"""The library API: what the CLI, the Spark job and the tail sidecar call.

Every function takes paths and plain values and returns typed results; every
failure is a ``GtidxError``.
"""
from __future__ import annotations

import os
from typing import Iterator, NamedTuple

from .binlog import CHECKSUM_CRC32, Binlog, Group
from .errors import BadInputError, NotFoundError
from .gtid import BinlogState, Position


class BinlogInfo(NamedTuple):
    file: str
    size: int
    server_version: str
    checksum: str            # "CRC32" or "NONE"
    growing: bool            # FDE IN_USE flag: still written, or not closed cleanly
    start_state: BinlogState  # from the GTID_LIST event
    body_start: int          # offset after the GTID_LIST event


class StateAt(NamedTuple):
    """The answer to "what GTID state holds at FILE offset N"."""
    file: str
    offset: int
    state: BinlogState       # every (domain, server) entry
    via: str                 # "scan" (or "index")

    @property
    def position(self) -> Position:
        """One GTID per domain: what BINLOG_GTID_POS(file, offset) prints."""
        return self.state.position()


def _info(b: Binlog) -> BinlogInfo:
    return BinlogInfo(b.path, b.size, b.fde.server_version,
                      "CRC32" if b.fde.checksum == CHECKSUM_CRC32 else "NONE",
                      b.growing, b.start_state.copy(), b.body_start)


def binlog_info(path: str | os.PathLike) -> BinlogInfo:
    with Binlog(path) as b:
        return _info(b)


def scan(path: str | os.PathLike) -> tuple[BinlogInfo, Iterator[Group]]:
    """The file's facts, and an iterator over its event groups in file order.
    The file stays open until the iterator is exhausted or closed."""
    b = Binlog(path)
    info = _info(b)

    def groups():
        try:
            yield from b.groups()
        finally:
            b.close()
    return info, groups()


def state_at(path: str | os.PathLike, offset: int) -> StateAt:
    """The binlog state at ``offset`` of ``path``, as the server's
    ``BINLOG_GTID_POS`` gives it. ``NotFoundError`` when the offset is not the
    start of an event or the end of the file (the server returns NULL)."""
    if offset < 0:
        raise BadInputError(f"offset {offset} is negative")
    with Binlog(path) as b:
        state = b.state_at(offset)
        if state is None:
            if offset > b.size:
                raise NotFoundError(f"offset {offset} is past the end of the file (size {b.size})",
                                    path=b.path, offset=offset)
            raise NotFoundError("not the start of an event", path=b.path, offset=offset,
                                hint="BINLOG_GTID_POS returns NULL here too")
        return StateAt(b.path, offset, state, "scan")
