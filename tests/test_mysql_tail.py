"""gtidx tail on MySQL binlogs (issue 15 item 3): the index of a growing
MySQL binlog, written as transactions complete, resumed after a kill -9,
finished at rotation, equals a clean ``gtidx build`` record for record."""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, growing_copy
from gtidx import admin, catalog, storage
from gtidx.catalog_mysql import MysqlCatalog, MysqlDescriber
from gtidx.index.build import build_index
from gtidx.index.files import IndexMeta, open_index
from gtidx.index.files import flavor_of
from gtidx.series.mysql import MysqlSeries
from gtidx.binlog.mysql import open_binlog
from gtidx.tail import IncrementalIndex, TailSettings, Tailer

ROTATED = FIXTURES / "mysql-9.7" / "rotated"


def records(path) -> list:
    _, recs = admin.index_records(path)
    return [(r.offset, r.state) for r in recs]


def clean_records(binlog: Path, tmp_path: Path, page_size: int, span_min: int) -> list:
    clean = tmp_path / f"clean-{binlog.name}.idx"
    build_index(binlog, out=str(clean), page_size=page_size, span_min=span_min, max_ratio=None, force=True)
    return records(clean)


@pytest.mark.parametrize("name, page_size, span_min", [
    ("binlog.000015", 256, 2048),
    ("binlog.000014", 512, 1),
    ("binlog.000017", 4096, 4096),
])
def test_incremental_mysql_index_with_crashes_equals_a_clean_build(tmp_path, name, page_size, span_min):
    data = (ROTATED / name).read_bytes()
    binlog = tmp_path / name
    rnd = random.Random(len(data))
    cuts = sorted(rnd.sample(range(300, len(data)), 40))
    inc = None
    crashes = 0
    for cut in cuts + [len(data)]:
        binlog.write_bytes(growing_copy(data, cut) if cut < len(data) else data)
        with open_binlog(binlog) as b:
            assert b.flavor == "mysql"
            if inc is None:
                inc = IncrementalIndex(str(binlog), page_size=page_size, span_min=span_min,
                                       flavor=flavor_of(b))
                assert inc.start(b) in ("resumed", "fresh (no index yet)", "fresh (no complete leaf on disk)")
            if cut == len(data):
                inc.finish(b, max_ratio=None)
                break
            inc.advance(b)
        if rnd.random() < 0.4:     # kill -9: no finish, maybe a torn last page
            idx = Path(inc.path)
            inc.close()
            inc = None
            crashes += 1
            if rnd.random() < 0.5 and idx.exists() and idx.stat().st_size:
                with open(idx, "r+b") as f:
                    f.truncate(idx.stat().st_size - rnd.randrange(1, page_size))
    assert crashes >= 5
    assert records(inc.path) == clean_records(binlog, tmp_path, page_size, span_min)
    clean = tmp_path / f"clean-{name}.idx"
    assert Path(inc.path).read_bytes() == clean.read_bytes()
    with open_binlog(binlog) as b:
        st = open_index(b)
        assert st.usable and not st.partial and st.owner == "gtidx"
        st.close()


def grow(src: Path, dst: Path, files: list, upto: dict) -> None:
    """Mirror the server's directory as it was: ``upto[name]`` bytes of each
    file (the last one still IN_USE), binlog.index listing them."""
    names = [n for n in files if n in upto]
    for n in names:
        data = (src / n).read_bytes()
        cut = upto[n]
        part = growing_copy(data, cut) if cut < len(data) or n == names[-1] else data
        (dst / n).write_bytes(part)
    (dst / "binlog.index").write_text("".join(f"./{n}\n" for n in names))


