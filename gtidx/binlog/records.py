"""The records a binlog reader yields: ``Event`` (one event with its body:
``Binlog.events``, ``events_between``) and ``Group`` (an event group:
``Binlog.groups``, ``changes``, ``rowbatch``). Imported by what makes
them, not with the reader: a lookup through an index creates neither, and
does not pay for creating their classes."""

from typing import NamedTuple  # (annotations evaluated here, not postponed: a NamedTuple
#                                 would compile each field's annotation string at import)

from ..gtid import Gtid
from .events import EVENT_NAMES


class Event(NamedTuple):
    offset: int
    type: int
    server_id: int
    length: int
    timestamp: int
    flags: int
    body: memoryview       # without header and checksum

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def name(self) -> str:
        return EVENT_NAMES.get(self.type, f"TYPE_{self.type}")


class Group(NamedTuple):
    """An event group: its GTID event's offset (start) and the offset just
    after its last event (end)."""
    gtid: Gtid
    start: int
    end: int
    timestamp: int
    flags2: int
