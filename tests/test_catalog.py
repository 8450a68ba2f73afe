"""The catalog of an archive (issue 13 item 4): gtidx-catalog.json beside
the binlogs, what it holds, lookups that read it instead of every file, a
stale entry not trusted, and several histories never mixed."""
from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

import gtidx
from gtidx import api, catalog
from gtidx.binlog import Binlog
from gtidx.errors import BadInputError, NotFoundError

MULTI = FIXTURES / "mariadb-10.11" / "multifile"          # master-bin.000018..22, one server
OTHER = FIXTURES / "mariadb-11.8" / "multifile"           # master-bin.000019..23, another server


def _copy(src: Path, dst: Path, rename=None) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):
        if f.name.startswith("master-bin.0") and not f.name.endswith(".idx"):
            shutil.copy(f, dst / (rename(f.name) if rename else f.name))
    return dst


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gtidx", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def _gtids(src: Path) -> list[str]:
    oracle = json.loads((src / "oracle.json").read_text())
    return [g for e in oracle["files"] for g, _, _ in e["groups"]]


def test_catalog_build_and_show_json(tmp_path):
    d = _copy(MULTI, tmp_path / "m")
    r = _cli("catalog", "build", "--json", str(d))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"catalog": str(d / "gtidx-catalog.json"), "files": 5, "histories": 1,
                                    "kept": 0, "walked": 5, "failed": 0}
    shown = _cli("catalog", "show", "--json", str(d))
    assert shown.returncode == 0, shown.stderr
    cat = json.loads(shown.stdout)
    assert cat["v"] == 1
    oracle = json.loads((MULTI / "oracle.json").read_text())
    assert [e["name"] for e in cat["files"]] == [f["name"] for f in oracle["files"]]
    for e, o in zip(cat["files"], oracle["files"]):
        assert {"name", "size", "fingerprint", "server_version", "checksum", "start_state", "end_state",
                "first_timestamp", "last_timestamp", "server_ids", "ranges", "repeats", "index",
                "history"} <= set(e)
        assert e["size"] == o["size"] and e["checksum"] == o["checksum"] == "CRC32"
        assert e["groups"] == len(o["groups"])
        assert e["server_ids"] == sorted({int(g.split("-")[1]) for g, _, _ in o["groups"]})
        with Binlog(str(d / e["name"])) as b:
            assert e["start_state"] == str(b.start_state)
            assert e["server_version"] == b.fde.server_version
        assert e["index"] == {"path": str(d / (e["name"] + ".idx")), "status": "missing"}
        assert e["history"] == 1
        assert isinstance(e["first_timestamp"], int) and e["first_timestamp"] <= e["last_timestamp"]
    with gtidx.open(str(d), use_index=False) as logs:
        for e, nxt in zip(cat["files"], cat["files"][1:]):
            assert e["end_state"] == nxt["start_state"]           # the server's own continuity
        assert cat["files"][-1]["end_state"] == str(logs.end_state())
    assert cat["histories"] == [{"id": 1, "first": "master-bin.000018", "last": "master-bin.000022", "files": 5,
                                 "start_state": cat["files"][0]["start_state"],
                                 "end_state": cat["files"][-1]["end_state"], "gaps": []}]
    text = _cli("catalog", "show", str(d))
    assert text.returncode == 0 and "history 1: master-bin.000018..master-bin.000022 (5 files)" in text.stdout
    # again: nothing changed, nothing read; build keeps it current (index states)
    assert json.loads(_cli("catalog", "build", "--json", str(d)).stdout)["kept"] == 5
    assert all(not isinstance(x, Exception) for x in gtidx.build(str(d)))
    after = json.loads(_cli("catalog", "show", "--json", str(d)).stdout)
    assert {e["index"]["status"] for e in after["files"]} == {"ok"}


def test_catalog_show_without_one_is_not_found(tmp_path):
    d = _copy(MULTI, tmp_path / "m")
    r = _cli("catalog", "show", str(d))
    assert r.returncode == 1 and "no catalog here" in r.stderr and r.stderr.count("\n") == 1


def test_catalog_apart_under_index_dir_for_a_read_only_archive(tmp_path):
    d = _copy(MULTI, tmp_path / "m")
    root = tmp_path / "idx"
    cat, counts = gtidx.build_catalog(str(d), index_root=str(root))
    assert not (d / catalog.NAME).exists()
    assert Path(cat.where[1]) == root / str(d).lstrip("/") / catalog.NAME and Path(cat.where[1]).exists()
    assert gtidx.load_catalog(str(d), index_root=str(root)).files == cat.files
    with pytest.raises(NotFoundError):
        gtidx.load_catalog(str(d))