def test_tailer_follows_a_growing_mysql_directory(tmp_path, caplog):
    """Tailer over a copy of the rotated fixture grown in steps, with
    restarts (a new Tailer: what a kill -9 leaves): every closed file's
    index equals a clean build; answers through them equal the walk; a
    damaged catalog in the directory is made again (one warning) and kept
    as MySQL's: at the end each entry equals a fresh walk of its file and
    ``catalog build`` finds every entry current."""
    files = sorted(p.name for p in ROTATED.glob("binlog.0*"))
    d = tmp_path / "dir"
    d.mkdir()
    (d / catalog.NAME).write_bytes(b"{}")   # damaged: tail writes it again whole
    settings = TailSettings(page_size=256, span_min=1024, max_ratio=None)
    rnd = random.Random(7)
    upto: dict = {}
    tailer = Tailer(str(d), settings)
    for n in files:
        size = (ROTATED / n).stat().st_size
        for cut in sorted(rnd.sample(range(200, size), 6)) + [size]:
            upto[n] = cut
            grow(ROTATED, d, files, upto)
            tailer.poll(retry_all=True)
            assert not tailer.failed, tailer.failures
            if rnd.random() < 0.3:
                for inc in tailer.active.values():
                    inc.close()                  # kill -9
                tailer = Tailer(str(d), settings)
    # the last file is still written: rotation closes it (a new, empty-bodied file)
    (d / files[-1]).write_bytes((ROTATED / files[-1]).read_bytes())
    tailer.poll(retry_all=True)
    assert not tailer.failed
    for n in files:
        st_meta = IndexMeta.read(str(d / n) + ".idx")
        assert st_meta is not None and not st_meta.partial, n
        assert records(str(d / n) + ".idx") == clean_records(d / n, tmp_path, 256, 1024), n
    oracle = json.loads((ROTATED / "oracle.json").read_text())
    with MysqlSeries([str(d / n) for n in files]) as logs:
        for f in oracle["files"]:
            for gtid, start, end in f["groups"][1:]:
                loc = logs.locate(gtid)
                assert (Path(loc.file).name, loc.start, loc.end, loc.via) == (f["name"], start, end, "index")
    assert caplog.text.count("catalog damaged, making it again") == 1
    kept = MysqlCatalog.load(storage.LOCAL, str(d))
    assert [e["name"] for e in kept.files] == files and len(kept.histories) == 1
    for e in kept.files:
        with open_binlog(str(d / e["name"])) as b:
            fresh = MysqlDescriber().entry(b)
        assert {k: v for k, v in e.items() if k not in ("name", "index", "history")} == \
            {k: v for k, v in fresh.items() if k != "name"}, e["name"]
    _, counts = admin.build_catalog(str(d))
    assert counts == {"kept": len(files), "walked": 0, "failed": 0}


def test_tail_and_status_with_an_index_dir(tmp_path):
    """gtidx tail --index-dir on a MySQL server's directory: the indexes
    written under DIR, mirroring the binlogs' path (none beside them), as
    the binlogs close, each what build --index-dir writes, lookups
    through them with --index-dir; status --index-dir reads them there; a
    purged binlog's index removed there; a URL for DIR one line, exit 2."""
    from click.testing import CliRunner

    from gtidx import api
    from gtidx.cli.main import cli
    files = sorted(p.name for p in ROTATED.glob("binlog.0*"))
    d, root = tmp_path / "dir", tmp_path / "idx"
    d.mkdir()
    here = root / str(d).lstrip("/")                     # where --index-dir keeps d's indexes

    def run(*args):
        r = CliRunner().invoke(cli, [str(a) for a in args])
        return r.exit_code, r.stdout, r.stderr
    # the second binlog still written
    grow(ROTATED, d, files, {files[0]: (ROTATED / files[0]).stat().st_size,
                             files[1]: (ROTATED / files[1]).stat().st_size - 100})
    code, _, err = run("tail", "--once", "--page-size", 256, "--span-min", 1024, "--index-dir", root, d)
    assert code == 0, err
    assert not list(d.glob("*.idx")) and (here / (files[0] + ".idx")).exists()
    code, out, _ = run("status", "--json", "--index-dir", root, d)
    assert code == 0 and [f["state"] for f in json.loads(out)["files"]][0] == "complete", out
    grow(ROTATED, d, files, {n: (ROTATED / n).stat().st_size for n in files})     # rotated: all closed
    (d / files[-1]).write_bytes((ROTATED / files[-1]).read_bytes())
    assert run("tail", "--once", "--page-size", 256, "--span-min", 1024, "--index-dir", root, d)[0] == 0
    other = tmp_path / "built"                      # what gtidx build --index-dir writes, same settings
    assert run("build", "-q", "--page-size", 256, "--span-min", 1024, "--index-dir", other, d)[0] == 0
    for n in files:
        assert (here / (n + ".idx")).read_bytes() == (other / str(d).lstrip("/") / (n + ".idx")).read_bytes(), n
    oracle = json.loads((ROTATED / "oracle.json").read_text())
    gtid, start, end = oracle["files"][2]["groups"][1]
    loc = api.seek(gtid, str(d), index_root=str(root))
    assert (loc.start, loc.end, loc.via) == (start, end, "index")
    code, out, _ = run("status", "--json", "--index-dir", root, d)
    assert [f["state"] for f in json.loads(out)["files"]] == ["complete"] * 4
    assert [f["state"] for f in json.loads(run("status", "--json", d)[1])["files"]] == ["missing"] * 4
    # the oldest purged: its index goes too
    (d / files[0]).unlink()
    (d / "binlog.index").write_text("".join(f"./{n}\n" for n in files[1:]))
    assert run("tail", "--once", "--index-dir", root, d)[0] == 0
    assert sorted(p.name for p in here.glob("*.idx")) == [n + ".idx" for n in files[1:]]
    code, _, err = run("tail", "--once", "--index-dir", "s3://bucket/idx/", d)
    assert code == 2 and err.count("\n") == 1 and "not an object store" in err, err


