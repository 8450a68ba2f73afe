"""Spark on a real cluster (issue 13): a standalone master and one worker,
each its own JVM started from the PySpark install, and a moto_server; the
binlogs are only in the object store. Executors get gtidx as a zip
(``spark.submit.pyFiles`` / ``--py-files``, nothing on the worker's
PYTHONPATH) and reach the store either with the ``storage_options`` shipped
in the job or with AWS_* variables given as ``spark.executorEnv.*``: the
worker itself has no AWS_* variable. Every row equals the library's answer.

Everything listens on 127.0.0.1 only: the master, the worker, their web UIs
(the master's /json/ tells when the worker registered), the driver and the
S3 server; the master's REST submission server is off."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

pyspark = pytest.importorskip("pyspark", reason="the spark extra: pip install -e '.[spark]'")
pytest.importorskip("boto3")
pytest.importorskip("s3fs")
from test_spark import library_row, probes  # noqa: E402
from tools.s3server import AWS_ENV, MotoServer  # noqa: E402
from tools.spark_cluster import LOOPBACK, StandaloneCluster, gtidx_zip, node_python  # noqa: E402

import gtidx  # noqa: E402
import gtidx.spark as gs  # noqa: E402
from gtidx import api  # noqa: E402
from gtidx.binlog.mariadb import Binlog  # noqa: E402

BUCKET = "gtidx-cluster"
SETS = [FIXTURES / "mariadb-10.11" / "multifile", FIXTURES / "mariadb-10.11" / "nonmono"]
NO_AWS = [*AWS_ENV, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE",
          "AWS_SHARED_CREDENTIALS_FILE", "AWS_REGION"]


class Cluster:
    """The standalone cluster (tools/spark_cluster.py) and a moto_server with the sets in a bucket."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.s3 = MotoServer(tmp)
        # what executors need to reach the store, in the job (the worker has no AWS_* variable)
        self.options = self.s3.storage_options()
        self.zip = gtidx_zip(tmp / "gtidx-py.zip")
        env = {k: v for k, v in os.environ.items() if k not in NO_AWS and k != "PYTHONPATH"}
        try:
            self.spark = StandaloneCluster(tmp, cores=4, memory="2g", env=env)
        except BaseException:
            self.s3.stop()
            raise
        self.url = self.spark.url
        self.master, self.worker = self.spark.master, self.spark.worker
        self.client = self.s3.bucket(BUCKET)
        for d in SETS:
            for f in api.list_binlogs(d):
                self.client.put_object(Bucket=BUCKET, Key=f"{d.name}/{Path(f).name}", Body=Path(f).read_bytes())

    def objects(self, prefix: str) -> list[str]:
        got = self.client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
        return sorted(o["Key"].rsplit("/", 1)[1] for o in got)

    def stop(self) -> None:
        self.spark.stop()
        self.s3.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    saved = {k: os.environ.get(k) for k in [*NO_AWS, "PYSPARK_PYTHON"]}
    for k in NO_AWS:                     # the driver too reaches the store by storage_options alone
        os.environ.pop(k, None)
    tmp = tmp_path_factory.mktemp("cluster")
    os.environ["PYSPARK_PYTHON"] = str(node_python(tmp))    # the Python the executors run: the nodes' own
    c = Cluster(tmp)
    try:
        yield c
    finally:
        c.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        # no JVM left behind: the master's and the worker's process groups (executors included) are gone
        left = c.spark.alive()
        assert not left, f"process groups still alive: {left}"


@pytest.fixture(scope="module")
def spark(cluster):
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()                    # a local session of another test module: one context per process
    session = gs.session(cluster.url, app="gtidx-cluster-tests",
                         conf={"spark.submit.pyFiles": str(cluster.zip), "spark.cores.max": "2",
                               "spark.executor.memory": "512m"})
    # spark.submit.pyFiles is read when the JVM starts: in a process whose JVM
    # an earlier test module started, ship the zip the run-time way
    session.sparkContext.addPyFile(str(cluster.zip))
    yield session
    session.stop()


def test_executors_import_the_shipped_gtidx_and_have_no_aws_variables(spark, cluster):
    def probe(_):
        import gtidx as g
        return [(g.__file__, sorted(k for k in os.environ if k in NO_AWS))]
    where, aws = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0]
    assert "gtidx-py.zip" in where and not aws


