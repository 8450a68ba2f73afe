"""``build`` on Spark: the missing or stale index of every binlog, built by
one task per file on the executors."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from .. import admin, api
from ..errors import GtidxError

BUILD_SCHEMA = StructType([
    StructField("binlog", StringType()), StructField("index", StringType()),
    StructField("action", StringType()), StructField("reason", StringType()),
    StructField("records", LongType()), StructField("size", LongType()),
    StructField("binlog_size", LongType()), StructField("ratio", StringType()),
    StructField("seconds", StringType()), StructField("error", StringType()),
])


def _build_one(path: str, kw: dict) -> tuple:
    """``admin.build`` of one file (``kw``: its keywords, ``storage_options``
    and ``index_root`` among them), as a BUILD_SCHEMA row."""
    try:
        r = next(iter(admin.build([path], **kw)))
    except GtidxError as e:
        r = e
    if isinstance(r, GtidxError):
        return (path, api.index_path(path), "failed", "", 0, 0, 0, "", "", str(r))
    return (r.binlog, r.index, r.action, r.reason, r.records, r.size, r.binlog_size,
            f"{r.ratio:.6f}", f"{r.seconds:.4f}", "")


def build(spark: SparkSession, binlogs: str, *, storage_options: dict | None = None, **kw) -> DataFrame:
    """Build the missing or stale index of every binlog at ``binlogs`` (a
    path or a URL, as for ``locate``), one task per file; one summary row per
    file (``admin.build`` keywords pass through: ``index_root``, ``page_size``...).
    Each executor reads its binlog and writes its index itself."""
    files = api.list_binlogs(binlogs, storage_options=storage_options)
    kw["storage_options"] = storage_options
    rdd = spark.sparkContext.parallelize(files, len(files)).map(lambda f: _build_one(f, kw))
    return spark.createDataFrame(rdd, BUILD_SCHEMA)
