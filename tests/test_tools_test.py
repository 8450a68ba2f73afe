"""tools/test, the README's test command: with servers given it starts none,
and a run in which no test ran fails."""
from __future__ import annotations

import os
import subprocess
import sys

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
