"""The catalog of an archive (issue 13 item 4): gtidx-catalog.json beside
the binlogs, what it holds, lookups that read it instead of every file, a
stale entry not trusted, and several histories never mixed; a catalog that
lies, is damaged or is not a regular file changes no answer."""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, ROOT, forge_catalog

import gtidx
from gtidx import admin, api, catalog
from gtidx.binlog.mariadb import Binlog
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


def test_an_unreadable_catalog_is_not_used_and_made_again(tmp_path):
    """A catalog that cannot be read is damaged, for every command alike: a
    lookup answers from the binlogs (the answer without a catalog) with one
    warning line, ``catalog show`` fails with one line (exit 3), ``catalog
    build`` makes it again."""
    d = _copy(MULTI, tmp_path / "m")
    (d / catalog.NAME).write_text('{"v": 1, "files": [{"name": "x", "start_state": "zz"}]}')
    plain = _cli("seek", "--gtid", "0-1-400", str(MULTI))
    r = _cli("seek", "--gtid", "0-1-400", str(d))
    assert r.returncode == 0 and r.stdout == plain.stdout.replace(str(MULTI), str(d)), r.stderr
    said = [line for line in r.stderr.splitlines() if catalog.NAME in line]
    assert len(said) == 1 and said[0].startswith("gtidx: warning: ") and "damaged catalog" in said[0], r.stderr
    assert "gtidx catalog build" in said[0]
    r = _cli("catalog", "show", str(d))
    assert r.returncode == 3 and "damaged catalog" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = _cli("catalog", "build", "--json", str(d))          # makes it again
    assert r.returncode == 0 and json.loads(r.stdout)["walked"] == 5, r.stderr
    assert _cli("seek", "--gtid", "0-1-400", str(d)).returncode == 0
    assert _cli("catalog", "show", str(d)).returncode == 0


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
    admin.build(str(d))
    admin.build_catalog(str(d))
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


# -- a catalog never changes an answer: checksum, identity, damage -------------------------------------

# lookups over the directory (and pos, which reads one file), with the answer a scan gives
LOOKUPS = [("seek", "--gtid", "0-1-400"),                          # in master-bin.000019
           ("seek", "--time", "@1795317387"),                      # 000019's groups: the second 1795317387
           ("seek", "--replica", "0-1-394,1-1-419,2-2-387,5-1-301,6-1-12")]


def _lookups(d: Path, lookups=LOOKUPS) -> list[tuple]:
    """(exit code, stdout with ``d`` as D and without "(via ...)", which an
    index changes) of each lookup over ``d``, and how many stderr lines name
    the catalog (every one a warning)."""
    out = []
    for args in lookups:
        r = _cli(*args, str(d))
        said = [line for line in r.stderr.splitlines() if catalog.NAME in line]
        assert all(line.startswith("gtidx: warning: ") for line in said), r.stderr
        out.append((r.returncode, re.sub(r" \(via \w+\)", "", r.stdout.replace(str(d), "D")), len(said)))
    return out


def _scan_answers(tmp_path: Path, indexed: bool = False) -> list[tuple]:
    """The answers of LOOKUPS over the binlogs without a catalog (``indexed``:
    with their indexes), each with no catalog line."""
    plain = _copy(MULTI, tmp_path / "plain")
    if indexed:
        assert all(not isinstance(r, Exception) for r in gtidx.build(str(plain)))
    answers = _lookups(plain)
    assert [rc for rc, _, _ in answers] == [0, 0, 0]
    return answers


def test_a_catalog_edited_by_hand_changes_no_answer(tmp_path):
    """max_timestamp and ranges of one entry edited in a catalog that
    ``gtidx catalog build`` made (binlogs untouched): its checksum no longer
    matches, the catalog is not used (one warning), every lookup gives the
    answer of a scan."""
    want = _scan_answers(tmp_path)
    d = _copy(MULTI, tmp_path / "m")
    gtidx.build_catalog(str(d))
    assert _lookups(d) == want                                    # the intact catalog: used, silent
    raw = json.loads((d / catalog.NAME).read_text())
    forge_catalog(raw)
    (d / catalog.NAME).write_text(json.dumps(raw))               # with its old checksum
    got = _lookups(d)
    assert [(rc, out) for rc, out, _ in got] == [(rc, out) for rc, out, _ in want]
    assert [n for _, _, n in got] == [1, 1, 1]
    r = _cli("catalog", "show", str(d))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "sha256 does not match" in r.stderr, r.stderr


