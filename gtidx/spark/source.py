"""``spark.read.format("gtidx").load(DIR)``: every event group of the
binlogs, one row each, one partition per file read."""
from __future__ import annotations

import os
from decimal import Decimal

from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, In, InputPartition

from .. import api, storage
from ..binlog.mysql import MysqlBinlog, open_binlog
from ..errors import GtidxError
from .where import parse_storage_options

GROUPS_SCHEMA = ("file string, gtid string, domain long, server long, seq decimal(20,0), "
                 "start long, end long, timestamp long, flags int")


class GtidxDataSource(DataSource):
    """``spark.read.format("gtidx").load(DIR)``: one row per event group of
    every binlog in DIR (file, gtid, domain, server, seq, start, end,
    timestamp, flags); for MySQL binlogs one per transaction, ``gtid`` its
    text (``uuid[:tag]:gno``; null: anonymous), domain, server, seq and flags
    null. DIR may be a URL (``s3://bucket/prefix/``), read by
    the executors; ``.option("storage_options", json.dumps({...}))`` passes
    fsspec options (default: the AWS_* variables each executor has). Filters
    ``file = ...``/``file IN (...)`` (file names as in the binlog list) skip
    whole files; ``domain = ...``/``IN`` skip groups."""

    @classmethod
    def name(cls) -> str:
        return "gtidx"

    def schema(self) -> str:
        return GROUPS_SCHEMA

    def reader(self, schema) -> "_GroupsReader":
        path = self.options.get("path")
        if not path:
            raise GtidxError("gtidx data source needs a path: spark.read.format('gtidx').load(DIR)")
        return _GroupsReader(path, parse_storage_options(self.options.get("storage_options")))


class _GroupsReader(DataSourceReader):
    """The planning (driver: the files, the filters pushed) and the reading
    (executors: one file per partition) of ``format("gtidx")``."""

    def __init__(self, path: str, storage_options: dict | None = None):
        self.storage_options = storage_options
        self.files = api.list_binlogs(path, storage_options=storage_options)
        self.file_names: set | None = None
        self.domains: set | None = None

    def pushFilters(self, filters):
        for f in filters:
            values = None
            if isinstance(f, EqualTo):
                values = {f.value}
            elif isinstance(f, In):
                values = set(f.value)
            if values is not None and f.attribute == ("file",):
                self.file_names = values if self.file_names is None else self.file_names & values
            elif values is not None and f.attribute == ("domain",):
                self.domains = values if self.domains is None else self.domains & values
            else:
                yield f

    def partitions(self):
        files = [f for f in self.files
                 if self.file_names is None or os.path.basename(f) in self.file_names]
        return [InputPartition(f) for f in files]

    def read(self, partition):
        path = partition.value
        if path is None:                 # no file passed the filters: Spark reads InputPartition(None)
            return
        name = os.path.basename(path)
        domains = self.domains
        with open_binlog(path, storage.resolve(path, self.storage_options)[0]) as b:
            if isinstance(b, MysqlBinlog):
                # a MySQL binlog's transactions: the GTID's text (uuid[:tag]:gno; null: anonymous), no
                # domain, server or seq_no (so a domain filter keeps none of them), no MariaDB flags
                if domains is None:
                    for t in b.transactions():
                        yield (name, None if t.gtid is None else str(t.gtid), None, None, None, t.start, t.end,
                               t.timestamp, None)
                return
            for begin, end, (ts, server, seq, domain, flags2) in b.group_spans():
                if domains is not None and domain not in domains:
                    continue
                yield (name, f"{domain}-{server}-{seq}", domain, server, Decimal(seq), begin, end, ts, flags2)
