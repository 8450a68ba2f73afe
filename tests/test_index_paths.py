"""The lines of a server's binlog list (``master-bin.index``, MySQL's
``binlog.index``) are used only inside the index file's directory: a line
pointing out of it (an absolute path of a copied directory, ``../x``, a
symlink) means the file of its name beside the index file, and nothing is
read or written outside the directory given. Real binlogs: the fixtures,
and a private MariaDB 10.11 whose ``log_bin`` is absolute."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, ROOT
from gtidx import api
from gtidx.cli import cli
from gtidx.errors import GtidxIOError
from gtidx.gtid import Position
from test_live import write_rotated
from tools.mariadb import MariaDB

MULTI = FIXTURES / "mariadb-10.11" / "multifile"
ROTATED = FIXTURES / "mysql-9.7" / "rotated"
HINT = "a listed path is read only inside the index file's directory, else the file of its name beside it"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def gtidx(*args) -> subprocess.CompletedProcess:
    """The console script in a process of its own (PYTHONPATH: this tree)."""
    return subprocess.run([sys.executable, "-m", "gtidx", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def names(d: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(suffix))


def listing(d: Path, lines: list[str], index: str = "master-bin.index") -> Path:
    (d / index).write_text("".join(f"{ln}\n" for ln in lines))
    return d / index


def oracle(src: Path) -> list[dict]:
    return json.loads((src / "oracle.json").read_text())["files"]


def test_a_line_leading_up_is_read_beside_the_index(tmp_path):
    """``../esc/master-bin.000020``: the file of that name beside the index
    is built and answered from; ``esc/`` (holding another binlog under that
    name) is neither read nor written."""
    d, esc = tmp_path / "binlogs", tmp_path / "esc"
    shutil.copytree(MULTI, d)
    esc.mkdir()
    shutil.copyfile(MULTI / "master-bin.000021", esc / "master-bin.000020")     # not the one beside
    files = oracle(MULTI)
    listing(d, [f"./{f['name']}" if f["name"] != "master-bin.000020" else "../esc/master-bin.000020"
                for f in files])
    r = run("build", d)
    assert r.exit_code == 0, r.output
    assert names(d, ".idx") == [f"{f['name']}.idx" for f in files]
    assert names(esc, "") == ["master-bin.000020"]
    assert api.list_binlogs(d) == [str(d / f["name"]) for f in files]
    gtid, start, end = files[2]["groups"][5]
    doc = json.loads(run("seek", "--json", "--gtid", gtid, d).stdout)
    assert (doc["file"], doc["start"], doc["end"]) == (str(d / "master-bin.000020"), start, end)


def test_a_listed_name_missing_beside_the_index_is_one_error_naming_the_line(tmp_path):
    d, esc = tmp_path / "binlogs", tmp_path / "esc"
    shutil.copytree(MULTI, d)
    shutil.copytree(MULTI, esc)
    (d / "master-bin.000020").unlink()
    index = listing(d, ["./master-bin.000018", "./master-bin.000019", "../esc/master-bin.000020",
                        f"{esc}/master-bin.000021"])
    line = f"line 3 '../esc/master-bin.000020': no file of its name beside the index file ({HINT})"
    with pytest.raises(GtidxIOError) as e:
        api.list_binlogs(index)
    assert str(e.value) == f"{index}: {line}" and e.value.exit_code == 3
    for cmd in (["build"], ["status"], ["seek", "--gtid", "0-1-1"], ["catalog", "build"]):
        r = run(*cmd, d)
        assert (r.exit_code, r.stdout, r.stderr) == (3, "", f"gtidx: {index}: {line}\n"), (cmd, r.output)
    r = run("seek", "--json", "--gtid", "0-1-1", index)
    assert r.exit_code == 3
    err = json.loads(r.stdout)["error"]
    assert (err["path"], err["message"], err["exit_code"]) == (str(index), line.split(" (")[0], 3)
    p = gtidx("build", d)                                      # the console script: one line, no traceback
    assert (p.returncode, p.stderr) == (3, f"gtidx: {index}: {line}\n")
    assert names(d, ".idx") == names(esc, ".idx") == []
    (esc / "master-bin.000021").unlink()                       # line 4 too: the first one is named
    listing(d, ["./master-bin.000018", f"{esc}/master-bin.000021"])
    shutil.copyfile(MULTI / "master-bin.000021", d / "master-bin.000021")
    assert api.list_binlogs(d) == [str(d / "master-bin.000018"), str(d / "master-bin.000021")]


def test_a_symlink_out_of_the_directory_is_not_followed(tmp_path):
    """A subdirectory that is a symlink out: the name beside the index is
    meant. A binlog beside it that is itself a symlink out: one error."""
    d, out = tmp_path / "binlogs", tmp_path / "out"
    shutil.copytree(MULTI, d)
    out.mkdir()
    shutil.copyfile(MULTI / "master-bin.000018", out / "master-bin.000021")    # not the one beside
    (d / "link").symlink_to(out)
    files = oracle(MULTI)
    index = listing(d, [f"./{f['name']}" if f["name"] != "master-bin.000021" else "link/master-bin.000021"
                        for f in files])
    assert run("build", d).exit_code == 0
    assert names(out, "") == ["master-bin.000021"]
    assert api.list_binlogs(index) == [str(d / f["name"]) for f in files]
    gtid, start, end = files[3]["groups"][-1]
    doc = json.loads(run("seek", "--json", "--gtid", gtid, d).stdout)
    assert (doc["file"], doc["start"], doc["end"]) == (str(d / "master-bin.000021"), start, end)

    (d / "master-bin.000021").unlink()
    (d / "master-bin.000021").symlink_to(out / "master-bin.000021")
    for f in d.glob("*.idx"):
        f.unlink()
    r = run("build", d)
    assert (r.exit_code, r.stdout) == (3, "")
    assert r.stderr == (f"gtidx: {index}: line 4 'link/master-bin.000021': master-bin.000021 beside the index "
                        f"file leads outside its directory ({HINT})\n")
    assert names(out, "") == ["master-bin.000021"] and names(d, ".idx") == []


def test_lines_inside_the_directory_are_used_where_they_point(tmp_path):
    """A relative subdirectory inside, an absolute path inside, a directory
    reached through a symlink: used as listed (a missing one stays listed:
    ``status`` reports it)."""
    real = tmp_path / "real"
    shutil.copytree(MULTI, real)
    (real / "old").mkdir()
    os.replace(real / "master-bin.000018", real / "old" / "master-bin.000018")
    (tmp_path / "via").symlink_to(real)
    d = tmp_path / "via"
    listing(d, ["old/master-bin.000018", f"{real}/master-bin.000019", f"{d}/master-bin.000020",
                "./master-bin.000021", "./master-bin.000022", "./master-bin.000023"])
    assert api.list_binlogs(d) == [str(d / "old" / "master-bin.000018"), str(real / "master-bin.000019"),
                                   *(str(d / f"master-bin.0000{n}") for n in (20, 21, 22, 23))]
    rows = json.loads(run("status", "--json", d).stdout)["files"]
    assert [x["state"] for x in rows] == ["missing"] * 5 + ["error"]


def test_mysql_binlog_index_of_absolute_paths_copied(tmp_path):
    """MySQL with an absolute log-bin writes absolute paths to binlog.index:
    a copy of the directory answers from its own files, the original's
    (changed after the copy) are not read or written."""
    live, copy = tmp_path / "live", tmp_path / "copy"
    shutil.copytree(ROTATED, live)
    files = oracle(ROTATED)
    listing(live, [f"{live}/{f['name']}" for f in files], "binlog.index")
    shutil.copytree(live, copy)
    for f in files:
        os.truncate(live / f["name"], 200)                  # the original moved on
    p = gtidx("build", copy)
    assert p.returncode == 0, p.stderr
    assert names(copy, ".idx") == [f"{f['name']}.idx" for f in files] and names(live, ".idx") == []
    assert api.list_binlogs(copy) == [str(copy / f["name"]) for f in files]
    for f in files:
        gtid, start, end = f["groups"][len(f["groups"]) // 2]
        p = gtidx("seek", "--json", "--gtid", gtid, copy / "binlog.index")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert (doc["file"], doc["start"], doc["end"], doc["via"]) == (str(copy / f["name"]), start, end, "index")


# -- a real server whose log_bin is absolute ---------------------------------------------------------

def _gtid_spans(srv: MariaDB, name: str) -> list[tuple[str, int, int]]:
    """(GTID, start, end) of each group of ``name`` as the server lists them
    (SHOW BINLOG EVENTS): a "BEGIN GTID" group ends with its Xid or COMMIT,
    a standalone one (DDL) with its one statement."""
    spans, current = [], None
    for _, pos, kind, _, end, info in srv.sql(f"SHOW BINLOG EVENTS IN '{name}'"):
        if kind == "Gtid":
            current = [info.split()[-1], pos, None, info.startswith("BEGIN")]
        elif current is not None and (kind == "Xid" or kind == "Query" and (info == "COMMIT" or not current[3])):
            spans.append((current[0], current[1], end))
            current = None
    return spans


@pytest.mark.live
def test_copy_of_a_live_servers_binlog_directory(tmp_path):
    """MariaDB 10.11 with ``log_bin`` an absolute path lists absolute paths
    in master-bin.index. ``cp -r`` of its binlog directory: build, catalog,
    status, seek and pos on the copy use the copy's files only, and answer
    as the server did before the copy, once the original has moved on."""
    srv = MariaDB(tmp_path / "server")
    srv.start()
    try:
        write_rotated(srv, 3, 25, seed=2300, last=10)
        live = srv.binlog_dir
        lines = (live / "master-bin.index").read_text().split()
        assert len(lines) >= 4 and all(ln.startswith(f"{live}/") for ln in lines), lines
        listed = [Path(ln).name for ln in lines]
        spans = {n: _gtid_spans(srv, n) for n in listed}
        ends = [(n, end) for n in listed for _, _, end in spans[n][::4]]
        want = {(n, end): srv.sql("SELECT BINLOG_GTID_POS(%s, %s)", (n, end))[0][0] for n, end in ends}
    finally:
        srv.stop()
    copy = tmp_path / "copy"
    shutil.copytree(live, copy)
    for n in listed:                                        # the original moves on: not the binlogs listed
        os.truncate(live / n, 256)
    before = names(live, "")
    p = gtidx("build", copy)
    assert p.returncode == 0, p.stderr
    assert names(copy, ".idx") == [f"{n}.idx" for n in listed]

    assert api.list_binlogs(copy) == [str(copy / n) for n in listed]
    p = gtidx("catalog", "build", copy)
    assert p.returncode == 0, p.stderr
    assert (copy / "gtidx-catalog.json").exists()
    rows = json.loads(gtidx("status", "--json", copy).stdout)["files"]
    assert [(x["file"], x["state"]) for x in rows] == [(str(copy / n), "complete") for n in listed]
    assert names(live, "") == before                        # nothing written into the original

    for n in listed:
        gtid, start, end = spans[n][len(spans[n]) // 2]
        doc = json.loads(gtidx("seek", "--json", "--gtid", gtid, copy).stdout)
        assert (doc["file"], doc["start"], doc["end"]) == (str(copy / n), start, end)
    n, end = ends[-1]
    p = gtidx("pos", "--json", copy / n, end)
    assert p.returncode == 0, p.stderr
    assert Position.parse(json.loads(p.stdout)["position"]) == Position.parse(want[n, end])
    with api.open_binlogs(copy) as logs:
        wrong = [(n, end, str(logs.state_at(n, end).position), want[n, end]) for n, end in ends
                 if logs.state_at(n, end).position != Position.parse(want[n, end])]
    assert wrong == [], wrong[:3]