def test_forged_values_are_taken_only_for_the_very_files_recorded(tmp_path):
    """Forged values with a recomputed checksum: taken only while each
    file's identity (device, inode, size, mtime, ctime) is the recorded one.
    Files touched since (their bytes the same) are read: the scan's answers.
    That a catalog rewritten with its checksum recomputed is believed for the
    very files it records is the limit of the trust (docs/design.md,
    "Catalog"): the checksum tells damage and edits by hand, the identity a
    catalog of other files."""
    want = _scan_answers(tmp_path)
    d = _copy(MULTI, tmp_path / "m")
    gtidx.build_catalog(str(d))
    raw = json.loads((d / catalog.NAME).read_text())
    forge_catalog(raw)
    raw[catalog.CHECKSUM] = catalog.checksum(raw)
    (d / catalog.NAME).write_text(json.dumps(raw))
    limit = _lookups(d)
    assert "master-bin.000020" in limit[1][1] and limit[0][0] == 1          # the limit, as documented
    for f in d.glob("master-bin.0*"):
        st = f.stat()
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))   # same bytes, another mtime
    got = _lookups(d)
    assert [(rc, out) for rc, out, _ in got] == [(rc, out) for rc, out, _ in want]
    r = _cli("seek", "--time", "@1795317387", str(d))
    assert "catalog entry is stale" in r.stderr and "not the one the catalog recorded" in r.stderr, r.stderr
    # catalog build: content decides what it keeps, and records the files' identities anew
    assert gtidx.build_catalog(str(d))[1] == {"kept": 5, "walked": 0, "failed": 0}


def _nested(raw: dict, data: bytes) -> bytes:
    return b"[" * 100000


def _wrong_types(raw: dict, data: bytes) -> bytes:
    """ranges of strings (4 characters each: they unpack as 4 values), the checksum recomputed."""
    raw["files"][1]["ranges"] = ["abcd", "0123"]
    raw[catalog.CHECKSUM] = catalog.checksum(raw)
    return json.dumps(raw).encode()