def test_answers_with_catalog_equal_answers_without(tmp_path, monkeypatch):
    plain = _copy(MULTI, tmp_path / "plain")
    cataloged = _copy(MULTI, tmp_path / "cat")
    gtidx.build_catalog(str(cataloged))
    opened = []
    real_init = Binlog.__init__

    def counting(self, path, store=None):
        opened.append(Path(str(path)).name)
        real_init(self, path, store)
    monkeypatch.setattr(Binlog, "__init__", counting)
    gtids = _gtids(MULTI)
    with gtidx.open(str(plain)) as a, gtidx.open(str(cataloged)) as b:
        assert b.history == 1
        for g in gtids:
            x, y = a.locate(g), b.locate(g)
            assert (Path(x.file).name, x.start, x.end, x.resume, x.occurrences) == \
                (Path(y.file).name, y.start, y.end, y.resume, y.occurrences), g
        assert str(a.end_state()) == str(b.end_state())
        for pos in [str(a.start_state(f).position()) for f in a.files[1:]] + [str(a.end_state().position())]:
            x, y = a.replica_start(pos), b.replica_start(pos)
            assert (Path(x.file).name, x.offset, str(x.state), str(x.skip)) == \
                (Path(y.file).name, y.offset, str(y.state), str(y.skip))
    # one lookup with the catalog opens only the file that holds the GTID and the newest
    opened.clear()
    with gtidx.open(str(cataloged)) as b:
        assert Path(b.locate("0-1-400").file).name == "master-bin.000019"
    assert sorted(set(opened)) == ["master-bin.000019", "master-bin.000022"], opened
    opened.clear()
    with gtidx.open(str(plain)) as a:
        a.locate("0-1-400")
    assert len(set(opened)) == 5


def test_replaced_newest_file_is_not_trusted(tmp_path, caplog):
    """A name reused: master-bin.000022 replaced by another server's file of
    that name after the catalog was made. The lookup sees the change when it
    opens the file (size, fingerprint) and answers from the file, not from
    the catalog; catalog build then walks that file again and reports it as
    another history."""
    d = _copy(MULTI, tmp_path / "m")
    gtidx.build_catalog(str(d))
    shutil.copy(OTHER / "master-bin.000022", d / "master-bin.000022")
    with Binlog(str(d / "master-bin.000022")) as b:
        g = next(b.groups()).gtid
    caplog.set_level(logging.WARNING, logger="gtidx")
    with gtidx.open(str(d)) as logs:
        loc = logs.locate(g)
        assert Path(loc.file).name == "master-bin.000022"
        with Binlog(str(d / "master-bin.000022")) as b:
            assert logs.end_state() == b.start_state.copy().update(x.gtid for x in b.groups())
    assert "catalog entry is stale" in caplog.text
    cat, counts = gtidx.build_catalog(str(d))
    assert counts == {"kept": 4, "walked": 1, "failed": 0}
    assert [h["files"] for h in cat.histories] == [4, 1]


def test_same_size_replacement_is_detected_by_fingerprint(tmp_path):
    """A file replaced by one of the same size (here: the same bytes but for
    one event's timestamp, its CRC made right): size alone would not tell."""
    d = _copy(MULTI, tmp_path / "m")
    cat, _ = gtidx.build_catalog(str(d))
    entry = cat.entries()["master-bin.000020"]
    path = d / "master-bin.000020"
    data = bytearray(path.read_bytes())
    data[-8] ^= 0xFF                     # inside the last event (its checksum breaks: a different file)
    path.write_bytes(bytes(data))
    with Binlog(str(path)) as b:
        assert b.size == entry.raw["size"]
        assert "fingerprint" in entry.matches(b)
    _, counts = gtidx.build_catalog(str(d))
    assert counts["walked"] + counts["failed"] == 1 and counts["kept"] == 4


def _two_histories(tmp_path) -> Path:
    """One directory, two servers' binlogs: this server's 000018..22 and the
    other's, renamed 000023..27 (as an archive that kept a name sequence
    across a failover to an unrelated server)."""
    d = _copy(MULTI, tmp_path / "mixed")
    _copy(OTHER, d, rename=lambda n: f"master-bin.{int(n.rsplit('.', 1)[1]) + 4:06d}")
    return d


