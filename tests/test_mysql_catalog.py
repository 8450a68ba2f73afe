"""The catalog of MySQL binlogs (``gtidx.catalog_mysql``) on the 9.7
fixtures: what an entry holds equals a walk of its file; histories; and
answers (``seek --gtid``, ``pos``, ``seek --replica``, ``seek --time``)
with the catalog equal those without it, with a forged one (sets and
timestamps edited, the checksum recomputed, the files' identities changed)
and with a damaged one (one warning, the binlogs read). The live 9.7's
histories (a second server after a failover): test_mysql_catalog_live.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES, ROOT

import gtidx
from gtidx import api, catalog, changes, storage
from gtidx.binlog.mysql import MysqlBinlog
from gtidx.catalog_mysql import MysqlCatalog, US
from gtidx.errors import GtidxError
from gtidx.mysqlgtid import GtidSet, MysqlGtid

GTID_TYPES = (MysqlGtid, GtidSet)

MY = FIXTURES / "mysql-9.7"
# every fixture's binlogs in one directory: 15 files of one server, one history (binlog.000002..23)
PARTS = ("single", "compressed", "nochecksum", "rotated", "anonymous", "empty", "tagged", "uuids")


def archive(dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        for f in (MY / part).glob("binlog.0*"):
            shutil.copy(f, dst / f.name)
    return dst


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gtidx", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def _walked(path: Path) -> dict:
    """What a walk of one file says (the catalog's fields, recomputed here)."""
    with MysqlBinlog(str(path)) as b:
        groups = list(b.groups())
        stamps = [g.commit_us if g.commit_us else g.timestamp * US for g in groups]
        drops = [max(stamps[:i]) - s for i, s in enumerate(stamps) if i]
        return {"start_state": b.previous_gtids.one_line(), "end_state": b.end_set().one_line(),
                "groups": len(groups), "anonymous": sum(g.gtid is None for g in groups),
                "uuids": sorted({g.gtid.uuid for g in groups if g.gtid}),
                "first_timestamp_us": stamps[0] if stamps else None,
                "last_timestamp_us": stamps[-1] if stamps else None,
                "max_timestamp_us": max(stamps) if stamps else None,
                "max_timestamp_drop_us": max([0, *drops]) if stamps else None,
                "end": groups[-1].end if groups else b.body_start, "size": b.size}


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """The archive without a catalog: the answers of a scan."""
    return archive(tmp_path_factory.mktemp("plain") / "a")


@pytest.fixture(scope="module")
def questions(plain) -> dict:
    files = sorted(plain.glob("binlog.0*"))
    gtids, stamps, offsets = [], set(), []
    for f in files:
        with MysqlBinlog(str(f)) as b:
            for g in b.groups():
                if g.gtid:
                    gtids.append(str(g.gtid))
                stamps.add(g.timestamp)
                offsets.append((f.name, g.start))
    with gtidx.open(str(plain)) as logs:
        first, end = logs.previous_gtids(str(files[0])), logs.end_set()
    sets = [first.one_line(), end.one_line()] + [GtidSet.parse(",".join(gtids[:n])).one_line() + "," +
                                                 first.one_line() for n in (5, 40, 200)]
    times = sorted({t + d for t in stamps for d in (-1, 0, 1)})
    return {"gtids": gtids + ["8f2379f0-e75f-11f1-a262-02fc00000001:99999", "8f2379f0-e75f-11f1-a262-02fc00000001:1"],
            "offsets": offsets[::7], "sets": sets, "times": [f"@{t}" for t in times]}


def answers(d: Path, q: dict) -> list:
    """Every question's answer (or error class and message) on ``d``, files named by name."""
    out = []

    def norm(r):
        return {k: (Path(v).name if k == "file" else norm(v) if hasattr(v, "_asdict") and not
                    isinstance(v, tuple(GTID_TYPES)) else str(v) if v is not None and not isinstance(v, (int, str))
                    else v) for k, v in r._asdict().items()}

    def ask(f, *a):
        try:
            return norm(f(*a))
        except GtidxError as e:
            return (type(e).__name__, e.message)
    with gtidx.open(str(d)) as logs:
        out += [ask(logs.locate, g) for g in q["gtids"]]
        out += [ask(logs.state_at, d / n, o) for n, o in q["offsets"]]
        out += [ask(logs.replica_start, s) for s in q["sets"]]
        out += [ask(logs.at_time, t) for t in q["times"]]
    return out


@pytest.fixture(scope="module")
def scanned(plain, questions) -> list:
    return answers(plain, questions)


def test_entries_equal_a_walk_of_each_file(tmp_path):
    d = archive(tmp_path / "a")
    r = _cli("catalog", "build", "--json", str(d))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"catalog": str(d / catalog.NAME), "files": 15, "histories": 1,
                                    "kept": 0, "walked": 15, "failed": 0}
    shown = _cli("catalog", "show", "--json", str(d))
    assert shown.returncode == 0 and "\n" not in shown.stdout.strip()
    raw = json.loads(shown.stdout)
    assert raw["v"] == 1 and raw["flavor"] == "mysql"
    for e in raw["files"]:
        want = _walked(d / e["name"])
        assert {k: e[k] for k in want} == want, e["name"]
        assert e["history"] == 1 and e["index"]["status"] == "missing" and e["identity"].startswith("stat:")
        assert "\n" not in e["start_state"] and GtidSet.parse(e["end_state"]).one_line() == e["end_state"]
    assert raw["histories"] == [{"id": 1, "first": "binlog.000002", "last": "binlog.000023", "files": 15,
                                 "start_state": raw["files"][0]["start_state"], "gaps": [],
                                 "end_state": raw["files"][-1]["end_state"]}]
    text = _cli("catalog", "show", str(d))
    assert text.returncode == 0 and "history 1: binlog.000002..binlog.000023 (15 files)" in text.stdout
    # build keeps it (indexes built: every entry's index status now "ok"), none walked again
    r = _cli("build", "--json", str(d))
    assert r.returncode == 0, r.stderr
    again = MysqlCatalog.load(storage.LOCAL, str(d))
    assert {e["index"]["status"] for e in again.files} == {"ok"}
    assert gtidx.build_catalog(str(d))[1] == {"kept": 15, "walked": 0, "failed": 0}


