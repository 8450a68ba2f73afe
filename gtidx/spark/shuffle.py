"""How ``locate``'s rows move from the input partitions to the per-file
tasks: the values of each input partition are packed per file (one row per
(partition, file), an Arrow IPC stream: ``pack``), ``repartition(n, file)``
moves those rows, and each task gathers its files' rows (``per_file``).
``partition_codes`` picks the file column's values so that Spark's hash
partitioning gives each task its own files, evenly.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

# What locate's shuffle moves of the planner's rows (``plan.ASSIGNED``): per input partition and file, one row
# holding that file's ASSIGNED rows packed (an Arrow IPC stream): Spark moves
# a row per (partition, file), not per value (``pack``, ``unpack``).
PACKED = "file int, rows binary"
PACK_ROWS = 1 << 20                      # input rows planned and packed at once, at most

TASKS_PER_CORE = 2                       # locate's tasks (summaries, answers): at most this many per core


def task_count(sc, files: int) -> int:
    """How many tasks answer locate's rows: one per file, up to
    TASKS_PER_CORE per core; then files share them evenly (``partition_codes``)."""
    return max(1, min(files, sc.defaultParallelism * TASKS_PER_CORE))


def partition_codes(n: int, count: int) -> list[int]:
    """``count`` distinct ints, the i-th of which Spark's hash partitioning
    into ``n`` (``repartition(n, col)`` of an int column: pmod(murmur3 hash,
    n)) puts in partition i % n: locate's file column holds them in place of
    the file indexes, so that each task gets its own files, evenly (hashing
    the indexes themselves gives some tasks several files and others none)."""
    per = [[] for _ in range(n)]
    k = 0
    while any(len(per[j]) < len(range(j, count, n)) for j in range(n)):
        per[spark_hash_int(k) % n].append(k)
        k += 1
    return [per[i % n][i // n] for i in range(count)]


def spark_hash_int(k: int) -> int:
    """Spark's ``hash()`` of an int (Murmur3_x86_32.hashInt, seed 42), what
    its hash partitioning takes the partition from (a test compares it with
    Spark's own)."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF
    k1 = rotl((k & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF, 15) * 0x1B873593 & 0xFFFFFFFF
    h = (rotl(42 ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4
    h = (h ^ (h >> 16)) * 0x85EBCA6B & 0xFFFFFFFF
    h = (h ^ (h >> 13)) * 0xC2B2AE35 & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def chunks(batches, rows: int):
    """The first column of Arrow ``batches``, as arrays of at most about
    ``rows`` values (whole batches put together)."""
    import pyarrow as pa
    held, count = [], 0
    for b in batches:
        held.append(b.column(0))
        count += len(b)
        if count >= rows:
            yield pa.concat_arrays(held)
            held, count = [], 0
    if held:
        yield pa.concat_arrays(held)


def pack(batch, file) -> "pa.RecordBatch":
    """A PACKED batch: per distinct ``file`` code (null: the rows no file
    answers), one row with those rows of ``batch`` (in their order) as an
    Arrow IPC stream."""
    import numpy as np
    import pyarrow as pa
    codes = file.fill_null(-1).to_numpy() if file.null_count else file.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    keys, starts = np.unique(codes[order], return_index=True)
    packed = []
    for a, b in zip(starts, list(starts[1:]) + [len(order)]):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch.take(pa.array(order[a:b])))
        packed.append(sink.getvalue().to_pybytes())
    return pa.RecordBatch.from_arrays([pa.array(keys, pa.int32(), mask=keys == -1), pa.array(packed, pa.binary())],
                                      names=["file", "rows"])


def unpack(blobs) -> "pa.Table":
    """The rows of PACKED rows' ``rows`` (bytes each), in order, as one table."""
    import pyarrow as pa
    return pa.concat_tables([pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in blobs])


def per_file(batches, answer):
    """A task's PACKED batches (the rows of its files: ``repartition`` by
    file) gathered by file, each file's rows answered at once
    (``answer(key, table)``: the file's code, a table of its rows)."""
    import pyarrow as pa
    by_code = {}
    for b in batches:
        for code, blob in zip(b.column(0).to_pylist(), b.column(1).to_pylist()):
            by_code.setdefault(code, []).append(blob)
    for code, blobs in by_code.items():
        yield from answer([pa.scalar(code, pa.int32())], unpack(blobs)).to_batches()
