"""Making a quiet SparkSession for gtidx (no UI, listening on the loopback
unless told otherwise, the driver JVM's start-up notes filtered out of its
stderr, log4j at errors only) and registering gtidx's data sources."""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from .changes import ChangesDataSource
from .source import GtidxDataSource


def register(spark: SparkSession) -> None:
    """Register ``format("gtidx")`` and ``format("gtidx.changes")`` (row
    changes, ``gtidx.changes``), and let their filters be pushed down."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(GtidxDataSource)
    spark.dataSource.register(ChangesDataSource)


LOOPBACK = "127.0.0.1"


def session(master: str = "local[*]", app: str = "gtidx", host: str | None = None,
            conf: dict | None = None) -> SparkSession:
    """A SparkSession for gtidx's CLI: quiet, no UI, pushdown on, source registered.

    The driver and its block manager listen on and advertise ``host``: by
    default $SPARK_LOCAL_IP when set, else 127.0.0.1, so that a session opens
    no port on the machine's network interfaces. On a cluster, whose executors
    must reach the driver, give the driver's address: ``session(master,
    host="10.0.0.5")``, or ``SPARK_LOCAL_IP=10.0.0.5 gtidx spark ...``; or build
    your own SparkSession and call ``register(spark)``. Local sessions run their
    Python workers with this interpreter unless $PYSPARK_PYTHON names another.
    ``conf``: more Spark settings (``{"spark.submit.pyFiles": "gtidx-py.zip",
    "spark.executorEnv.AWS_ENDPOINT_URL": ...}``).
    """
    host = host or os.environ.get("SPARK_LOCAL_IP") or LOOPBACK
    os.environ.setdefault("SPARK_LOCAL_IP", host)          # read by the JVM when it starts
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {"spark.driver.host": host, "spark.driver.bindAddress": host, "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",      # the CLI draws its own (or none: --quiet)
                "spark.sql.python.filterPushdown.enabled": "true",
                # the driver logs errors only (Spark's default profile prints notes at start-up)
                "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:" + QUIET_LOG4J,
                **(conf or {})}
    spark_conf = SparkConf().setMaster(master).setAppName(app).setAll(list(settings.items()))
    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        SparkContext(conf=spark_conf, gateway=_quiet_gateway(spark_conf))   # the JVM this process starts
    spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


@contextmanager
def own_session(master: str):
    """``session(master)`` for a command run: stopped at the end only if this
    run started it. A caller's session (a Python program or notebook calling
    the CLI's functions in its own process) is reused and left running."""
    started = SparkContext._active_spark_context is None
    spark = session(master)
    try:
        yield spark
    finally:
        if started:
            spark.stop()


QUIET_LOG4J = os.path.join(os.path.dirname(__file__), "spark-log4j2.properties")
# What the driver JVM prints on stderr when it starts, outside any logger's level: Spark's
# launcher adds --add-modules=jdk.incubator.vector and the JVM says so; Spark's logging, in
# a Python driver, says which level it set and how to change it.
JVM_NOTES = (b"WARNING: Using incubator modules", b'Setting default log level to "',
             b"To adjust logging level use sc.setLogLevel(")


def _quiet_gateway(conf):
    """The py4j gateway with the driver JVM's stderr read through a pipe:
    every line goes on to our stderr but the JVM's own start-up notes
    (``JVM_NOTES``). pyspark's ``launch_gateway(popen_kwargs=...)``."""
    r, w = os.pipe()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": w})
    finally:
        os.close(w)

    def forward():
        with os.fdopen(r, "rb") as lines:
            for line in lines:
                if not line.startswith(JVM_NOTES):
                    sys.stderr.buffer.write(line)
                    sys.stderr.flush()
    threading.Thread(target=forward, name="gtidx-jvm-stderr", daemon=True).start()
    return gateway