def test_answers_with_the_catalog_equal_a_scan(tmp_path, questions, scanned, caplog):
    d = archive(tmp_path / "a")
    gtidx.build_catalog(str(d))
    caplog.clear()
    assert answers(d, questions) == scanned
    assert "catalog entry" not in caplog.text and "damaged catalog" not in caplog.text     # used, silently
    for r in gtidx.build(str(d)):                      # through the indexes too
        assert not isinstance(r, Exception), r
    gtidx.build_catalog(str(d))
    got = answers(d, questions)
    assert [_no_via(x) for x in got] == [_no_via(x) for x in scanned]


def _no_via(x):
    return {k: v for k, v in x.items() if k != "via"} if isinstance(x, dict) else x


def test_at_time_passes_over_older_files_unread(tmp_path, monkeypatch):
    """With the catalog, ``seek --time`` opens only the files from the one
    holding the answer on (older ones are passed over by their highest
    timestamp); without it every file before is walked."""
    d = archive(tmp_path / "a")
    gtidx.build_catalog(str(d))
    opened = []
    real = MysqlBinlog.__init__

    def counting(self, path, *a, **kw):
        opened.append(Path(path).name)
        real(self, path, *a, **kw)
    monkeypatch.setattr(MysqlBinlog, "__init__", counting)
    with gtidx.open(str(d)) as logs:
        opened.clear()
        p = logs.at_time("@1795453875")
    assert Path(p.file).name == "binlog.000006" and p.timestamp == 1795453875
    assert opened == ["binlog.000006"], opened


