"""MySQL's TRANSACTION_PAYLOAD event (type 40, 8.0.20+ with
``binlog_transaction_compression=ON``): one event holding every event of a
transaction after its GTID event, compressed.

Its body (MySQL's ``Transaction_payload_event``): a header of fields, each
``type, length, value`` as packed integers (``net_field_length``; the value
takes ``length`` bytes), ended by the field type 0; then the payload. Field
1: the payload's size; 2: the compression (0 ZSTD, 255 NONE); 3: the size
uncompressed. A field of another type is skipped by its length, as the
server's decoder does. The payload uncompressed is the inner events one after
another, each a whole event (19-byte header, body) without a checksum
(the outer event's CRC32 covers them).

zstd comes from the ``zstandard`` package (Python 3.11 has no zstd), imported
when a compressed payload is met: ``gtidx seek`` and the other commands never
import it. Damage (sizes that disagree, a stream that does not decompress,
inner events that do not tile the payload) is a CorruptBinlogError at the
outer event's offset (exit 3).
"""
from __future__ import annotations

from typing import NamedTuple

from .events import EVENT_HEADER, HEADER_LEN
from ..errors import CorruptBinlogError, UnsupportedBinlogError

FIELD_END, FIELD_SIZE, FIELD_COMPRESSION, FIELD_UNCOMPRESSED_SIZE = 0, 1, 2, 3
ZSTD, NONE = 0, 255
COMPRESSION_NAMES = {ZSTD: "ZSTD", NONE: "NONE"}
# the server caps a transaction (and so a payload) below this: a header claiming more is damage
MAX_UNCOMPRESSED = 1 << 40


class InnerEvent(NamedTuple):
    """One event inside a payload: its header's fields, its body, and where
    it lies in the uncompressed payload (``at``)."""
    at: int
    type: int
    server_id: int
    length: int
    timestamp: int
    flags: int
    body: bytes


class Payload(NamedTuple):
    compression: int          # ZSTD or NONE
    size: int                 # the compressed payload's bytes
    uncompressed: int         # its size uncompressed
    events: list              # InnerEvent, in order


def packed_int(buf, at: int) -> tuple[int, int]:
    """MySQL's packed integer (``net_field_length``) at ``at``: (value, its end).
    ValueError where the bytes end first or hold no packed integer."""
    if at >= len(buf):
        raise ValueError("ends inside a packed integer")
    first = buf[at]
    if first < 251:
        return first, at + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or at + 1 + width > len(buf):
        raise ValueError(f"bad packed integer (first byte {first:#x})")
    return int.from_bytes(bytes(buf[at + 1:at + 1 + width]), "little"), at + 1 + width


def header(body) -> tuple[dict, int]:
    """The header's fields ({type: value}) and where the payload starts."""
    fields: dict = {}
    at = 0
    while True:
        kind, at = packed_int(body, at)
        if kind == FIELD_END:
            return fields, at
        length, at = packed_int(body, at)
        if at + length > len(body):
            raise ValueError(f"header field {kind} runs past the event")
        if kind in (FIELD_SIZE, FIELD_COMPRESSION, FIELD_UNCOMPRESSED_SIZE):
            value, end = packed_int(body, at)
            if end != at + length:
                raise ValueError(f"header field {kind}: its value is not {length} bytes")
            fields[kind] = value
        at += length


def _zstd_decompress(data: bytes, want: int) -> bytes:
    try:
        import zstandard
    except ImportError:         # pragma: no cover - a broken install
        raise UnsupportedBinlogError("a compressed transaction (TRANSACTION_PAYLOAD, ZSTD) needs the zstandard "
                                     "package", hint="pip install zstandard") from None
    try:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=max(want, 1))
    except zstandard.ZstdError as e:
        raise ValueError(f"its ZSTD stream does not decompress: {e}") from None


def decode(body, *, path, offset: int) -> Payload:
    """The payload of the TRANSACTION_PAYLOAD event at ``offset`` whose body
    (without header and checksum) is ``body``: decompressed, split into its
    inner events. CorruptBinlogError (exit 3) where it does not read so;
    UnsupportedBinlogError (exit 2) for a compression gtidx does not know."""
    try:
        fields, at = header(body)
        compression = fields.get(FIELD_COMPRESSION, ZSTD)
        size = fields.get(FIELD_SIZE, len(body) - at)
        if compression not in COMPRESSION_NAMES:
            raise UnsupportedBinlogError(f"TRANSACTION_PAYLOAD event with compression type {compression} "
                                         "(gtidx knows ZSTD and NONE)", path=path, offset=offset)
        if at + size != len(body):
            raise ValueError(f"its header says {size} payload bytes, the event holds {len(body) - at}")
        data = bytes(body[at:])
        want = fields.get(FIELD_UNCOMPRESSED_SIZE, size if compression == NONE else None)
        if want is None:
            raise ValueError("its header does not say the uncompressed size")
        if want > MAX_UNCOMPRESSED:
            raise ValueError(f"its header says {want} bytes uncompressed")
        out = data if compression == NONE else _zstd_decompress(data, want)
        if len(out) != want:
            raise ValueError(f"it decompresses to {len(out)} bytes, its header says {want}")
        return Payload(compression, size, want, list(inner_events(out)))
    except ValueError as e:
        raise CorruptBinlogError(f"TRANSACTION_PAYLOAD event: {e}", path=path, offset=offset,
                                 hint="the binlog is damaged: the compressed transaction does not read") from None


def inner_events(data: bytes):
    """The events of an uncompressed payload, which they must tile exactly."""
    at = 0
    while at < len(data):
        if at + HEADER_LEN > len(data):
            raise ValueError(f"it ends inside the header of its inner event at {at}")
        ts, etype, server_id, ln, _, flags = EVENT_HEADER.unpack_from(data, at)
        if ln < HEADER_LEN or at + ln > len(data):
            raise ValueError(f"its inner event at {at} has length {ln}, which does not fit")
        yield InnerEvent(at, etype, server_id, ln, ts, flags, data[at + HEADER_LEN:at + ln])
        at += ln
