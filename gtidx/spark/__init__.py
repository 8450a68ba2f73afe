"""Batch lookups on Spark (PySpark 4.1+; ``pip install 'gtidx[spark]'``).

    from gtidx import spark as gs
    out = gs.locate(spark, spark.read.text("gtids.txt"), "/data/binlogs")   # gtid, file, start, end, ...
    gs.build(spark, "/data/binlogs").show()
    gs.register(spark); spark.read.format("gtidx").load("/data/binlogs")    # every event group, for SQL
    spark.read.format("gtidx.changes").load("/data/binlogs")                # every changed row

``locate`` plans so that the work grows with the files touched, not with
files x GTIDs:

1. one small job reads each file's summary on the executors: its start
   state (GTID_LIST), per (domain, server) the seq range it logs and whether
   it goes down there (what ``build`` stored with the index, else one walk
   of the file), and, for the last file, its end state (index, then a short
   scan). When the binlogs have a catalog (``gtidx.catalog``), the driver
   reads it once and takes the summary of every file whose entry is current
   from it, as ``gtidx.open`` does (``BinlogSeries.use_catalog``: one history,
   or ``history``; the newest file opened to check its entry): the job reads
   only the others, and the executors get the entries with the plan;
2. each GTID is assigned to its file with the summaries alone (broadcast),
   by the planner of ``BinlogSeries.locate`` (``api.plan_locate``): not in these
   binlogs when the latest state lacks it (never written) or the earliest
   has it (purged); else the last file whose start state does not have it
   yet. A GTID whose (domain, server) went backwards (gtid_strict_mode=OFF)
   can be in several files: it goes to the first of them, whose task answers
   it with ``BinlogSeries.locate`` (every file that can hold it, first occurrence).
   The input column comes as Arrow batches (``mapInArrow``), each planned at
   once (numpy over each pair's ``api.PlanTable``);
3. the values go to their file's task packed: each input partition sends
   one row per file it has values for (``shuffle.pack``: their planned rows as
   Arrow), not one per value, and ``repartition(n, file)`` moves those. The
   task gathers each file's rows from every partition and answers them
   together: ``locate_columns`` answers a file's
   many GTIDs as columns by one pass over its groups (``Binlog.group_records``,
   the group walk in C where it is built; a pass costs what ~2000 index
   lookups cost on a 256 MiB file), taught the plan's ranges (no walk);
   ``BinlogSeries.locate_many`` the others (few: index lookups), positions
   ``replica_start``.

Each row's answer is what ``gtidx.open(binlogs).locate(gtid)`` gives (a
position with several domains: ``replica_start``), found or not.

MySQL binlogs (the flavor of ``api.list_series``): the driver reads each file's
Previous_gtids, a row goes to the file holding its GTID (or, a GTID set, to
a replica's start file), and one task per file answers them
(``MysqlSeries.locate_many``: one pass over the file; ``replica_start``).

The package's modules, downwards: ``where`` (what executors need to open the
binlogs; their warnings), ``plan`` (the summaries and the assignment of
rows to files), ``shuffle`` (how rows move to their file's task),
``locate``, ``indexes`` (``build``), ``source`` (``format("gtidx")``),
``changes`` (``format("gtidx.changes")``), ``session`` (a quiet session,
``register``) and ``run`` (what the ``gtidx spark`` commands run).
"""
# The package's public names (gtidx.spark.X), as they were before it had modules.
from .indexes import BUILD_SCHEMA, build  # noqa: F401
from .locate import LOCATE_SCHEMA, PASS_PER_BYTE, locate, locate_columns  # noqa: F401
from .plan import ASSIGNED, ASSIGNED_NAMES  # noqa: F401
from .run import SparkProgress, build_rows, locate_to_parquet, read_gtids  # noqa: F401
from .session import JVM_NOTES, LOOPBACK, QUIET_LOG4J, register, session  # noqa: F401
from .shuffle import PACK_ROWS, PACKED, TASKS_PER_CORE  # noqa: F401
from .source import GROUPS_SCHEMA, GtidxDataSource  # noqa: F401
from .where import say_warnings, warnings_accumulator  # noqa: F401

__all__ = ["locate", "build", "register", "session", "read_gtids", "locate_to_parquet", "build_rows",
           "GtidxDataSource", "SparkProgress",
           "LOCATE_SCHEMA", "BUILD_SCHEMA"]