def test_build_locate_and_data_source_on_the_cluster(spark, cluster):
    opts = cluster.options
    t0 = time.perf_counter()
    for d in SETS:
        url = f"s3://{BUCKET}/{d.name}/"
        rows = gs.build(spark, url, storage_options=opts, max_ratio=None).collect()
        names = [Path(f).name for f in api.list_binlogs(d)]
        assert [r.action for r in rows] == ["built"] * len(names), rows
        assert all(r["index"].startswith(url) for r in rows)
        assert set(cluster.objects(d.name + "/")) >= {*names, *(n + ".idx" for n in names)}
    build_s = time.perf_counter() - t0

    for d in SETS:
        url = f"s3://{BUCKET}/{d.name}/"
        values = probes(d)       # every GTID of the set, never written, purged, malformed, positions
        df = spark.createDataFrame([(v,) for v in values], "gtid string")
        t0 = time.perf_counter()
        rows = gs.locate(spark, df, url, storage_options=opts).collect()
        locate_s = time.perf_counter() - t0
        assert len(rows) == len(values)
        with gtidx.open(url, storage_options=opts) as logs:
            for r in rows:
                assert r.file is None or r.file.startswith(url)
                mine = (r.file, r.start, r.end, r.resume, r.timestamp, r.first_gtid, r.found)
                assert mine == library_row(logs, r.gtid), r.gtid
        assert sum(not r.found for r in rows) >= 3 and sum(r.found for r in rows) >= len(values) - 10
        print(f"\n{d.name}: cluster locate of {len(values)} values {locate_s:.2f} s (build of both sets "
              f"{build_s:.2f} s)")

        src = spark.read.format("gtidx").option("storage_options", json.dumps(opts)).load(url)
        got = sorted((r.file, r.gtid, r.start, r.end, r.timestamp) for r in src.collect())
        want = []
        with gtidx.open(url, storage_options=opts) as logs:
            for f in logs.files:
                with Binlog(f, logs.store) as b:
                    want += [(Path(f).name, f"{dom}-{srv}-{seq}", s, e, ts)
                             for s, e, (ts, srv, seq, dom, _) in b.group_spans()]
        assert got == sorted(want) and len(got) > 10


def test_cli_spark_locate_on_the_cluster(spark, cluster, tmp_path):
    """``gtidx spark locate --master spark://... --binlogs s3://...``, run as on
    a cluster: gtidx shipped with --py-files, the credentials and endpoint as
    AWS_* variables for the driver and as spark.executorEnv.* for the
    executors (PYSPARK_SUBMIT_ARGS: what spark-submit's options become)."""
    d = SETS[0]
    url = f"s3://{BUCKET}/{d.name}/"
    values = probes(d) + ["0-1-99999999"]
    src = tmp_path / "gtids.txt"
    src.write_text("\n".join(values) + "\n")
    out = tmp_path / "out.parquet"
    aws = {**AWS_ENV, "AWS_ENDPOINT_URL": cluster.s3.url}
    del aws["AWS_SESSION_TOKEN"], aws["AWS_PROFILE"]
    submit = ["--py-files", str(cluster.zip), "--conf", "spark.cores.max=2", "--conf", "spark.executor.memory=512m",
              *[a for k, v in aws.items()
                                                for a in ("--conf", f"spark.executorEnv.{k}={v}")], "pyspark-shell"]
    env = {**{k: v for k, v in os.environ.items() if k not in NO_AWS}, **aws,
           "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": os.environ["PYSPARK_PYTHON"], "SPARK_LOCAL_IP": LOOPBACK,
           "PYSPARK_SUBMIT_ARGS": " ".join(submit)}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "gtidx", "spark", "locate", "--gtids", str(src), "--binlogs", url,
                        "--out", str(out), "--master", cluster.url, "--json"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    print(f"\nCLI spark locate on the cluster: {time.perf_counter() - t0:.2f} s (JVM start included)")
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    assert summary["rows"] == len(values)
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.gtid for r in rows if r.gtid is not None) == sorted(v for v in values)
    with gtidx.open(url, storage_options=cluster.options) as logs:
        for r in rows:
            mine = (r.file, r.start, r.end, r.resume, r.timestamp, r.first_gtid, r.found)
            assert mine == library_row(logs, r.gtid), r.gtid
    assert summary["found"] == sum(r.found for r in rows) and summary["not_found"] >= 4


@pytest.mark.parametrize("command", ["locate", "build"])
def test_cli_spark_url_errors_before_spark_starts(cluster, tmp_path, command):
    """--binlogs / BINLOGS as URLs with --storage-option: listed on the driver
    first, so a missing bucket is one line and exit 3 (no JVM started), and
    the options reach the store (without them the endpoint is unknown)."""
    src = tmp_path / "gtids.txt"
    src.write_text("0-1-1\n")
    url = "s3://no-such-bucket/binlogs/"
    args = (["locate", "--gtids", str(src), "--binlogs", url, "--out", str(tmp_path / "o.parquet")]
            if command == "locate" else ["build", url])
    opts = [a for k, v in cluster.options.items() for a in ("--storage-option", f"{k}={v}")]
    env = {**{k: v for k, v in os.environ.items() if k not in NO_AWS}, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "gtidx", "spark", *args, "--master", cluster.url, *opts],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert p.returncode == 3, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "no-such-bucket" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def _readme_commands(body: str) -> list[list[str]]:
    """The commands of a README sh block (continuation lines joined), split as the shell would."""
    import shlex
    return [shlex.split(c) for c in body.replace("\\\n", " ").splitlines() if c.strip()]


