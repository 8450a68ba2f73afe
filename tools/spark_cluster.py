"""A Spark standalone cluster for tests and benchmarks: one master and one
worker, each its own JVM started from the PySpark install
(``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``),
in its own process group, everything on 127.0.0.1 (the master, the worker,
their web UIs; the master's REST submission server is off).

    cluster = StandaloneCluster(tmp, cores=2, env=env)   # returns once the worker registered
    session = gtidx.spark.session(cluster.url, conf={"spark.submit.pyFiles": str(gtidx_zip(tmp / "g.zip"))})
    ...
    cluster.stop()                                       # no JVM left behind

``gtidx_zip`` packs this checkout's gtidx for the executors (--py-files);
``node_python`` is an interpreter for them that has the installed packages
but not gtidx, as a node where gtidx is not installed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

from tools.mariadb import _free_port as free_port

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"


def spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).parent


def _daemon(kind: str, args: list[str], log: Path, env: dict) -> subprocess.Popen:
    """``spark-class org.apache.spark.deploy.KIND`` in the foreground, in its own process group."""
    return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), f"org.apache.spark.deploy.{kind}", *args],
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def stop_daemon(proc: subprocess.Popen) -> None:
    """SIGTERM to the daemon's process group (spark-class, its JVM, a worker's
    executors), SIGKILL to what is left after 20 s; returns when the group is gone."""
    if group_alive(proc.pid):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while group_alive(proc.pid):
        proc.poll()                      # reap spark-class itself
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.1)
    proc.wait()


class StandaloneCluster:
    """A master and one worker (``cores``, ``memory``) under ``tmp`` (logs,
    conf, work dir). ``env``: the daemons' environment (default: this
    process's), to which the SPARK_* settings are added."""

    def __init__(self, tmp: Path, cores: int = 4, memory: str = "2g", env: dict | None = None,
                 timeout: float = 120):
        self.tmp = tmp = Path(tmp)
        env = dict(os.environ if env is None else env)
        env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP=LOOPBACK, SPARK_NO_DAEMONIZE="1",
                   SPARK_LOG_DIR=str(tmp), SPARK_CONF_DIR=str(tmp / "conf"),
                   SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
        (tmp / "conf").mkdir(parents=True, exist_ok=True)
        port, ui, wport, wui = (free_port() for _ in range(4))
        self.url = f"spark://{LOOPBACK}:{port}"
        self.ui = f"http://{LOOPBACK}:{ui}"
        self.master = _daemon("master.Master", ["--host", LOOPBACK, "--port", str(port), "--webui-port", str(ui)],
                              tmp / "master.log", env)
        self.worker = _daemon("worker.Worker", ["--host", LOOPBACK, "--port", str(wport), "--webui-port", str(wui),
                                                "--cores", str(cores), "--memory", memory,
                                                "--work-dir", str(tmp / "work"), self.url], tmp / "worker.log", env)
        deadline = time.monotonic() + timeout
        while True:
            try:
                state = json.load(urllib.request.urlopen(f"{self.ui}/json/", timeout=2))
                if state.get("aliveworkers") == 1:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.master.poll() is not None or self.worker.poll() is not None:
                self.stop()
                logs = [(tmp / n).read_text()[-1500:] for n in ("master.log", "worker.log")]
                raise RuntimeError("the standalone cluster did not come up: " + "\n".join(logs))
            time.sleep(0.3)

    def stop(self) -> None:
        for p in (self.worker, self.master):
            stop_daemon(p)

    def alive(self) -> list[int]:
        """The process groups (master, worker and its executors) still alive."""
        return [p.pid for p in (self.master, self.worker) if group_alive(p.pid)]


def gtidx_zip(dest: Path, root: Path = ROOT) -> Path:
    """``root``'s gtidx package as a zip for the executors (``spark.submit.pyFiles`` / ``--py-files``)."""
    with zipfile.ZipFile(dest, "w") as z:
        for f in sorted((Path(root) / "gtidx").rglob("*.py")):
            z.write(f, f.relative_to(root).as_posix())
    return dest


def node_python(tmp: Path) -> Path:
    """The executors' Python: this one with its packages (pyspark, pyarrow,
    s3fs...) but without gtidx, as a node where gtidx is not installed has
    it: ``-S`` skips the site hooks, among them the editable install's
    finder of the checkout (which would win over the shipped zip), and the
    packages are on PYTHONPATH as a plain directory."""
    import sysconfig
    wrapper = Path(tmp) / "node-python"
    site = sysconfig.get_paths()["purelib"]
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    return wrapper
