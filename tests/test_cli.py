"""The command line: output shapes scripts rely on, exit codes, one-line errors."""
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from gtidx.cli import cli
from gtidx.gtid import BinlogState, Position

M118 = FIXTURES / "mariadb-11.8"
XA = M118 / "xa" / "master-bin.000006"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def oracle_groups(path):
    o = json.loads((path.parent / "oracle.json").read_text())
    return next(f for f in o["files"] if f["name"] == path.name)


def test_scan_json_shape():
    r = run("scan", "--json", XA)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["file"] == str(XA)
    assert [[g["gtid"], g["start"], g["end"]] for g in doc["groups"]] == oracle_groups(XA)["groups"]
    assert doc["count"] == len(doc["groups"]) == 600
    assert BinlogState.parse(doc["start_state"])


def test_scan_text():
    r = run("scan", XA)
    assert r.exit_code == 0
    lines = r.output.splitlines()
    assert lines[2].split() == ["GTID", "START", "END"]
    assert lines[3].split() == ["0-1-1035", "423", "766"]
    assert lines[-1] == "# 600 groups"


def test_pos_json_shape():
    entry = oracle_groups(XA)
    offset, answer = next((o, a) for o, a in entry["pos"] if a is not None and o > 10000)
    r = run("pos", "--json", XA, offset)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["file"] == str(XA) and doc["offset"] == offset and doc["via"] == "scan"
    assert Position.parse(doc["position"]) == Position.parse(answer)
    state = BinlogState.parse(doc["state"])
    assert state.position() == Position.parse(answer)
    assert len(state) >= len(Position.parse(answer))


def test_pos_text_and_hex_offset():
    r1 = run("pos", XA, 423)
    r2 = run("pos", XA, "0x1a7")
    assert r1.exit_code == r2.exit_code == 0
    assert r1.output == r2.output
    assert Position.parse(r1.output.strip()) == Position.parse("1-1-902,2-2-881,0-1-1034")


@pytest.mark.parametrize("args, code, text", [
    (["pos", XA, 424], 1, "not the start of an event"),
    (["pos", XA, 10**9], 1, "past the end"),
    (["pos", XA, "abc"], 2, "is not an offset"),
    (["pos", XA], 2, "Missing argument"),
    (["scan", "/nonexistent/binlog"], 3, "No such file"),
    (["frobnicate"], 2, "No such command"),
])
def test_exit_codes_and_one_line_errors(args, code, text):
    r = run(*args)
    assert r.exit_code == code, r.output
    assert text in r.output
    assert "Traceback" not in r.output


def test_not_a_binlog_is_bad_input(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello\n" * 20)
    r = run("scan", p)
    assert r.exit_code == 2
    assert r.output.startswith("gtidx: ") and r.output.count("\n") == 1


def test_corrupt_binlog_exit_code(tmp_path):
    data = bytearray(XA.read_bytes())[:-7]
    p = tmp_path / "master-bin.000001"
    p.write_bytes(bytes(data))
    r = run("scan", p)
    assert r.exit_code == 3
    assert "closed binlog" in r.output and "Traceback" not in r.output


def test_console_script_end_to_end_and_closed_pipe():
    # The installed entry point, in a real process: a closed pipe is quiet (141).
    p = subprocess.run(f"{sys.executable} -m gtidx scan {XA} | head -1", shell=True,
                       capture_output=True, text=True, executable="/bin/bash")
    assert p.stdout.startswith("# ") and p.stderr == ""
    p = subprocess.run([sys.executable, "-m", "gtidx", "pos", str(XA), "5"], capture_output=True, text=True)
    assert p.returncode == 1 and p.stderr.startswith("gtidx: ") and p.stdout == ""