def test_a_forged_catalog_changes_no_answer(tmp_path, questions, scanned, caplog):
    """Forged sets and timestamps with the checksum recomputed: believed only
    for the very files recorded (the limit of the trust, as for MariaDB);
    once the files' identities changed (same bytes, another mtime) every
    entry is stale (warnings) and the answers are a scan's."""
    d = archive(tmp_path / "a")
    gtidx.build_catalog(str(d))
    raw = json.loads((d / catalog.NAME).read_text())
    for e in raw["files"]:
        e["start_state"] = e["end_state"] = "8f2379f0-e75f-11f1-a262-02fc00000001:1-3"
        if e["max_timestamp_us"] is not None:
            e["max_timestamp_us"] = 0
    raw[catalog.CHECKSUM] = catalog.checksum(raw)
    (d / catalog.NAME).write_text(json.dumps(raw))
    assert answers(d, questions) != scanned            # the limit: believed for the very files recorded
    for f in d.glob("binlog.0*"):
        st_ = f.stat()
        os.utime(f, ns=(st_.st_atime_ns, st_.st_mtime_ns + 1_000_000_000))
    caplog.clear()
    assert answers(d, questions) == scanned
    assert "catalog entry is stale" in caplog.text and "not the one the catalog recorded" in caplog.text


@pytest.mark.parametrize("how", ["edited", "truncated", "mariadb", "wrong-types"])
def test_a_damaged_catalog_is_one_warning_and_a_scan(tmp_path, questions, scanned, caplog, how):
    """Edited without its checksum, cut, a MariaDB catalog (no flavor) or
    values of the wrong kind: not used (one warning per lookup), answers
    a scan's; ``catalog show`` exit 3 with one line; ``catalog build``
    writes it again whole."""
    d = archive(tmp_path / "a")
    gtidx.build_catalog(str(d))
    path = d / catalog.NAME
    raw = json.loads(path.read_text())
    if how == "edited":
        raw["files"][3]["max_timestamp_us"] = 0
    elif how == "truncated":
        raw = None
        path.write_bytes(path.read_bytes()[:500])
    elif how == "mariadb":
        del raw["flavor"]
        raw[catalog.CHECKSUM] = catalog.checksum(raw)
    else:
        raw["files"][1]["uuids"] = [1, 2]
        raw[catalog.CHECKSUM] = catalog.checksum(raw)
    if raw is not None:
        path.write_text(json.dumps(raw))
    caplog.clear()
    assert answers(d, questions) == scanned
    assert "damaged catalog" in caplog.text and "not used, the binlogs are read instead" in caplog.text
    r = _cli("catalog", "show", str(d))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "damaged catalog" in r.stderr, r.stderr
    if how == "mariadb":
        assert "describes MariaDB binlogs, these are MySQL binlogs" in r.stderr
    r = _cli("seek", "--time", "@1795453875", str(d))
    assert r.returncode == 0 and r.stderr.count("damaged catalog") == 1, r.stderr
    assert gtidx.build_catalog(str(d))[1] == {"kept": 0, "walked": 15, "failed": 0}


def test_a_mysql_catalog_is_not_a_mariadb_one(tmp_path):
    """A MySQL catalog read for MariaDB binlogs (the same name beside them) is damaged for them."""
    d = tmp_path / "m"
    archive(tmp_path / "a")
    gtidx.build_catalog(str(tmp_path / "a"))
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    shutil.copy(tmp_path / "a" / catalog.NAME, d / catalog.NAME)
    r = _cli("catalog", "show", str(d))
    assert r.returncode == 3 and "describes 'mysql' binlogs, these are MariaDB binlogs" in r.stderr, r.stderr


def test_a_history_that_does_not_chain_starts_another(tmp_path):
    """A file whose Previous_gtids lacks some of the set before it (a name
    reused by a server that starts again) starts a history; a lookup over
    both is refused (exit 2) without --history, answered within one with it;
    files missing between two of one history are a gap."""
    d = archive(tmp_path / "a")
    for n in ("binlog.000004", "binlog.000006"):
        (d / n).unlink()                                     # a gap: files missing, the sets still chain
    shutil.copy(MY / "single" / "binlog.000002", d / "binlog.000030")   # the oldest file again, later
    cat, _ = gtidx.build_catalog(str(d))
    assert [(h["first"], h["last"], h["files"], h["gaps"]) for h in cat.histories] == [
        ("binlog.000002", "binlog.000023", 13, ["binlog.000008"]), ("binlog.000030", "binlog.000030", 1, [])]
    g = "8f2379f0-e75f-11f1-a262-02fc00000001:20"
    r = _cli("seek", "--gtid", g, str(d))
    assert r.returncode == 2 and "2 histories" in r.stderr and "Previous_gtids sets" in r.stderr, r.stderr
    for h, name in ((1, "binlog.000002"), (2, "binlog.000030")):
        r = _cli("seek", "--json", "--history", str(h), "--gtid", g, str(d))
        assert r.returncode == 0 and Path(json.loads(r.stdout)["file"]).name == name, r.stderr


