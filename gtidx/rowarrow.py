"""The compiled row decoder's buffers as an Arrow record batch.

``gtidx._rows.Decoder.finish()`` hands over the batch it built (see
gtidx/_rows.c) as a dict of buffers (objects with the buffer protocol, owned
by the decoder's memory until they are released): per string column its
int32 offsets and UTF-8 data; ``offset`` and ``timestamp`` int64 values; per
map column (``before``, ``after``) its validity bitmap, int32 offsets, entry
count, the keys' offsets and data, the values' validity, offsets and data;
``changed`` its validity, offsets, item count, items' offsets and data;
``unknown`` (never null) its offsets, item count, items' offsets and data.
``batch_from`` wraps them (``pa.py_buffer``: no copy, no Python object per
value)."""
from __future__ import annotations

import pyarrow as pa

_STR = pa.string()


def _strings(n: int, offsets, data, validity=None) -> pa.Array:
    return pa.Array.from_buffers(_STR, n, [None if validity is None else pa.py_buffer(validity),
                                           pa.py_buffer(offsets), pa.py_buffer(data)])


def _map(kind: pa.DataType, rows: int, part) -> pa.Array:
    validity, offsets, entries, key_offsets, keys, value_validity, value_offsets, values = part
    items = pa.StructArray.from_arrays([_strings(entries, key_offsets, keys),
                                        _strings(entries, value_offsets, values, value_validity)],
                                       fields=[kind.key_field, kind.item_field])
    return pa.Array.from_buffers(kind, rows, [pa.py_buffer(validity), pa.py_buffer(offsets)], children=[items])


def _list(kind: pa.DataType, rows: int, validity, offsets, items: int, item_offsets, item_data) -> pa.Array:
    child = _strings(items, item_offsets, item_data)
    return pa.Array.from_buffers(kind, rows, [None if validity is None else pa.py_buffer(validity),
                                              pa.py_buffer(offsets)], children=[child])


def batch_from(parts: dict, schema: pa.Schema) -> pa.RecordBatch:
    """``Decoder.finish()``'s dict as a record batch of ``schema``
    (rowbatch.ARROW_SCHEMA: the columns in ``changes.SCHEMA``'s order)."""
    n = parts["rows"]
    types = {f.name: f.type for f in schema}
    columns = {
        "gtid": _strings(n, *parts["gtid"]),
        "file": _strings(n, *parts["file"]),
        "offset": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(parts["offset"])]),
        "timestamp": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(parts["timestamp"])]),
        "table": _strings(n, *parts["table"]),
        "op": _strings(n, *parts["op"]),
        "before": _map(types["before"], n, parts["before"]),
        "after": _map(types["after"], n, parts["after"]),
        "changed": _list(types["changed"], n, *parts["changed"]),
        "unknown": _list(types["unknown"], n, None, *parts["unknown"]),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