# -- beside the live MySQL 9.7: a mirror of its binlog directory --------------------------------

def mirror(datadir: Path, dst: Path, first: str) -> list:
    """The server's binlogs from ``first`` on, copied into ``dst`` as they
    grow: each file's new bytes appended, its header (the FDE's IN_USE flag,
    cleared by the server at rotation) rewritten, binlog.index copied."""
    names = [Path(line.strip()).name for line in (datadir / "binlog.index").read_text().splitlines()
             if line.strip()]
    names = [n for n in names if n >= first]
    for n in names:
        src, out = datadir / n, dst / n
        have = out.stat().st_size if out.exists() else 0
        with open(src, "rb") as f, open(out, "ab") as o:
            f.seek(have)
            o.write(f.read())
        with open(src, "rb") as f, open(out, "r+b") as o:
            o.write(f.read(64))
    tmp = dst / "binlog.index.tmp"            # the server too replaces it whole
    tmp.write_text("".join(f"./{n}\n" for n in names))
    os.replace(tmp, dst / "binlog.index")
    return names


@pytest.mark.live
def test_tail_beside_a_live_mysql(tmp_path):
    """gtidx tail (a process) on a mirror of the live MySQL 9.7's binlogs
    while it writes: rotations, kill -9 of the tail mid-file and a restart;
    every closed file's index equals `gtidx build --force`'s record for
    record and answers every GTID through the index as the walk does; the
    directory's catalog (made before the tail starts) is kept: each closed
    file's entry equals a walk of it."""
    from test_live_tail import TailProcess
    from tools.make_mysql_fixtures import Session
    from tools.mysql97 import MySQL97
    srv = MySQL97().ensure()
    s = Session(srv)
    s.sql("CREATE DATABASE IF NOT EXISTS mytail_live")
    s.sql("CREATE TABLE IF NOT EXISTS mytail_live.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(300))")
    s.sql("FLUSH BINARY LOGS")
    first = s.one("SHOW BINARY LOG STATUS")
    d = tmp_path / "mirror"
    d.mkdir()
    mirror(srv.datadir, d, first)
    admin.build_catalog(str(d))
    log = tmp_path / "tail.log"
    tail = TailProcess(d, log, ("--page-size", "256", "--span-min", "256", "--max-ratio", "0.9"))   # the last ones count
    tail.start()
    rnd = random.Random(15)
    kills = 0
    try:
        for rnd_i in range(4):
            for i in range(120):
                s.sql("INSERT INTO mytail_live.t (v) VALUES (%s)", ("x" * rnd.randrange(50, 300),))
                if i % 10 == 0:
                    mirror(srv.datadir, d, first)
                    time.sleep(0.02)
                if i == 60 and rnd_i % 2 == 0:
                    time.sleep(0.3)
                    tail.kill9()                  # mid-file
                    kills += 1
                    tail.start()
            s.sql("FLUSH BINARY LOGS")
            mirror(srv.datadir, d, first)
        names = mirror(srv.datadir, d, first)
        closed = names[:-1]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            metas = [IndexMeta.read(str(d / n) + ".idx") for n in closed]
            kept = {e["name"]: e for e in MysqlCatalog.load(storage.LOCAL, str(d)).files}
            if all(m is not None and not m.partial for m in metas) and \
                    all(kept.get(n, {}).get("size") == (d / n).stat().st_size for n in closed):
                break
            time.sleep(0.2)
        assert tail.stop() == 0
    finally:
        if tail.proc.poll() is None:
            tail.kill9()
    text = log.read_text()
    assert kills == 2 and "how=resumed" in text and "how=finished" in text and "rebuilt" not in text, text[-2000:]
    assert "Traceback" not in text and "level=error" not in text.lower(), text[-2000:]
    assert len(closed) >= 4
    kept = {e["name"]: e for e in MysqlCatalog.load(storage.LOCAL, str(d)).files}
    for n in closed:                # the tail's entries (taken while the mirror still rewrote headers)
        with open_binlog(d / n) as b:
            fresh = MysqlDescriber().entry(b)
        skip = ("name", "index", "history", "identity", "in_use")
        assert {k: v for k, v in kept[n].items() if k not in skip} == \
            {k: v for k, v in fresh.items() if k not in skip}, n
    for n in closed:
        meta = IndexMeta.read(str(d / n) + ".idx")
        assert meta is not None and not meta.partial, n
        clean = tmp_path / f"{n}.clean.idx"
        build_index(d / n, out=str(clean), page_size=256, span_min=256, max_ratio=None, force=True)
        assert records(str(d / n) + ".idx") == records(clean), n
    with MysqlSeries([str(d / n) for n in closed]) as logs:
        for n in closed:
            with open_binlog(d / n) as b:
                groups = [g for g in b.groups() if g.gtid is not None]
            for g in groups:
                loc = logs.locate(str(g.gtid))
                assert (Path(loc.file).name, loc.start, loc.end, loc.via) == (n, g.start, g.end, "index")
                at = logs.state_at(str(d / n), g.end)
                assert at.via == "index"


