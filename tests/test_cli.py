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
    doc = json.loads(r.stdout)
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
    doc = json.loads(r.stdout)
    # the 11.8 fixture carries the server's own .idx: gtidx reads it
    assert doc["file"] == str(XA) and doc["offset"] == offset and doc["via"] == "index"
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


# -- the index commands ------------------------------------------------------------------

import shutil  # noqa: E402

from gtidx.binlog.mariadb import Binlog  # noqa: E402


@pytest.fixture
def multifile(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(M118 / "multifile", d)
    for p in d.iterdir():
        p.chmod(0o644)
        if p.suffix == ".idx":
            p.unlink()
    return d


def test_build_json_then_skip(multifile):
    r = run("build", "--json", multifile)
    assert r.exit_code == 0, r.output
    results = json.loads(r.stdout)["results"]
    assert [x["action"] for x in results] == ["built"] * 5
    for x in results:
        assert x["index"] == x["binlog"] + ".idx" and x["size"] == x["pages"] * x["page_size"]
        assert set(x) >= {"records", "ratio", "server_layout", "over_budget", "seconds"}
    assert results[-1]["over_budget"] is True      # the 487-byte file: smallest valid index
    r = run("build", multifile)
    assert r.exit_code == 0 and r.output.count("skipped (index is valid and current)") == 5
    r = run("build", "--force", "--no-budget", "--page-size", "512", multifile / "master-bin.000020")
    assert r.exit_code == 0 and "pages of 512" in r.output


def test_build_reports_a_bad_file_and_goes_on(multifile, tmp_path):
    (multifile / "master-bin.index").unlink()
    (multifile / "master-bin.000024").write_bytes(b"not a binlog at all" * 10)
    r = run("build", multifile)
    assert r.exit_code == 2
    assert r.stdout.count(" records, ") == 5            # the five real binlogs still got indexes
    assert "master-bin.000024" in r.stderr and "not a binlog" in r.stderr


def test_seek_gtid_json_shape(multifile):
    run("build", multifile)
    r = run("seek", "--json", "--gtid", "0-2-7998", multifile)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {k: doc[k] for k in ("gtid", "start", "end", "resume", "via")} == {
        "gtid": "0-2-7998", "start": 1289, "end": 3621, "resume": 3621, "via": "index"}
    assert doc["file"].endswith("master-bin.000022")
    r = run("seek", "--gtid", "0-2-7998", multifile)
    assert r.output.startswith("0-2-7998 ") and "start 1289 end 3621" in r.output


def test_seek_position_gives_the_replica_start(multifile):
    r = run("seek", "--json", "--gtid", "0-1-7997,1-2-1878,2-1-1566,5-1-301", multifile)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["file"].endswith("master-bin.000022") and doc["via"] == "scan"
    assert doc["first"]["gtid"] == "0-2-7998" and doc["first"]["start"] == 1289
    assert Position.parse(doc["skip"]) == Position.parse("0-1-7997")


def test_seek_every_lists_a_gtid_logged_twice_in_one_binlog(tmp_path):
    """Issue 12 item 6: the 11.8 nonmono binlog logs 5-1-101 twice (seq_no
    set back, then up again, inside one file: its start and end states do not
    show it). seek answers the first; --every scans for all and lists them."""
    d = tmp_path / "nonmono"
    shutil.copytree(M118 / "nonmono", d)
    oracle = json.loads((d / "oracle.json").read_text())
    twice = [(s, e) for g, s, e in oracle["files"][0]["groups"] if g == "5-1-101"]
    assert len(twice) == 2
    r = run("seek", "--json", "--gtid", "5-1-101", d)
    assert r.exit_code == 0 and (json.loads(r.stdout)["start"], json.loads(r.stdout)["end"]) == twice[0]
    r = run("seek", "--json", "--every", "--gtid", "5-1-101", d)
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and (doc["start"], doc["end"]) == twice[0]
    assert [(o["start"], o["end"]) for o in doc["occurrences"]] == twice
    r = run("seek", "--every", "--gtid", "5-1-101", d)
    assert r.exit_code == 0 and "occurs 2 times" in r.stdout and f"{twice[1][0]}-{twice[1][1]}" in r.stdout
    r = run("seek", "--every", "--gtid", "5-1-99", d)
    assert r.exit_code == 1 and "all of them were scanned" in r.output


def test_seek_not_found_and_bad_gtid(multifile):
    r = run("seek", "--gtid", "0-1-5", multifile)
    assert r.exit_code == 1 and "purged" in r.output and "earliest state" in r.output
    r = run("seek", "--gtid", "0-1-", multifile)
    assert r.exit_code == 2 and "bad GTID" in r.output


def test_info_verify_dump(multifile):
    run("build", "--no-budget", multifile)
    idx = multifile / "master-bin.000020.idx"
    r = run("info", "--json", idx)
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["status"] == "ok" and doc["owner"] == "gtidx"
    assert doc["records"] == 11 and doc["levels"] == 1 and doc["page_size"] == 4096
    assert doc["ratio"] == pytest.approx(4096 / doc["binlog_size"], rel=1e-3)
    r = run("verify", idx)
    assert r.exit_code == 0 and "every record matches a scan" in r.output
    r = run("dump", idx)
    doc = json.loads(r.stdout)
    assert doc["page_size"] == 4096 and len(doc["records"]) == 11
    with Binlog(multifile / "master-bin.000020") as b:
        for rec in doc["records"]:
            assert BinlogState.parse(rec["state"]) == b.state_at(rec["offset"])


def test_verify_and_info_on_a_damaged_index(multifile):
    run("build", "--no-budget", multifile)
    idx = multifile / "master-bin.000021.idx"
    data = bytearray(idx.read_bytes())
    data[100] ^= 1
    idx.write_bytes(bytes(data))
    r = run("verify", idx)
    assert r.exit_code == 3 and "CRC32" in r.output and "Traceback" not in r.output
    r = run("pos", multifile / "master-bin.000021", 1295)
    assert r.exit_code == 0
    assert "gtidx: warning:" in r.output and "answering by scan" in r.output


def test_tail_once_and_status_json(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    last = sorted(d.glob("master-bin.0*"))[-1]
    data = bytearray(last.read_bytes())
    data[21] |= 1                              # the active binlog, still being written
    last.write_bytes(bytes(data[:len(data) // 2]))
    r = run("status", "--json", d)
    rows = json.loads(r.stdout)["files"]
    assert r.exit_code == 0 and [x["state"] for x in rows] == ["missing"] * 5
    r = run("tail", "--once", "--page-size", "256", "--span-min", "4096", d)
    assert r.exit_code == 0, r.output
    assert "event=start" in r.stderr and "event=stop" in r.stderr and "event=built" in r.stderr
    rows = json.loads(run("status", "--json", d).stdout)["files"]
    assert [x["state"] for x in rows] == ["complete"] * 4 + ["partial"]
    assert set(rows[0]) >= {"file", "size", "state", "indexed_to", "lag_bytes", "lag_seconds"}
    assert rows[0]["lag_bytes"] == 0 and rows[-1]["indexed_to"] > 0
    r = run("status", d)
    assert r.exit_code == 0 and "partial" in r.stdout and "INDEXED TO" in r.stdout


def test_status_of_server_indexes():
    rows = json.loads(run("status", "--json", M118 / "multifile").stdout)["files"]
    assert {x["state"] for x in rows} == {"server-owned"}


def test_spark_commands_without_pyspark_say_how_to_get_it(monkeypatch, tmp_path):
    import gtidx
    monkeypatch.setitem(sys.modules, "gtidx.spark", None)      # as if the extra were not installed
    monkeypatch.delattr(gtidx, "spark", raising=False)         # (an earlier test may have imported it)
    r = run("spark", "build", tmp_path)
    assert r.exit_code == 2
    assert r.output.strip().startswith("gtidx: gtidx spark needs PySpark")
    assert "pip install 'gtidx[spark]'" in r.output and "Traceback" not in r.output


# -- errors: one rule for every command, JSON errors, stdout failures -----------------------------

def commands():
    """(name, command) of every command, spark's included."""
    out = []
    for name in cli.list_commands(None):
        cmd = cli.get_command(None, name)
        if hasattr(cmd, "commands"):
            out += [(f"{name} {sub}", c) for sub, c in cmd.commands.items()]
        else:
            out.append((name, cmd))
    return out


def test_every_command_takes_json():
    assert len(commands()) == 17
    for name, cmd in commands():
        assert "--json" in [o for p in cmd.params for o in p.opts], name


def test_dump_accepts_json(multifile):
    run("build", "--no-budget", multifile)
    idx = multifile / "master-bin.000020.idx"
    r1, r2 = run("dump", idx), run("dump", "--json", idx)
    assert r1.exit_code == r2.exit_code == 0, r2.output
    assert r1.stdout == r2.stdout and len(json.loads(r2.stdout)["records"]) == 11


MISSING = "/nonexistent/dir/master-bin.000001"
MISSING_CASES = {
    "scan": ["scan", MISSING],
    "pos": ["pos", MISSING, 4],
    "probe": ["probe", MISSING, 4],
    "seek": ["seek", "--gtid", "0-1-1", MISSING],
    "show": ["show", MISSING, 4],
    "changes": ["changes", MISSING],
    "build": ["build", MISSING],
    "verify": ["verify", MISSING + ".idx"],
    "info": ["info", MISSING + ".idx"],
    "dump": ["dump", MISSING + ".idx"],
    "tail": ["tail", "--once", MISSING],
    "status": ["status", MISSING],
    "serve": ["serve", MISSING, "--port", "0", "--no-auth"],
    "catalog build": ["catalog", "build", MISSING],
    "catalog show": ["catalog", "show", MISSING],
    "spark locate": ["spark", "locate", "--gtids", MISSING, "--binlogs", XA, "--out", "/nonexistent/o.parquet"],
    "spark build": ["spark", "build", MISSING],
}


@pytest.mark.parametrize("name", sorted(MISSING_CASES))
def test_a_missing_path_is_exit_3_and_one_line_for_every_command(name):
    assert set(MISSING_CASES) == {n for n, _ in commands()}
    r = run(*MISSING_CASES[name])
    assert r.exit_code == 3, r.output
    assert r.stdout == "" and r.stderr.count("\n") == 1
    assert r.stderr.startswith("gtidx: /nonexistent/") and "No such file or directory" in r.stderr


def _json_error(r, code):
    assert r.exit_code == code, r.output
    doc = json.loads(r.stdout)
    assert set(doc) == {"error"}
    err = doc["error"]
    assert set(err) >= {"message", "path", "offset", "hint", "exit_code"} and err["exit_code"] == code
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gtidx: ")
    return err


@pytest.mark.parametrize("name", sorted(MISSING_CASES))
def test_json_failure_is_a_json_error_object(name):
    r = run(*MISSING_CASES[name], "--json")
    if name == "build":          # per-file results: the error entry names its binlog
        doc = json.loads(r.stdout)
        assert r.exit_code == 3 and doc["results"][0]["binlog"] == MISSING
        assert doc["results"][0]["error"]["exit_code"] == 3
        return
    err = _json_error(r, 3)
    assert err["path"].startswith("/nonexistent/") and err["message"] == "No such file or directory"


@pytest.mark.parametrize("args, code, text", [
    (["pos", "--json", XA, 424], 1, "not the start of an event"),
    (["pos", "--json", XA, "abc"], 2, "is not an offset"),
    (["seek", "--json", "--gtid", "0-1-", XA], 2, "bad GTID"),
    (["scan", "--json", XA, "--frobnicate"], 2, "No such option"),
    (["pos", "--json", XA], 2, "Missing argument"),
    (["frobnicate", "--json"], 2, "No such command"),
])
def test_json_errors_of_every_kind(args, code, text):
    err = _json_error(run(*args), code)
    assert text in err["message"]


def test_json_internal_error_is_json_too(monkeypatch):
    from gtidx import api
    monkeypatch.setattr(api, "state_at", lambda *a, **k: 1 / 0)     # a bug, as a stand-in
    err = _json_error(run("pos", "--json", XA, 423), 3)
    assert err["message"].startswith("internal error: ZeroDivisionError")


def test_scan_json_of_a_truncated_binlog_is_closed_with_the_error(tmp_path):
    p = tmp_path / "master-bin.000006"
    p.write_bytes(XA.read_bytes()[:30000])          # a partial copy, cut inside an event
    r = run("scan", "--json", p)
    assert r.exit_code == 3
    doc = json.loads(r.stdout)                      # valid JSON: the groups before the cut, then the error
    assert doc["count"] == len(doc["groups"]) > 100
    assert doc["groups"] == [g for g in json.loads(run("scan", "--json", XA).stdout)["groups"][:doc["count"]]]
    assert doc["error"]["offset"] == 29985 and "truncated" in doc["error"]["message"]
    assert r.stderr.count("\n") == 1 and "truncated" in r.stderr


def test_dump_of_a_damaged_index_is_closed_with_the_error(multifile):
    run("build", "--no-budget", "--page-size", "256", multifile)
    idx = multifile / "master-bin.000020.idx"
    data = bytearray(idx.read_bytes())
    data[-100] ^= 1                                  # the last page fails its CRC
    idx.write_bytes(bytes(data))
    # Whether the damage is found before the first record or half-way,
    # stdout is one JSON document with the error in it.
    r = run("dump", "--json", idx)
    doc = json.loads(r.stdout)
    assert r.exit_code == 3 and "CRC" in doc["error"]["message"] and doc["error"]["page"] is not None
    assert r.stderr.count("\n") == 1 and "CRC" in r.stderr


def test_build_json_error_entries_name_their_binlog(multifile):
    bad = multifile / "master-bin.000021"
    bad.write_bytes(b"not a binlog at all" * 10)
    r = run("build", "--json", multifile)
    assert r.exit_code == 2
    results = json.loads(r.stdout)["results"]
    assert [x["binlog"] for x in results] == [str(p) for p in sorted(multifile.glob("master-bin.0?????"))]
    entry = results[2]
    assert entry["error"]["exit_code"] == 2 and "not a binlog" in entry["error"]["message"]
    assert entry["error"]["path"] == str(bad)


def test_status_reports_a_missing_or_damaged_binlog_as_a_row(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    (d / "master-bin.000019").unlink()                      # still listed in master-bin.index
    (d / "master-bin.000022").write_bytes(b"")               # the newest: empty
    r = run("status", d)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()[1:]
    assert [ln.split()[2] for ln in lines] == ["missing", "error", "missing", "missing", "error"]
    assert "No such file or directory" in lines[1] and "empty file" in lines[4]
    rows = json.loads(run("status", "--json", d).stdout)["files"]
    assert [x["state"] for x in rows] == ["missing", "error", "missing", "missing", "error"]
    assert rows[0]["error"] is None and rows[1]["error"]["exit_code"] == 3
    assert rows[4]["error"]["message"] == "empty file, not a binlog"


@pytest.mark.parametrize("offset", ["４２３", "٤٢٣", "4_23", "+423", " 423", "", "0x", "9" * 5000])
def test_offsets_are_ascii_digits_only(offset):
    r = run("pos", XA, offset)
    assert r.exit_code == 2, r.output
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("gtidx: ")


@pytest.mark.parametrize("gtid", ["0-1-" + "9" * 5000, "9" * 4400 + "-1-1", "0-1-1," + "1-1-" + "7" * 10**5])
def test_gtid_with_thousands_of_digits_is_bad_input(gtid):
    r = run("seek", "--gtid", gtid, XA)
    assert r.exit_code == 2, r.output
    assert "more than 20 digits" in r.stderr and len(r.stderr) < 400 and r.stderr.count("\n") == 1


def test_empty_path_is_bad_input():
    r = run("scan", "")
    assert r.exit_code == 2 and r.stderr.startswith("gtidx: ") and r.stderr.count("\n") == 1


def test_tail_on_a_file_is_bad_input():
    r = run("tail", "--once", XA)
    assert r.exit_code == 2 and r.stderr == f"gtidx: {XA}: not a directory\n"


@pytest.mark.parametrize("redirect", ["> /dev/full", ">&-", "1< /dev/null"])
@pytest.mark.parametrize("args", [f"pos {XA} 423", f"scan {XA}", f"scan --json {XA}",
                                  "dump " + str(M118 / "multifile" / "master-bin.000020.idx")])
def test_stdout_full_or_closed_is_one_line_and_exit_3(args, redirect):
    p = subprocess.run(f"{sys.executable} -m gtidx {args} {redirect}", shell=True,
                       capture_output=True, text=True, executable="/bin/bash")
    assert p.returncode == 3, p.stderr
    why = {"> /dev/full": "No space left on device", ">&-": "stdout is closed",
           "1< /dev/null": "Bad file descriptor"}[redirect]      # stdout open read-only: EBADF
    assert p.stderr == f"gtidx: <stdout>: cannot write the output: {why}\n"


def test_closed_pipe_stays_quiet_141():
    big = M118 / "tiny" / "master-bin.000010"      # 0.5 MB of JSON: more than a pipe holds
    p = subprocess.run(f"{sys.executable} -m gtidx scan --json {big} | head -c 10; exit ${{PIPESTATUS[0]}}",
                       shell=True, capture_output=True, text=True, executable="/bin/bash")
    assert p.returncode == 141 and p.stderr == ""


def test_tail_json_logs_json_lines(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    r = run("tail", "--once", "--json", d)
    assert r.exit_code == 0, r.output
    lines = [json.loads(ln) for ln in r.stderr.splitlines()]
    assert lines[0]["event"] == "start" and lines[-1]["event"] == "stop"
    assert {"ts", "level", "event"} <= set(lines[0]) and lines[0]["ts"].endswith("Z")
    assert sum(ln["event"] == "built" for ln in lines) == 5


def _without_capabilities(*args):
    """gtidx in a process that keeps uid 0 but drops every capability (no
    CAP_DAC_OVERRIDE): a mode-000 file or directory is really refused (EACCES)."""
    return subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-all",
                           sys.executable, "-m", "gtidx", *map(str, args)], capture_output=True, text=True)


def test_permission_denied_binlog_is_a_status_row_and_a_directory_is_one_line(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    (d / "master-bin.000020").chmod(0)
    p = _without_capabilities("status", "--json", d)
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["files"]
    assert [x["state"] for x in rows] == ["missing", "missing", "error", "missing", "missing"]
    assert rows[2]["error"]["message"] == "Permission denied"
    d.chmod(0)
    for cmd in (["status"], ["seek", "--gtid", "0-1-1"], ["build"]):
        p = _without_capabilities(*cmd, d)
        assert p.returncode == 3 and p.stderr == f"gtidx: {d}: Permission denied\n", p.stderr


def test_binlog_index_with_odd_bytes(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    index = d / "master-bin.index"
    index.write_bytes(index.read_bytes() + b"./master-bin.\xff\xfe\n")     # not UTF-8: a name as the OS has it
    r = run("status", "--json", d)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["files"]
    assert [x["state"] for x in rows] == ["missing"] * 5 + ["error"]
    index.write_bytes(index.read_bytes() + b"./master-bin.0\x0000019\n")
    r = run("status", d)
    assert r.exit_code == 3 and r.stderr == f"gtidx: {index}: binlog index has a NUL byte in a file name\n"


@pytest.mark.parametrize("opt, value", [("--page-size", "４０９６"), ("--page-size", "4_096"),
                                        ("--span-min", "1_000"), ("--span-min", "9" * 5000),
                                        ("--page-size", " 4096")])
def test_numeric_options_are_ascii_digits_only(multifile, opt, value):
    r = run("build", opt, value, multifile)
    assert r.exit_code == 2 and not list(multifile.glob("*.idx")), r.output
    err = _json_error(run("build", "--json", opt, value, multifile), 2)
    assert opt in err["message"]


# -- batches: seek --from, pos --from ---------------------------------------------------------

def _single(*args):
    r = run(*args, "--json")
    return r.exit_code, json.loads(r.stdout)


@pytest.mark.parametrize("indexed", [True, False])
def test_seek_from_answers_every_line_as_single_calls(multifile, tmp_path, indexed):
    """Every GTID of the fixture (twice: the per-file pass, and a batch small
    enough for index lookups), positions, a never-written GTID and bad lines,
    in input order: each line's object has the single call's answer (file,
    start, end, resume, occurrences; a pass over a file says via scan), or
    its error; the exit status is the worst line's."""
    if indexed:
        run("build", multifile)
    oracle = json.loads((M118 / "multifile" / "oracle.json").read_text())
    gtids = [g for f in oracle["files"] for g, _, _ in f["groups"]]
    extra = ["0-1-7997,1-2-1878,2-1-1566,5-1-301", "0-1-999999", "not-a-gtid", "1-2"]
    for lines in (gtids + extra, gtids[::40] + extra):
        (tmp_path / "in.txt").write_text("# a comment\n\n" + "\n".join(lines) + "\n")
        r = run("seek", "--json", "--from", tmp_path / "in.txt", multifile)
        assert r.exit_code == 2, r.output                 # a bad line: the worst status
        got = [json.loads(x) for x in r.stdout.splitlines()]
        assert len(got) == len(lines)
        for line, doc in zip(lines, got):
            code, want = _single("seek", "--gtid", line, multifile)
            if code:
                assert doc == {"input": line, "error": want["error"]}, line
            else:
                keep = [k for k in want if k != "via"]
                assert {k: doc[k] for k in keep} == {k: want[k] for k in keep}, line
                assert doc["via"] in ("index", "scan")
    # stdin, text: one line per answer, an error line for a line that has none
    r = CliRunner().invoke(cli, ["seek", "--from", "-", str(multifile)], input="0-2-7998\n0-1-999999\n")
    assert r.exit_code == 1
    first, second = r.stdout.splitlines()
    assert first.startswith("0-2-7998 ") and "start 1289 end 3621" in first
    assert second.startswith("0-1-999999: ") and "never written" in second


def test_seek_from_refuses_another_question_beside_it(multifile, tmp_path):
    (tmp_path / "in.txt").write_text("0-2-7998\n")
    r = run("seek", "--from", tmp_path / "in.txt", "--gtid", "0-2-7998", multifile)
    assert r.exit_code == 2 and "exactly one of" in r.output
    r = run("seek", "--from", tmp_path / "missing.txt", multifile)
    assert r.exit_code == 2


def test_pos_from_answers_every_line_as_single_calls(multifile, tmp_path):
    """FILE OFFSET lines over several files (and OFFSET lines in the FILE
    argument): each line's object equals the single ``pos --json``; offsets
    inside an event and past the end are error objects (not found: 1)."""
    run("build", multifile)
    oracle = json.loads((M118 / "multifile" / "oracle.json").read_text())
    lines = []
    for f in oracle["files"]:
        for off, _ in f["pos"][::7]:
            lines.append(f"{multifile / f['name']} {off}")
    lines += [f"{multifile / 'master-bin.000022'} 5", f"{multifile / 'master-bin.000022'} 99999999"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    r = run("pos", "--json", "--from", tmp_path / "in.txt")
    assert r.exit_code == 1, r.output
    got = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(got) == len(lines)
    for line, doc in zip(lines, got):
        file, off = line.rsplit(" ", 1)
        code, want = _single("pos", file, off)
        assert doc == (want if code == 0 else {"input": line, "error": want["error"]}), line
    last = oracle["files"][-1]
    offsets = [str(off) for off, _ in last["pos"]]
    r = CliRunner().invoke(cli, ["pos", "--from", "-", str(multifile / last["name"])], input="\n".join(offsets))
    out = r.stdout.splitlines()
    assert len(out) == len(offsets)
    for off, line in zip(offsets, out):
        single = run("pos", multifile / last["name"], off)
        assert line == single.stdout.strip() if single.exit_code == 0 else line.startswith(f"{off}: "), off
    assert r.exit_code == max(run("pos", multifile / last["name"], off).exit_code for off in offsets)
    r = run("pos", "--from", tmp_path / "in.txt", multifile / "master-bin.000022", "4")
    assert r.exit_code == 2 and "no OFFSET" in r.output
