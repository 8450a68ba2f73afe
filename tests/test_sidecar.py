"""gtidx tail in production: woken by inotify beside a live MariaDB 10.11
(a write, a rotation), polling where forced, its /metrics (read with
prometheus_client's own parser) and /healthz after a known history, SIGTERM
with the metrics thread running (prompt exit, port released, the index
consistent), gtidx status --check's exit codes, the systemd unit
(systemd-analyze verify) and the Kubernetes example (valid YAML)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, growing_copy
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.index.files import IndexMeta
from gtidx.index.reader import IndexReader

UNIT = ROOT / "contrib" / "systemd" / "gtidx-tail@.service"
KUBE = ROOT / "contrib" / "kubernetes"
SOURCE = FIXTURES / "mariadb-10.11" / "nonmono" / "master-bin.000008"


class TailProcess:
    """`gtidx tail DIR --metrics 127.0.0.1:0 ...`: its log in a file, its port from the log."""

    def __init__(self, directory: Path, log: Path, *extra: str, env: dict | None = None):
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gtidx", "tail", str(directory), "--metrics", "127.0.0.1:0", *extra],
            stdout=subprocess.DEVNULL, stderr=open(log, "w"), cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        self.wait_for("event=start")
        self.port = int(re.search(r"event=metrics listen=127\.0\.0\.1:(\d+)", self.log.read_text()).group(1))

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no {text!r} in: {self.log.read_text()[-3000:]}"
            time.sleep(0.02)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def metrics(self) -> dict:
        """{(name, labels as a sorted tuple): value}, parsed by prometheus_client."""
        from prometheus_client.parser import text_string_to_metric_families
        code, text = self.get("/metrics")
        assert code == 200
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for fam in text_string_to_metric_families(text) for s in fam.samples}

    def lag(self, binlog: Path):
        """The binlog's lag in bytes as /metrics says (None: not listed yet)."""
        return self.metrics().get(("gtidx_tail_lag_bytes", (("file", binlog.name),)))

    def stop(self) -> float:
        """SIGTERM: it exits 0; the seconds that took. The port is free again."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=30)
        took = time.monotonic() - t0
        assert rc == 0, self.log.read_text()[-3000:]
        assert "event=stop" in self.log.read_text()
        with socket.socket() as s:                     # released: a new server can listen there
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", self.port))
            s.listen()
        return took


def wait_until(cond, timeout: float, step: float = 0.002) -> float:
    """Seconds until ``cond()`` held (fails after ``timeout``)."""
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(step)
    return time.monotonic() - t0


def indexed(tail: TailProcess, binlog: Path, size: int):
    """Is ``binlog`` indexed up to ``size``, as /metrics says? A lag of 0
    bytes, the size taken when scraped: at least ``size`` (it only grows;
    another test's writes may have made it longer)."""
    assert binlog.stat().st_size >= size
    return lambda: tail.lag(binlog) == 0


# -- beside a live MariaDB 10.11: inotify --------------------------------------------------

@pytest.fixture(scope="module")
def live_tail(live_server, tmp_path_factory):
    """One tail (inotify; polls every 30 s, looks again every 30 s) of the
    live server's binlog directory, with --metrics, for the module's tests;
    stopped by SIGTERM at the end, which must be prompt and leave the index
    of the growing binlog serving the answers of a scan."""
    srv = live_server
    srv.sql("CREATE DATABASE IF NOT EXISTS gtidx_sidecar")
    srv.sql("CREATE TABLE IF NOT EXISTS gtidx_sidecar.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200))")
    srv.sql("FLUSH BINARY LOGS")
    log = tmp_path_factory.mktemp("sidecar") / "tail.log"
    tail = TailProcess(srv.binlog_dir, log, "--interval", "30", "--repoll", "30", "--max-lag", "30")
    tail.wait_for("event=following")
    yield srv, tail
    took = tail.stop()
    assert took < 5, f"SIGTERM took {took:.1f} s"
    active = srv.binlog_dir / srv.sql("SHOW MASTER STATUS")[0][0]
    with Binlog(str(active)) as b:
        ends = [e for _, e, _ in b.group_spans()]
    with api.BinlogSeries([str(active)]) as logs, api.BinlogSeries([str(active)], use_index=False) as scan:
        for off in ends[-5:]:
            assert logs.state_at(str(active), off).state == scan.state_at(str(active), off).state


def _write(srv, n: int = 1) -> tuple[Path, int]:
    """n committed transactions; the active binlog and its size after them."""
    conn = srv.connect()
    with conn.cursor() as cur:
        for i in range(n):
            cur.execute("INSERT INTO gtidx_sidecar.t (v) VALUES (%s)", (f"row {i}",))
            conn.commit()
        cur.execute("SHOW MASTER STATUS")
        name, pos = cur.fetchone()[:2]
    conn.close()
    return srv.binlog_dir / name, pos


def test_inotify_wakes_the_tail_on_a_write_and_a_rotation(live_tail):
    """A commit is indexed well within a second though the tail polls every
    30 s: inotify woke it. So is a new binlog after FLUSH BINARY LOGS."""
    srv, tail = live_tail
    assert "event=polling" not in tail.log.read_text()
    waits = []
    for _ in range(3):
        active, pos = _write(srv)
        waits.append(wait_until(indexed(tail, active, pos), timeout=10))
    srv.sql("FLUSH BINARY LOGS")
    active, pos = _write(srv)
    waits.append(wait_until(indexed(tail, active, pos), timeout=10))
    assert max(waits) < 1.0, waits


def test_live_metrics_and_health(live_tail):
    """/metrics after a write: the active binlog's lag is 0 bytes, every
    listed binlog has a series, the bytes indexed grew by at least the
    write, the tail says it is woken by inotify; /healthz is 200."""
    srv, tail = live_tail
    before = tail.metrics()[("gtidx_tail_indexed_bytes_total", ())]
    start = _write(srv)[1]
    active, pos = _write(srv, 20)
    wait_until(indexed(tail, active, pos), timeout=10)
    m = tail.metrics()
    listed = [r[0] for r in srv.sql("SHOW BINARY LOGS")]
    assert {dict(k[1])["file"] for k in m if k[0] == "gtidx_tail_lag_bytes"} == set(listed)
    assert m[("gtidx_tail_lag_bytes", (("file", active.name),))] == 0
    assert m[("gtidx_tail_lag_seconds", (("file", active.name),))] == 0
    assert m[("gtidx_tail_indexed_bytes_total", ())] - before >= pos - start
    assert m[("gtidx_tail_files", ())] == len(listed)
    assert m[("gtidx_tail_watch_info", (("watch", "inotify"),))] == 1
    assert m[("gtidx_tail_failing", ())] == 0
    assert time.time() - m[("gtidx_tail_last_success_timestamp_seconds", ())] < 60
    code, body = tail.get("/healthz")
    assert (code, json.loads(body)["status"]) == (200, "ok"), body


# -- polling (forced), a known history: exact metrics, /healthz 200 then 503 ---------------------

def test_forced_polling_metrics_and_health(tmp_path):
    """GTIDX_TAIL_WATCH=poll: one log line says it polls. A binlog written in
    three steps (a prefix at a group boundary, half of the next group, the
    rest, closed): /healthz 200, then 503 naming the file while half a
    group waits (--max-lag 0), then 200; at the end the metrics count
    exactly the finished index's records and the binlog's bytes."""
    data = SOURCE.read_bytes()
    with Binlog(str(SOURCE)) as b:
        spans = list(b.group_spans())
    d = tmp_path / "binlogs"
    d.mkdir()
    binlog = d / SOURCE.name
    (d / "master-bin.index").write_text(f"./{SOURCE.name}\n")
    cut = spans[len(spans) // 2][1]                       # a group's end
    binlog.write_bytes(growing_copy(data, cut))
    tail = TailProcess(d, tmp_path / "tail.log", "--interval", "0.05", "--max-lag", "0", "--page-size", "64",
                       "--span-min", "1", "--max-ratio", "1",
                       env={"GTIDX_TAIL_WATCH": "poll"})
    try:
        assert len(re.findall(r"event=polling .*why=asked", tail.log.read_text())) == 1
        wait_until(indexed(tail, binlog, cut), timeout=20)
        wait_until(lambda: tail.get("/healthz")[0] == 200, timeout=20)
        m = tail.metrics()
        assert m[("gtidx_tail_lag_bytes", (("file", binlog.name),))] == 0
        assert m[("gtidx_tail_watch_info", (("watch", "poll"),))] == 1
        time.sleep(0.05)                                   # the append's mtime after the index's advance
        half = (spans[len(spans) // 2 + 1][0] + spans[len(spans) // 2 + 1][1]) // 2
        binlog.write_bytes(growing_copy(data, half))       # half a group: nothing to index
        wait_until(lambda: tail.get("/healthz")[0] == 503, timeout=20)
        code, body = tail.get("/healthz")
        reasons = json.loads(body)["reasons"]
        assert [(r["file"], r["reason"], r["lag_bytes"]) for r in reasons] == [(str(binlog), "lagging", half - cut)]
        assert tail.metrics()[("gtidx_tail_lag_bytes", (("file", binlog.name),))] == half - cut
        binlog.write_bytes(data)                           # the rest, and the server closed it
        wait_until(lambda: getattr(IndexMeta.read(str(binlog) + ".idx"), "state", None) == "complete",
                   timeout=20)
        wait_until(lambda: tail.get("/healthz")[0] == 200, timeout=20)
        m = tail.metrics()
        records = len(list(IndexReader((d / (SOURCE.name + ".idx")).read_bytes()).records()))
        assert m[("gtidx_tail_records_total", ())] == records
        assert m[("gtidx_tail_indexed_bytes_total", ())] == len(data)
        assert m[("gtidx_tail_lag_bytes", (("file", binlog.name),))] == 0
    finally:
        took = tail.stop()
    assert took < 5


def test_metrics_needs_a_host(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gtidx", "tail", str(tmp_path), "--metrics", ":9108"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "HOST:PORT" in r.stderr and "Traceback" not in r.stderr, r.stderr


# -- status --check -------------------------------------------------------------------------

def gtidx(*args) -> None:
    from click.testing import CliRunner
    from gtidx.cli import cli
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert r.exit_code == 0, r.output


def _check(d: Path, *extra: str) -> tuple[int, str, dict]:
    """status --check, as one line and as JSON: (exit code, the line, the JSON)."""
    from click.testing import CliRunner
    from gtidx.cli import cli
    r = CliRunner().invoke(cli, ["status", "--check", *extra, str(d)])
    j = CliRunner().invoke(cli, ["status", "--check", "--json", *extra, str(d)])
    assert j.exit_code == r.exit_code and len(r.output.splitlines()) == 1, r.output
    return r.exit_code, r.output.strip(), json.loads(j.output)


def test_status_check_exit_codes(tmp_path):
    """0 OK with every index current; 1 WARNING with an index behind by more
    than --max-lag; 2 CRITICAL with a closed binlog's index gone for longer
    than --max-lag, a damaged catalog, or no directory at all."""
    d = tmp_path / "binlogs"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    gtidx("build", "--force", d)
    code, line, j = _check(d)
    assert (code, j["status"], j["reasons"]) == (0, "OK", []) and line.startswith("OK: 5 binlogs"), line

    # the newest binlog growing, indexed by the tail, then written more a minute later
    files = api.list_binlogs(d)
    newest = Path(files[-1])
    data = newest.read_bytes()
    with Binlog(str(newest)) as b:
        spans = list(b.group_spans())
        cut = spans[len(spans) // 2][1]
    (Path(str(newest) + ".idx")).unlink()
    newest.write_bytes(growing_copy(data, cut))
    gtidx("tail", "--once", "--page-size", "64", "--span-min", "1", d)
    assert IndexMeta.read(str(newest) + ".idx").partial
    newest.write_bytes(growing_copy(data, len(data)))
    later = time.time() + 120
    os.utime(newest, (later, later))
    code, line, j = _check(d, "--max-lag", "60")
    assert (code, j["status"]) == (1, "WARNING") and line.startswith("WARNING: ") and newest.name in line, line
    assert [(r["file"], r["state"]) for r in j["reasons"]] == [(str(newest), "partial")]
    assert _check(d, "--max-lag", "600")[0] == 0

    # a closed binlog without its index for long: CRITICAL (a warning elsewhere does not hide it)
    old = Path(files[1])
    Path(str(old) + ".idx").unlink()
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    code, line, j = _check(d, "--max-lag", "60")
    assert (code, j["status"]) == (2, "CRITICAL") and line.startswith("CRITICAL: ") and old.name in line, line
    assert {r["level"] for r in j["reasons"]} == {"WARNING", "CRITICAL"}

    # a damaged catalog
    e = tmp_path / "cat"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", e)
    gtidx("build", e)
    gtidx("catalog", "build", e)
    cat = next(e.glob("*catalog*.json"))
    assert _check(e)[0] == 0
    cat.write_text(cat.read_text()[:-20])
    code, line, j = _check(e)
    assert code == 2 and "catalog damaged" in line, line

    code, line, j = _check(tmp_path / "nothing-here")
    assert code == 2 and line.startswith("CRITICAL: ") and j["status"] == "CRITICAL", line


# -- deployment: the systemd unit, the Kubernetes example ----------------------------------------

def test_systemd_unit_verifies(tmp_path):
    """systemd-analyze verify passes on an instance of the unit, silent
    (tools/test installs Debian's systemd where it is missing). Only
    ExecStart's binary is this environment's gtidx: verify checks that it
    exists. The hardening the deployment relies on is there."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze missing: tools/test installs Debian's systemd package"
    text = UNIT.read_text()
    gtidx_bin = Path(sys.executable).parent / "gtidx"
    assert gtidx_bin.exists()
    instance = subprocess.run(["systemd-escape", "--path", "/var/lib/mysql/binlog"], capture_output=True,
                              text=True, check=True).stdout.strip()
    unit = tmp_path / f"gtidx-tail@{instance}.service"
    unit.write_text(text.replace("/usr/local/bin/gtidx", str(gtidx_bin)))
    r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert (r.returncode, r.stdout + r.stderr) == (0, ""), r.stdout + r.stderr
    for line in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ReadWritePaths=%f", "PrivateTmp=yes",
                 "ProtectHome=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "User=gtidx",
                 "Group=mysql", "--metrics ${GTIDX_METRICS}", "GTIDX_METRICS=127.0.0.1:"):
        assert line in text, line
    # broken on purpose, verify says so: the test would see a bad unit
    bad = tmp_path / f"gtidx-tail@{instance}x.service"
    bad.write_text(text.replace("/usr/local/bin/gtidx", "/nonexistent/gtidx"))
    assert subprocess.run([analyze, "verify", str(bad)], capture_output=True, text=True).returncode != 0


def test_kubernetes_example_is_valid_yaml():
    """The example parses (PyYAML, which the test extra brings with moto);
    the gtidx container shares the server's binlog volume, listens on
    loopback and is probed on /healthz."""
    import yaml
    docs = [doc for p in sorted(KUBE.glob("*.yaml")) for doc in yaml.safe_load_all(p.read_text())]
    assert docs
    pod = docs[0]["spec"]["template"]["spec"]
    gtidx, = [c for c in pod["containers"] if c["name"] == "gtidx"]
    server, = [c for c in pod["containers"] if c["name"] != "gtidx"]
    shared = {m["name"] for m in gtidx["volumeMounts"]} & {m["name"] for m in server["volumeMounts"]}
    assert shared == {"binlog"}
    assert gtidx["args"][gtidx["args"].index("--metrics") + 1].startswith("127.0.0.1:")
    for probe in ("readinessProbe", "livenessProbe"):
        assert "/healthz" in " ".join(gtidx[probe]["exec"]["command"])