def test_two_histories_are_reported_and_never_mixed(tmp_path):
    d = _two_histories(tmp_path)
    cat, _ = gtidx.build_catalog(str(d))
    assert [(h["id"], h["first"], h["last"], h["files"], h["gaps"]) for h in cat.histories] == [
        (1, "master-bin.000018", "master-bin.000022", 5, []),
        (2, "master-bin.000023", "master-bin.000027", 5, [])]
    assert [e["history"] for e in cat.files] == [1] * 5 + [2] * 5
    # a series over both is refused (a replica's start, a time, the library's open): never mixed
    r = _cli("seek", "--replica", "0-1-400", str(d))
    assert r.returncode == 2, r
    assert "2 histories" in r.stderr and "history 1: master-bin.000018..master-bin.000022" in r.stderr \
        and "history 2: master-bin.000023..master-bin.000027" in r.stderr and "--history" in r.stderr
    assert r.stderr.count("\n") == 1
    with pytest.raises(BadInputError, match="2 histories"):
        gtidx.open(str(d))
    # one GTID: looked up in each history; held by one: answered there, and said which
    r = _cli("seek", "--json", "--gtid", "0-1-400", str(d))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["history"] == 1 and doc["file"].endswith("master-bin.000019")
    r = _cli("seek", "--gtid", "0-1-400", str(d))
    assert "history 1 of these binlogs" in r.stdout
    r = _cli("seek", "--gtid", "0-1-999999", str(d))
    assert r.returncode == 1 and "none of their 2 histories" in r.stderr
    mine, theirs = _gtids(MULTI), _gtids(OTHER)
    with gtidx.open(str(d), history=1) as one, gtidx.open(str(MULTI)) as alone:
        assert len(one.files) == 5 and one.history == 1
        for g in mine[::7]:
            x, y = one.locate(g), alone.locate(g)
            assert (Path(x.file).name, x.start, x.end) == (Path(y.file).name, y.start, y.end)
        with pytest.raises(NotFoundError):
            one.locate(theirs[len(theirs) // 2])
    with gtidx.open(str(d), history=2) as two:
        g = theirs[len(theirs) // 2]
        loc = two.locate(g)
        assert int(Path(loc.file).name.rsplit(".", 1)[1]) >= 23
    r = _cli("seek", "--json", "--history", "2", "--gtid", theirs[3], str(d))
    assert r.returncode == 0, r.stderr
    assert int(json.loads(r.stdout)["file"].rsplit(".", 1)[1]) >= 23
    r = _cli("seek", "--history", "3", "--gtid", theirs[3], str(d))
    assert r.returncode == 2 and "no history 3" in r.stderr


def test_an_unreadable_catalog_is_one_line_exit_3(tmp_path):
    d = _copy(MULTI, tmp_path / "m")
    (d / catalog.NAME).write_text('{"v": 1, "files": [{"name": "x", "start_state": "zz"}]}')
    r = _cli("seek", "--gtid", "0-1-400", str(d))
    assert r.returncode == 3 and "unreadable catalog" in r.stderr and r.stderr.count("\n") == 1
    assert "gtidx catalog build" in r.stderr
    r = _cli("catalog", "build", "--json", str(d))          # makes it again
    assert r.returncode == 0 and json.loads(r.stdout)["walked"] == 5, r.stderr
    assert _cli("seek", "--gtid", "0-1-400", str(d)).returncode == 0


def test_a_gtid_in_two_histories_is_reported_as_such(tmp_path):
    """The same binlogs archived twice under other names (a replica's copy,
    a re-upload): two histories hold every GTID; a lookup names both."""
    d = _copy(MULTI, tmp_path / "twice")
    _copy(MULTI, d, rename=lambda n: f"master-bin.{int(n.rsplit('.', 1)[1]) + 100:06d}")
    gtidx.build_catalog(str(d))
    assert all(not isinstance(x, Exception) for x in gtidx.build(str(d)))      # keeps the catalog current
    cat = gtidx.load_catalog(str(d))
    assert {e["index"]["status"] for e in cat.files} == {"ok"}
    assert [(h["first"], h["last"]) for h in cat.histories] == [("master-bin.000018", "master-bin.000022"),
                                                                ("master-bin.000118", "master-bin.000122")]
    r = _cli("seek", "--gtid", "0-1-400", str(d))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "GTID 0-1-400 is in 2 histories" in r.stderr
    assert "history 1: master-bin.000019 offset 15764" in r.stderr
    assert "history 2: master-bin.000119 offset 15764" in r.stderr and "--history" in r.stderr
    for h, name in [(1, "master-bin.000019"), (2, "master-bin.000119")]:
        loc = api.seek("0-1-400", str(d), history=h)
        assert Path(loc.file).name == name and loc.start == 15764


def test_a_binlog_of_another_size_than_its_entry_is_read_not_taken_from_it(tmp_path, caplog):
    """The catalog was made while master-bin.000020 held only half its groups
    (a partial copy, IN_USE set, as an archive being filled has it); the
    whole file arrived later. A lookup over the directory that does not open
    that file must not take its old entry (its seq ranges would hide the
    groups that came since): every GTID is where a series without a catalog
    finds it, and the stale entry is said."""
    from conftest import growing_copy
    d = tmp_path / "binlogs"
    d.mkdir()
    for p in MULTI.glob("master-bin.0*"):
        shutil.copyfile(p, d / p.name)
    name = "master-bin.000020"
    whole = (MULTI / name).read_bytes()
    with Binlog(MULTI / name) as b:
        ends = [g.end for g in b.groups()]
    (d / name).write_bytes(growing_copy(whole, ends[len(ends) // 2]))
    api.build(str(d))
    api.build_catalog(str(d))
    (d / name).write_bytes(whole)
    caplog.set_level(logging.WARNING, logger="gtidx")
    files = api.list_binlogs(str(d))
    for f in files:
        for g in api.scan(f)[1]:
            with api.open_binlogs(str(d)) as with_catalog:
                a = with_catalog.locate(g.gtid)
            assert (a.file, a.start, a.end) == (f, g.start, g.end), g
    assert any("stale" in r.getMessage() and name in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("source", [
    FIXTURES / "mariadb-11.8" / "mixed" / "master-bin.000002",
    FIXTURES / "mariadb-10.11" / "nonmono" / "master-bin.000008",       # seq_no going down: repeats
    MULTI / "master-bin.000019",
], ids=["mixed", "nonmono", "multifile"])
def test_describer_walks_a_growing_file_once_and_equals_describe(tmp_path, monkeypatch, source):
    """gtidx tail's entry of a growing binlog: made again at many sizes, each
    time only the new bytes are walked (from the end of the last complete
    group), and each entry equals ``describe`` of the file at that size; a
    file cut and rewritten under it (another binlog's bytes) is walked again
    from its start."""
    import random
    from conftest import growing_copy
    data = source.read_bytes()
    path = tmp_path / source.name
    rnd = random.Random(len(data))
    walker = catalog.Describer()
    walked = []
    real = Binlog.group_batches

    def counting(self, span, start=None, previous=0):
        walked.append(self.body_start if start is None else start)
        return real(self, span, start, previous)
    with Binlog(source) as b:
        body = b.body_start                  # cut after the preamble: the same GTID_LIST every time
    stop = None
    for cut in sorted(rnd.sample(range(body + 1, len(data)), 12)) + [len(data)]:
        path.write_bytes(growing_copy(data, cut) if cut < len(data) else data)
        with Binlog(str(path)) as b:
            monkeypatch.setattr(Binlog, "group_batches", counting)
            entry = walker.entry(b)
            monkeypatch.setattr(Binlog, "group_batches", real)
            assert walked[-1] == (b.body_start if stop is None else stop)     # on from where it stopped
            stop = entry["end"]
            assert entry == catalog.describe(b), cut
    other = (MULTI / "master-bin.000020").read_bytes()
    path.write_bytes(growing_copy(other, len(other) - 100))          # another binlog under the name
    with Binlog(str(path)) as b:
        monkeypatch.setattr(Binlog, "group_batches", counting)
        entry = walker.entry(b)
        monkeypatch.setattr(Binlog, "group_batches", real)
        assert walked[-1] == b.body_start and entry == catalog.describe(b)


def test_a_binlog_closed_at_the_same_size_is_no_longer_in_use(tmp_path):
    """A server writes a binlog's last event, then clears the IN_USE flag of
    its FDE (same size; the fingerprint masks that flag). A catalog made in
    between (``gtidx tail`` sees it at a rotation) said in_use: made again
    (kept: same size and fingerprint), it says what the file says now, as a
    catalog made from scratch does."""
    from conftest import growing_copy
    d = _copy(MULTI, tmp_path / "m")
    last = d / "master-bin.000022"
    whole = last.read_bytes()
    last.write_bytes(growing_copy(whole, len(whole)))            # every event written, IN_USE still set
    cat, _ = gtidx.build_catalog(str(d))
    assert cat.files[-1]["in_use"] is True
    last.write_bytes(whole)                                       # the flag cleared
    cat, counts = gtidx.build_catalog(str(d))
    assert counts == {"kept": 5, "walked": 0, "failed": 0}
    assert cat.files[-1]["in_use"] is False
    (d / catalog.NAME).unlink()
    assert gtidx.build_catalog(str(d))[0].raw == cat.raw
