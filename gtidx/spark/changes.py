"""Row changes on Spark: ``spark.read.format("gtidx.changes").load(PATH_OR_URL)``.

One row per changed row of every event group of the binlogs at PATH_OR_URL
(a directory, a ``master-bin.index``, one binlog, or a URL read by the
executors), in binlog order, one partition per file read, or per piece of
about ``split_bytes`` of a bigger one (``ChangeSource.splits``: a big binlog
uses every core; a GTID filter's files stay one partition each); the
partitions in file order, so the rows collected are in binlog order:

    gtid, file, offset, timestamp, table, op, before, after, changed, unknown

``offset`` and ``timestamp`` are the group's (its GTID event's offset, as
``gtidx show FILE OFFSET`` takes it, and its timestamp, unix seconds);
``file`` the binlog's name; ``table`` "db.tbl"; ``op`` insert, update or
delete; ``before``/``after`` map<string,string> (null where the op has no such
image), ``changed`` and ``unknown`` array<string>: what ``gtidx show --json``
gives for the row (``show.decode_group`` decodes it, here as there), with
each value ``show.as_text``: the JSON value's text (strings as they are,
numbers as JSON writes them, DECIMAL exact, binary data as hex digits, NULL
as null).

Filters the source applies itself (pushed down), as ``gtidx.changes.Filters``
(that module plans and reads: what each filter saves is said there):
``table = ...`` / ``IN``; ``timestamp`` comparisons (=, <, <=, >, >=, IN);
``gtid = ...`` / ``IN`` (each GTID located on the driver as ``gtidx seek``
does); ``file = ...`` / ``IN`` (binlog names).

Options: ``storage_options`` (a JSON object, as for ``format("gtidx")``),
``index_root`` (where the indexes and catalog are, ``--index-dir``),
``history`` (which history of a catalog with several, for a GTID filter),
``split_bytes`` (bytes, default ``changes.SPLIT_BYTES``, 64 MiB: the size of
a piece of a big binlog).

The executors hand Spark Arrow record batches (``rowbatch.source_batches``,
``ARROW_SCHEMA``: the DDL schema's types), no Python object per row.
"""
from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, GreaterThan, GreaterThanOrEqual,
                                    In, InputPartition, IsNotNull, LessThan, LessThanOrEqual)

from .. import rowbatch
from ..changes import SCHEMA, SPLIT_BYTES, ChangeSource
from ..errors import BadInputError
from .where import parse_storage_options

CHANGES_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in SCHEMA)

_COMPARE = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}
_NARROWS = {"table": "tables", "gtid": "gtids", "file": "files"}     # column -> the Filters field it narrows


class ChangesDataSource(DataSource):
    """``spark.read.format("gtidx.changes").load(PATH_OR_URL)``: see the module."""

    @classmethod
    def name(cls) -> str:
        return "gtidx.changes"

    def schema(self) -> str:
        return CHANGES_SCHEMA

    def reader(self, schema) -> "ChangesReader":
        path = self.options.get("path")
        if not path:
            raise BadInputError("the gtidx.changes data source needs a path: "
                                "spark.read.format('gtidx.changes').load(DIR)")
        history = _option_int(self.options, "history", None)
        split_bytes = _option_int(self.options, "split_bytes", SPLIT_BYTES, 1)
        return ChangesReader(path, parse_storage_options(self.options.get("storage_options")),
                             self.options.get("index_root") or None, history, split_bytes=split_bytes)


def _option_int(options, name: str, default, minimum: int | None = None):
    """The option ``name`` as an int (Spark gives options as text), ``default`` when not given."""
    text = options.get(name)
    if text in (None, ""):
        return default
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise BadInputError(f"the gtidx.changes {name} option must be a number, not {text!r}") from None
    if minimum is not None and value < minimum:
        raise BadInputError(f"the gtidx.changes {name} option must be at least {minimum}, not {value}")
    return value


def _number(v) -> float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class ChangesReader(DataSourceReader):
    """``gtidx.changes``: Spark's filters turned into ``changes.Filters``, one
    partition per piece (``ChangeSource.splits``) of each binlog of
    ``ChangeSource.plan`` (driver), its rows read as Arrow record batches
    (executors; ``batch_rows`` gives a batch's rows as the schema's tuples)."""

    def __init__(self, path: str, storage_options: dict | None = None, index_root: str | None = None,
                 history: int | None = None, *, split_bytes: int = SPLIT_BYTES):
        self.source = ChangeSource.source(path, storage_options=storage_options, index_root=index_root,
                                          history=history)
        self.split_bytes = split_bytes

    # -- driver ----------------------------------------------------------------------------
    def pushFilters(self, filters):
        wanted = self.source.filters
        for f in filters:
            attr = f.attribute[0] if len(f.attribute) == 1 else None
            values = {f.value} if isinstance(f, EqualTo) else set(f.value) if isinstance(f, In) else None
            if attr in _NARROWS and values is not None and all(isinstance(v, str) for v in values):
                wanted.narrow(_NARROWS[attr], values)
            elif isinstance(f, IsNotNull) and attr in self.source.never_null:
                continue                        # every row has them (Spark adds these beside = and IN)
            elif attr == "timestamp" and isinstance(f, In) and all(_number(v) is not None for v in f.value):
                wanted.times.append(("in", frozenset(f.value)))
            elif attr == "timestamp" and type(f) in _COMPARE and _number(f.value) is not None:
                wanted.times.append((_COMPARE[type(f)], f.value))
            else:
                yield f

    def partitions(self):
        """(path, spans, split) per partition, in binlog order: a file with
        located groups (spans) in one, any other in its pieces."""
        return [InputPartition((path, spans, split)) for path, spans in self.source.plan()
                for split in ([None] if spans is not None else self.source.splits(path, self.split_bytes))]

    # -- executors ---------------------------------------------------------------------------
    def read(self, partition):
        spec = partition.value
        if spec is None:                 # no file passed the filters: Spark reads InputPartition(None)
            return
        path, spans, split = spec
        with self.source.open(path) as b:
            yield from rowbatch.source_batches(self.source, b, spans, split=split)


def batch_rows(batch) -> Iterator[tuple]:
    """The rows of a record batch of ``ARROW_SCHEMA`` as the schema's tuples
    (map columns as dicts, as Spark gives them back)."""
    columns = [c.to_pylist() for c in batch.columns]
    for i, (_, kind) in enumerate(SCHEMA):
        if kind.startswith("map<"):
            columns[i] = [None if m is None else dict(m) for m in columns[i]]
    return zip(*columns)


__all__ = ["ChangesDataSource", "ChangesReader", "CHANGES_SCHEMA", "batch_rows"]