class ClusterRecipe:
    """The README's "Run Spark on a cluster" recipe mapped onto the
    standalone cluster: the example's names (the master, the zip, the archive
    in moto_server; the job's s3a:// tables as local files) replaced, and what
    the recipe leaves to the site added: the credentials as
    spark.executorEnv.* (its step 2) and a share of the worker for each app."""

    def __init__(self, cluster, tmp: Path):
        import pandas as pd

        from test_readme import readme_blocks
        steps = [(lang, b) for section, lang, b, _ in readme_blocks() if section == "Run Spark on a cluster"]
        assert [lang for lang, _ in steps] == ["python", "sh", "sh"], steps
        (_, self.job), (_, self.submit), (_, self.cli) = steps
        self.cluster, self.tmp = cluster, tmp
        self.url = f"s3://{BUCKET}/{SETS[0].name}/"
        self.names = {"spark://spark-master:7077": cluster.url, "gtidx-py.zip": str(cluster.zip),
                      "https://minio.internal:9000": cluster.s3.url, "s3://archive/server1/": self.url,
                      "s3a://bucket/wanted.parquet": str(tmp / "wanted.parquet"),
                      "s3a://bucket/found.parquet": str(tmp / "found.parquet"),
                      "/shared/wanted.csv": str(tmp / "wanted.csv"), "/shared/found.parquet": str(tmp / "cli.parquet"),
                      "10.0.0.5": LOOPBACK, "locate_job.py": str(tmp / "locate_job.py")}
        self.values = probes(SETS[0])[:40] + ["0-1-99999999", "77-1-1"]
        pd.DataFrame({"gtid": self.values}).to_parquet(tmp / "wanted.parquet")
        (tmp / "wanted.csv").write_text("gtid\n" + "\n".join(self.values) + "\n")
        (tmp / "locate_job.py").write_text(self.mapped(self.job))
        aws = {k: v for k, v in AWS_ENV.items() if v}
        self.site = ["--conf", "spark.cores.max=2", "--conf", "spark.executor.memory=512m",
                     *[a for k, v in aws.items() for a in ("--conf", f"spark.executorEnv.{k}={v}")]]
        self.env = {**{k: v for k, v in os.environ.items() if k not in NO_AWS}, **aws,
                    "AWS_ENDPOINT_URL": cluster.s3.url, "PYTHONPATH": str(ROOT),
                    "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": LOOPBACK}

    def mapped(self, text: str) -> str:
        for k, v in self.names.items():
            text = text.replace(k, v)
        return text

    def run(self, argv: list[str], env: dict) -> None:
        log = self.tmp / "driver.log"
        with open(log, "w") as err:
            p = subprocess.run(argv, stdout=err, stderr=subprocess.STDOUT, cwd=self.tmp, env=env, timeout=280)
        assert p.returncode == 0, log.read_text()[-3000:]

    def check(self, out: str) -> None:
        """Every row of ``out`` equals the library's answer for its GTID."""
        import pyarrow.parquet as pq
        rows = pq.read_table(self.tmp / out).to_pylist()
        assert sorted(r["gtid"] for r in rows) == sorted(self.values), out
        with gtidx.open(self.url, storage_options=self.cluster.options) as logs:
            for r in rows:
                mine = (r["file"], r["start"], r["end"], r["resume"], r["timestamp"], r["first_gtid"], r["found"])
                assert mine == library_row(logs, r["gtid"]), (out, r["gtid"])


def test_readme_cluster_job(cluster, tmp_path):
    """The recipe's job file, submitted by its `spark-submit` line (PySpark's own)."""
    from tools.spark_cluster import spark_home
    recipe = ClusterRecipe(cluster, tmp_path)
    (argv,) = _readme_commands(recipe.mapped(recipe.submit))
    assert argv[0] == "spark-submit"
    recipe.run([str(spark_home() / "bin" / "spark-submit"), *recipe.site, *argv[1:]], recipe.env)
    recipe.check("found.parquet")


def test_readme_cluster_cli(cluster, tmp_path):
    """The recipe's `gtidx spark locate` line, its environment assignments
    (SPARK_LOCAL_IP, PYSPARK_SUBMIT_ARGS) included."""
    recipe = ClusterRecipe(cluster, tmp_path)
    (argv,) = _readme_commands(recipe.mapped(recipe.cli))
    assigned = dict(a.split("=", 1) for a in argv[:2])
    assert argv[2] == "gtidx" and set(assigned) == {"SPARK_LOCAL_IP", "PYSPARK_SUBMIT_ARGS"}, argv
    args = assigned["PYSPARK_SUBMIT_ARGS"].split()
    assert f"spark.executorEnv.AWS_ENDPOINT_URL={cluster.s3.url}" in args     # the executors' endpoint
    assigned["PYSPARK_SUBMIT_ARGS"] = " ".join([*args[:-1], *recipe.site, args[-1]])
    recipe.run([sys.executable, "-m", "gtidx", *argv[3:]], {**recipe.env, **assigned})
    recipe.check("cli.parquet")
