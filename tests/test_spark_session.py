"""gs.session() keeps Spark on 127.0.0.1: the driver and block manager listen
on and advertise the loopback address (no "using <address> instead" fallback
to the machine's interface), unless the user names another address."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("pyspark", reason="the spark extra: pip install -e '.[spark]'")

# Runs in a fresh process (a fresh JVM, whose start-up log we read): the
# session's settings and every TCP port (driver RPC, block manager, workers) that the JVM, its Python workers and
# this process listen on.
PROBE = r"""
import json, os, sys
from gtidx import spark as gs

def listening(pids):
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    out = []
    for table in ("tcp", "tcp6"):
        for line in open(f"/proc/net/{table}").read().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:           # LISTEN
                out.append(f[1].split(":")[0])
    return out

def tree(pid):
    pids = [pid]
    for p in pids:
        try:
            kids = open(f"/proc/{p}/task/{p}/children").read().split()
        except OSError:
            kids = []
        pids += [int(k) for k in kids]
    return pids

kw = json.loads(sys.argv[1])
spark = gs.session("local[2]", **kw)
spark.range(100).repartition(2).selectExpr("sum(id)").collect()     # workers and shuffle up
conf = spark.sparkContext.getConf()
jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
print(json.dumps({
    "driver.host": conf.get("spark.driver.host"),
    "driver.bindAddress": conf.get("spark.driver.bindAddress"),
    "listening": listening(tree(jvm) + [os.getpid()]),
}))
spark.stop()
"""

LOOPBACK_HEX = {"0100007F", "0000000000000000FFFF00000100007F"}    # 127.0.0.1 in /proc/net/tcp{,6}


def probe(extra_env: dict, **kw) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}   # what a user's shell has
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra_env)
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(kw)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_session_listens_on_loopback_only():
    got, log = probe({})
    assert got["driver.host"] == got["driver.bindAddress"] == "127.0.0.1"
    assert got["listening"] and set(got["listening"]) <= LOOPBACK_HEX, got["listening"]
    assert not re.search(r"using \S+ instead", log), log
    assert "resolves to a loopback address" not in log


def test_user_names_the_driver_address():
    """A cluster user's choice wins (SPARK_LOCAL_IP, as `gtidx spark` users set
    it; 127.0.0.2 stands in for a real interface: it is on lo too)."""
    got, _ = probe({"SPARK_LOCAL_IP": "127.0.0.2"})
    assert got["driver.host"] == got["driver.bindAddress"] == "127.0.0.2"
    assert "0200007F" in got["listening"] or "0000000000000000FFFF00000200007F" in got["listening"]


def test_source_filter_that_matches_no_file(spark, tmp_path):
    """`file = 'master-bin.000042'` over binlogs without that file (the
    README's example on the demo binlogs): no rows, not a worker crash."""
    import shutil

    from conftest import FIXTURES
    d = tmp_path / "binlog"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    df = spark.read.format("gtidx").load(str(d))
    assert df.where("file = 'master-bin.000042' AND domain IN (1, 2)").count() == 0
    assert df.where("file = 'master-bin.000020' AND domain IN (1, 2)").count() > 0