@settings(max_examples=60, deadline=None)
@given(t=st.integers(1795453872, 1795453878), us=st.integers(0, 999_999))
def test_at_time_equals_the_first_transaction_that_late(t, us, tmp_path_factory):
    """``at_time`` with the catalog against the brute force over every
    transaction's timestamp, any time (seconds and fractions)."""
    d = _cataloged(tmp_path_factory)
    when = f"@{t}.{us:06d}"
    first = next(((n, g) for n, g in _ARCHIVE["all"] if g.timestamp >= (t + (us > 0))), None)
    got = api.at_time(str(d), when)
    if first is None:
        assert got.gtid is None and Path(got.file).name == "binlog.000023"
    else:
        assert (Path(got.file).name, got.offset, got.gtid) == (first[0], first[1].start, first[1].gtid)


_ARCHIVE: dict = {}


def _cataloged(tmp_path_factory) -> Path:
    """The archive with its catalog, made once, and every transaction of it
    (``_ARCHIVE["all"]``: (file name, MysqlGroup) in binlog order)."""
    d = _ARCHIVE.get("d")
    if d is None:
        d = _ARCHIVE["d"] = archive(tmp_path_factory.mktemp("prop") / "a")
        gtidx.build_catalog(str(d))
        _ARCHIVE["all"] = []
        for f in sorted(d.glob("binlog.0*")):
            with MysqlBinlog(str(f)) as b:
                _ARCHIVE["all"] += [(f.name, g) for g in b.groups()]
    return d


@settings(max_examples=60, deadline=None)
@given(lo=st.one_of(st.none(), st.integers(1795453871, 1795453879)),
       hi=st.one_of(st.none(), st.integers(1795453871, 1795453879)))
def test_changes_by_time_read_every_file_with_a_transaction_in_range(lo, hi, tmp_path_factory):
    """``gtidx changes --since/--until`` with the catalog: the files it
    plans to read (closed files whose entry says every transaction is
    older, or newer, are passed over) hold every transaction in the range
    (the brute force over every transaction's timestamp), and the newest
    is always read."""
    d = _cataloged(tmp_path_factory)
    times = ([(">=", lo)] if lo is not None else []) + ([("<", hi)] if hi is not None else [])
    f = changes.Filters(times=times)
    planned = [Path(p).name for p, _ in changes.ChangeSource.source(str(d), f).plan()]
    holding = {n for n, g in _ARCHIVE["all"] if f.time_ok(g.timestamp)}
    if lo is not None and hi is not None and lo >= hi:
        assert planned == []
    else:
        assert holding <= set(planned) and planned[-1] == "binlog.000023", (planned, holding)


def test_changes_until_pass_over_newer_files(tmp_path_factory, plain):
    """``--until`` before most transactions: the files all newer are not
    read (``MysqlSeries.newer``), and ``gtidx changes --json`` prints the
    rows it prints without the catalog."""
    d = _cataloged(tmp_path_factory)
    stamps = sorted(g.timestamp for _, g in _ARCHIVE["all"])
    until = f"@{stamps[0] + 1}"
    f = changes.Filters(times=[("<", stamps[0] + 1)])
    planned = [Path(p).name for p, _ in changes.ChangeSource.source(str(d), f).plan()]
    assert len(planned) < len(list(d.glob("binlog.0*"))), planned
    got, want = (_cli("changes", "--json", "--until", until, str(x)) for x in (d, plain))
    assert got.returncode == want.returncode == 0, got.stderr
    assert got.stdout == want.stdout.replace(str(plain), str(d)) and got.stdout