def test_tailer_mysql_shrunk_and_purged(tmp_path, caplog):
    """A growing MySQL binlog cut back (a server crash lost its tail) is
    reindexed and ends equal to a clean build; a purged binlog's index goes."""
    caplog.set_level(logging.INFO, logger="gtidx.tail")
    d = tmp_path / "dir"
    d.mkdir()
    settings = TailSettings(page_size=256, span_min=512, max_ratio=None)
    tailer = Tailer(str(d), settings)
    files = ["binlog.000014", "binlog.000015"]
    size = (ROTATED / files[1]).stat().st_size
    for cut in (size // 2, size // 4, size - 100):
        grow(ROTATED, d, files, {files[0]: (ROTATED / files[0]).stat().st_size, files[1]: cut})
        tailer.poll(retry_all=True)
        assert not tailer.failed, tailer.failures
    assert "binlog truncated or rewritten under the index" in caplog.text
    (d / files[1]).write_bytes((ROTATED / files[1]).read_bytes())     # closed
    (d / "binlog.000016").write_bytes(growing_copy((ROTATED / "binlog.000016").read_bytes(), 300))
    (d / "binlog.index").write_text("".join(f"./{n}\n" for n in files + ["binlog.000016"]))
    tailer.poll(retry_all=True)
    assert not tailer.failed
    assert records(str(d / files[1]) + ".idx") == clean_records(d / files[1], tmp_path, 256, 512)
    # PURGE BINARY LOGS TO 'binlog.000015'
    (d / files[0]).unlink()
    (d / "binlog.index").write_text("".join(f"./{n}\n" for n in files[1:] + ["binlog.000016"]))
    tailer.poll(retry_all=True)
    assert not tailer.failed
    assert not (d / (files[0] + ".idx")).exists() and "removed index of purged binlog" in caplog.text
