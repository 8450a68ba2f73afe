"""tools/test, the README's test command: with servers given it starts none,
and a run in which no test ran fails; tools/clean-servers, which removes what
its runs leave."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

TOOL = ROOT / "tools" / "test"


def run_tool(env_extra: dict, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable, **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run(["bash", str(TOOL), *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)


def test_no_tests_ran_is_a_failure(live_server):
    # Both sockets given (the 10.11 stands in for 11.8 here: only reachability is checked before pytest).
    r = run_tool({"GTIDX_TEST_SOCKET": live_server.socket, "GTIDX_M118_SOCKET": live_server.socket},
                 "--", "-q", "tests/test_tools_test.py", "-k", "no_test_has_this_name")
    assert r.returncode == 1, r.stderr
    assert "(given)" in r.stderr and "(started)" not in r.stderr
    assert "collected no tests: a failure" in r.stderr


def test_a_given_socket_must_answer(tmp_path):
    r = run_tool({"GTIDX_TEST_SOCKET": str(tmp_path / "none.sock")}, "-q")
    assert r.returncode == 2
    assert "no server answers there" in r.stderr


# -- tools/clean-servers, on a fake layout (never the real roots: others' servers run there) --------

CLEAN = ROOT / "tools" / "clean-servers"


def detached(argv: list[str]) -> int:
    """The pid of ``argv`` started in its own session and left to init, as
    the server scripts leave their servers (not a child of this process)."""
    out = subprocess.run(["setsid", "bash", "-c", '"$@" >/dev/null 2>&1 </dev/null & echo $!', "-", *argv],
                         capture_output=True, text=True, check=True).stdout
    return int(out)


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def mounted_under(path: Path) -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(f"{path}/")]


def fake_root(root: Path, srv: str, outside: Path) -> int:
    """A chroot like ../shared/tools' (srv/, proc and dev mounted: dev a bind
    of ``outside`` here) with a "server" chrooted in it, its pid in a pid
    file; its pid."""
    (root / srv).mkdir(parents=True)
    for binary in ["/usr/bin/sleep"] + re.findall(r"(/\S+) \(0x", subprocess.run(
            ["ldd", "/usr/bin/sleep"], capture_output=True, text=True, check=True).stdout):
        dest = root / binary.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(binary, dest)
    for m in ("proc", "dev"):
        (root / m).mkdir()
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)
    subprocess.run(["mount", "--bind", str(outside), str(root / "dev")], check=True)
    pid = detached(["chroot", str(root), "/usr/bin/sleep", "600"])
    (root / srv / "mysqld.pid").write_text(f"{pid}\n")
    return pid


def temp_dir(tmpdir: Path, name: str, owner: int) -> tuple[Path, int]:
    """A tools/test temp dir (its run's pid ``owner``) with a private
    "server" whose command line names its my.cnf, its pid in a pid file."""
    d = tmpdir / name
    (d / "mariadb").mkdir(parents=True)
    (d / "tools-test.pid").write_text(f"{owner}\n")
    pid = detached([sys.executable, "-c", "import time; time.sleep(600)", f"--defaults-file={d}/mariadb/my.cnf"])
    (d / "mariadb" / "mysqld.pid").write_text(f"{pid}\n")
    return d, pid


def test_clean_servers_stops_unmounts_and_removes_only_what_was_left(tmp_path):
    """Servers chrooted into the roots or named by their pid files stop, the
    roots' mounts go first (the bind-mounted directory behind dev keeps its
    files), the roots and a gone tools/test run's temp dir are removed; a
    running tools/test's temp dir and its server stay. --dry-run only says so."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sentinel").write_text("kept")
    m118, my97, tmpdir = tmp_path / "gtidx-ci-m118", tmp_path / "gtidx-my97", tmp_path / "tmp"
    gone_run = subprocess.Popen(["true"])
    gone_run.wait()
    pids = []
    try:
        pids.append(fake_root(m118, "srv/m118", outside))
        pids.append(fake_root(my97, "srv/my97/run", outside))
        gone, gone_pid = temp_dir(tmpdir, "gtidx-test.gone01", gone_run.pid)
        live, live_pid = temp_dir(tmpdir, "gtidx-test.live01", os.getpid())
        pids += [gone_pid, live_pid]
        env = dict(os.environ, GTIDX_M118_ROOT=str(m118), GTIDX_MY97_ROOT=str(my97), TMPDIR=str(tmpdir))

        r = subprocess.run(["bash", str(CLEAN), "--dry-run"], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        for pid in pids[:3]:
            assert f"would stop {pid}:" in r.stderr
        assert f"stop {live_pid}" not in r.stderr and f"{live}: its tools/test run is still going" in r.stderr
        assert f"would unmount {m118}/proc" in r.stderr and f"would remove {gone}" in r.stderr
        assert all(running(p) for p in pids) and len(mounted_under(tmp_path)) == 4 and gone.exists()

        r = subprocess.run(["bash", str(CLEAN), str(outside)], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 2 and "neither a server root" in r.stderr

        r = subprocess.run(["bash", str(CLEAN)], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        assert not any(running(p) for p in pids[:3]) and running(live_pid)
        assert mounted_under(tmp_path) == []
        assert not m118.exists() and not my97.exists() and not gone.exists() and live.exists()
        assert (outside / "sentinel").read_text() == "kept"
    finally:
        for pid in pids:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        for m in sorted(mounted_under(tmp_path), reverse=True):
            subprocess.run(["umount", "-l", m])