def _truncated(raw: dict, data: bytes) -> bytes:
    return data[:len(data) // 2]


def _unchecked(raw: dict, data: bytes) -> bytes:
    """A catalog of a gtidx from before the checksum: unverified, not used."""
    del raw[catalog.CHECKSUM]
    return json.dumps(raw).encode()


def _damage(d: Path, how, fresh: bytes) -> None:
    """The catalog of ``d`` as ``how`` damages ``fresh`` (a catalog build made), or a FIFO."""
    path = d / catalog.NAME
    path.unlink(missing_ok=True)
    if how == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(how(json.loads(fresh), fresh))


@pytest.mark.parametrize("how", [_nested, _wrong_types, _truncated, _unchecked, "fifo"],
                         ids=["nested", "wrong-types", "truncated", "unchecked", "fifo"])
def test_a_damaged_catalog_is_treated_alike_by_every_command(tmp_path, how):
    """Lookups answer as a scan with one warning; ``catalog show`` fails with
    one line, exit 3; ``catalog build``, ``build`` and ``tail`` write it again
    (a FIFO at its name is never waited on: replaced). Each command its own
    process, with a timeout: none hangs, none ends with a traceback."""
    want = _scan_answers(tmp_path, indexed=True)
    d = _copy(MULTI, tmp_path / "m")
    assert all(not isinstance(r, Exception) for r in gtidx.build(str(d)))
    gtidx.build_catalog(str(d))
    data = (d / catalog.NAME).read_bytes()
    fresh = json.loads(data)
    _damage(d, how, data)
    got = _lookups(d)
    assert [(rc, out) for rc, out, _ in got] == [(rc, out) for rc, out, _ in want]
    assert [n for _, _, n in got] == [1, 1, 1]
    r = _cli("catalog", "show", str(d))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "damaged catalog" in r.stderr, r.stderr
    for command in (("catalog", "build"), ("build",), ("tail", "--once")):
        _damage(d, how, data)
        r = _cli(*command, str(d))
        assert r.returncode == 0 and "damaged catalog" in r.stderr and "Traceback" not in r.stderr, (command, r)
        assert (d / catalog.NAME).is_file()
        shown = _cli("catalog", "show", "--json", str(d))
        assert shown.returncode == 0, shown.stderr
        made = json.loads(shown.stdout)
        assert [(e["name"], e["end_state"], e["ranges"]) for e in made["files"]] == \
            [(e["name"], e["end_state"], e["ranges"]) for e in fresh["files"]]
        assert _lookups(d) == want


def test_fifos_at_the_catalog_and_index_names_hang_no_command(tmp_path):
    """A FIFO at gtidx-catalog.json and at an .idx name (and at a
    fingerprint sidecar's): every command, each in its own process with a
    timeout, answers from the files (one warning for the catalog) or writes
    them again; ``catalog show`` is one line, exit 3."""
    want = _scan_answers(tmp_path)
    d = _copy(MULTI, tmp_path / "m")
    gtidx.build_catalog(str(d))

    def fifos():
        for name in (catalog.NAME, "master-bin.000019.idx", ".master-bin.000020.idx.gtidx"):
            (d / name).unlink(missing_ok=True)
            os.mkfifo(d / name)
    fifos()
    assert _lookups(d) == [(rc, out, 1) for rc, out, _ in want]
    r = _cli("catalog", "show", str(d))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "not a regular file (a FIFO)" in r.stderr, r.stderr
    for command, writes in ((("catalog", "build"), [catalog.NAME]), (("status",), []),
                            (("build",), [catalog.NAME, "master-bin.000019.idx"]),
                            (("tail", "--once"), [catalog.NAME, "master-bin.000019.idx"])):
        fifos()
        r = _cli(*command, str(d))
        assert r.returncode == 0 and "Traceback" not in r.stderr, (command, r)
        assert all((d / name).is_file() for name in writes), command


@pytest.fixture(scope="module")
def flipped_catalogs(tmp_path_factory):
    """A directory with its catalog, the catalog's bytes, and what each
    command says without a catalog (run in this process: click's runner)."""
    from click.testing import CliRunner
    from gtidx.cli import cli
    base = tmp_path_factory.mktemp("flips")
    plain, d = _copy(MULTI, base / "plain"), _copy(MULTI, base / "m")
    for where in (plain, d):
        assert all(not isinstance(r, Exception) for r in gtidx.build(str(where)))
    gtidx.build_catalog(str(d))
    data = (d / catalog.NAME).read_bytes()

    def run(where: Path, args) -> tuple:
        r = CliRunner().invoke(cli, [a.replace("DIR", str(where)) for a in args])
        return r.exit_code, r.stdout.replace(str(where), "D"), r.stderr
    commands = [[*args, "DIR"] for args in LOOKUPS] + [["pos", "DIR/master-bin.000019", "531"],
                                                       ["catalog", "show", "DIR"]]
    want = [run(plain, args)[:2] for args in commands[:-1]] + [run(d, commands[-1])[:2]]
    return d, data, commands, want, run


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_byte_of_a_catalog_flipped_changes_no_answer(flipped_catalogs, data):
    """Any byte of a real catalog flipped: every command gives the answer
    without a catalog (``catalog show``: the catalog as made, or one line,
    exit 3), never a traceback or an internal error."""
    d, intact, commands, want, run = flipped_catalogs
    at = data.draw(st.integers(0, len(intact) - 1), label="offset")
    flip = data.draw(st.integers(1, 255), label="xor")
    damaged = bytearray(intact)
    damaged[at] ^= flip
    (d / catalog.NAME).write_bytes(bytes(damaged))
    for args, (code, out) in zip(commands, want):
        got_code, got_out, err = run(d, args)
        assert "internal error" not in err and "Traceback" not in err, (args, err)
        assert all(line.startswith("gtidx: ") for line in err.splitlines()), (args, err)
        if args[:2] == ["catalog", "show"] and got_code != 0:
            assert got_code == 3 and err.count("\n") == 1 and "damaged catalog" in err, err
        else:
            assert (got_code, got_out) == (code, out), (args, err)
