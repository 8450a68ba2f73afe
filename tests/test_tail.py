"""gtidx tail without a server: real binlogs replayed as if a server were
writing them, with crashes of the indexer at random points."""
from __future__ import annotations

import logging
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, growing_copy
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.index.build import build_index
from gtidx.index.files import IndexMeta, open_index
from gtidx.index.reader import IndexReader
from gtidx.tail import IncrementalIndex, TailSettings, Tailer
from gtidx.index.writer import IndexWriter, RecordPolicy

M118 = FIXTURES / "mariadb-11.8"
M1011 = FIXTURES / "mariadb-10.11"


def records(path) -> list:
    return [(r.offset, r.state) for r in IndexReader(Path(path).read_bytes()).records()]


@pytest.mark.parametrize("source, page_size, span_min", [
    (M118 / "mixed" / "master-bin.000002", 512, 2048),
    (M118 / "manydomains" / "master-bin.000025", 4096, 65536),
    (M1011 / "bigtrx" / "master-bin.000004", 256, 4096),
    (M1011 / "nonmono" / "master-bin.000008", 64, 1),
], ids=["mixed", "manydomains", "bigtrx", "nonmono"])
def test_incremental_index_with_crashes_equals_a_clean_build(tmp_path, source, page_size, span_min):
    data = source.read_bytes()
    binlog = tmp_path / source.name
    rnd = random.Random(len(data))
    cuts = sorted(rnd.sample(range(300, len(data)), min(40, len(data) - 300)))
    inc = None
    crashes = hot_reads = 0
    for cut in cuts + [len(data)]:
        binlog.write_bytes(growing_copy(data, cut) if cut < len(data) else data)
        with Binlog(binlog) as b:
            if inc is None:
                inc = IncrementalIndex(str(binlog), page_size=page_size, span_min=span_min)
                # a crash before the first leaf was flushed leaves nothing to resume
                assert inc.start(b) in ("resumed", "fresh (no index yet)", "fresh (no complete leaf on disk)")
            if cut == len(data):
                inc.finish(b, max_ratio=None)
                break
            inc.advance(b)
            # readers in other processes: complete pages plus a scan of the rest
            st = open_index(b)
            if st.usable:
                assert st.partial
                hot_reads += 1
                ends = [e for _, e, _ in b.group_spans()]
                with api.BinlogSeries([str(binlog)]) as logs, api.BinlogSeries([str(binlog)], use_index=False) as scan:
                    for off in rnd.sample(ends, min(5, len(ends))):
                        got = logs.state_at(binlog, off)
                        assert got.via == "index" and got.state == scan.state_at(binlog, off).state
            st.close()
        if rnd.random() < 0.4:     # kill -9: no finish, maybe a torn last page
            idx = Path(inc.path)
            inc.close()
            inc = None
            crashes += 1
            if rnd.random() < 0.5 and idx.exists() and idx.stat().st_size:
                with open(idx, "r+b") as f:
                    f.truncate(idx.stat().st_size - rnd.randrange(1, page_size))
    assert crashes >= 5
    assert hot_reads >= 5 or len(data) < 20000      # nonmono is one small leaf
    clean = tmp_path / "clean.idx"
    build_index(binlog, out=str(clean), page_size=page_size, span_min=span_min, max_ratio=None)
    assert records(inc.path) == records(clean)
    assert Path(inc.path).read_bytes() == clean.read_bytes()
    # what the walks saw, across the crashes and resumes, is what one build saw
    assert IndexMeta.read(inc.path).seen() == IndexMeta.read(str(clean)).seen() is not None
    with Binlog(binlog) as b:
        st = open_index(b)
        assert st.usable and not st.partial and st.owner == "gtidx"
        st.close()


def test_resume_rereads_only_the_unflushed_tail(tmp_path):
    src = M118 / "mixed" / "master-bin.000002"
    data = src.read_bytes()
    binlog = tmp_path / src.name
    binlog.write_bytes(growing_copy(data, len(data) - 1000))
    with Binlog(binlog) as b:
        inc = IncrementalIndex(str(binlog), page_size=512, span_min=2048)
        inc.start(b)
        inc.advance(b)
        processed, on_disk = inc.processed, inc.on_disk_prefix()
        inc.close()
        again = IncrementalIndex(str(binlog), page_size=512, span_min=2048)
        assert again.start(b) == "resumed"
        assert again.processed == on_disk and processed - on_disk < 0.05 * len(data)
        again.close()


def test_a_rewritten_binlog_restarts_the_index(tmp_path):
    src = M118 / "mixed" / "master-bin.000002"
    data = src.read_bytes()
    binlog = tmp_path / src.name
    binlog.write_bytes(growing_copy(data, 2_000_000))
    with Binlog(binlog) as b:
        inc = IncrementalIndex(str(binlog), page_size=512, span_min=2048)
        inc.start(b)
        inc.advance(b)
        inc.close()
    other = (M118 / "bigtrx" / "master-bin.000004").read_bytes()
    binlog.write_bytes(growing_copy(other, 1_500_000))          # same name, another binlog
    with Binlog(binlog) as b:
        inc = IncrementalIndex(str(binlog), page_size=512, span_min=2048)
        assert inc.start(b).startswith("fresh (binlog changed")
        inc.advance(b)
        inc.close()


def test_tailer_once_repeatedly_gives_the_clean_build(tmp_path):
    """`gtidx tail --once` run again and again while files grow and rotate."""
    src = M1011 / "multifile"
    d = tmp_path / "binlogs"
    d.mkdir()
    names = [p.name for p in sorted(src.glob("master-bin.0*"))]
    datas = {n: (src / n).read_bytes() for n in names}
    settings = TailSettings(page_size=256, span_min=4096, max_ratio=None, server_grace=0)
    rnd = random.Random(3)
    for i, name in enumerate(names):
        (d / "master-bin.index").write_text("".join(f"./{n}\n" for n in names[:i + 1]))
        data = datas[name]
        for cut in sorted(rnd.sample(range(1000, len(data)), 4)) + [len(data)]:
            (d / name).write_bytes(growing_copy(data, cut) if cut < len(data) else data)
            Tailer(str(d), settings).run(once=True)
    Tailer(str(d), settings).run(once=True)
    for name in names:
        clean = tmp_path / f"{name}.clean.idx"
        build_index(d / name, out=str(clean), page_size=256, span_min=4096, max_ratio=None)
        assert (d / f"{name}.idx").read_bytes() == clean.read_bytes(), name
        assert IndexMeta.read(str(d / f"{name}.idx")).state == "complete"
    # purge the first two: their indexes go too
    (d / "master-bin.index").write_text("".join(f"./{n}\n" for n in names[2:]))
    for n in names[:2]:
        (d / n).unlink()
    Tailer(str(d), settings).run(once=True)
    assert not (d / f"{names[0]}.idx").exists() and not (d / f"{names[1]}.idx").exists()


def test_tailer_leaves_server_indexes_alone(tmp_path):
    d = tmp_path / "binlogs"
    shutil.copytree(M118 / "multifile", d)
    before = {p.name: p.read_bytes() for p in d.glob("*.idx")}
    Tailer(str(d), TailSettings(server_grace=0)).run(once=True)
    assert {p.name: p.read_bytes() for p in d.glob("*.idx")} == before


@pytest.mark.parametrize("source, page_size, span_min", [
    (M1011 / "multifile" / "master-bin.000019", 256, 512),
    (M1011 / "mixed" / "master-bin.000002", 512, 8192),      # as test_live_tail's tail
], ids=["multifile", "mixed"])
def test_a_crash_that_cuts_the_group_that_sealed_pages_is_finished_cleanly(tmp_path, source, page_size, span_min):
    """A running tail has indexed the active binlog up to a record whose
    arrival sealed pages (the leaf before it, maybe its parents); the server
    crashes and the binlog loses that group; the server starts again in a new
    file. The pages on disk were sealed by a record the binlog no longer
    holds: the tail resumes from them and finishes the file, and the index is
    the clean build of what is left (it used to die: `gtidx: internal error:
    _ReplayMismatch: page N on disk differs from the replay`, exit 3)."""
    data = source.read_bytes()
    with Binlog(source) as b:
        recs = RecordPolicy(span_min).records(b)
    writer, sealing = IndexWriter(page_size, lambda page: None), []
    for offset, gtids in recs:                   # the records whose arrival seals pages
        before = writer.pages_written
        writer.add(offset, gtids)
        if writer.pages_written > before:
            sealing.append(offset)
    assert len(sealing) >= 5
    nxt = (M1011 / "multifile" / "master-bin.000020").read_bytes()
    settings = TailSettings(page_size=page_size, span_min=span_min, max_ratio=None, server_grace=0)
    for end in sealing:
        d = tmp_path / f"at{end}"
        d.mkdir()
        crashed, new = d / "master-bin.000001", d / "master-bin.000002"
        (d / "master-bin.index").write_text("./master-bin.000001\n")
        crashed.write_bytes(growing_copy(data, end))
        t = Tailer(str(d), settings)
        t.poll()
        inc = t.active[str(crashed)]
        assert inc.processed == end and inc.offsets[-1] == end and not t.failed
        # the crash: the group that ends at `end` is lost; the server starts a new binlog
        with open(crashed, "r+b") as f:
            f.truncate(end - 1)
        new.write_bytes(growing_copy(nxt, 4096))
        (d / "master-bin.index").write_text("./master-bin.000001\n./master-bin.000002\n")
        t.poll()
        assert not t.failed, end
        clean = d / "clean.idx"
        build_index(crashed, out=str(clean), page_size=page_size, span_min=span_min, max_ratio=None,
                    force=True)
        assert Path(f"{crashed}.idx").read_bytes() == clean.read_bytes(), end
        assert IndexMeta.read(f"{crashed}.idx").state == "complete"
        assert [p.name for p in d.iterdir() if p.name.startswith(".master-bin.000001.idx.")] == []
        for inc in t.active.values():
            inc.close()


_SIGTERM_EVERYWHERE = r'''
import os, signal, sys
from gtidx.tail import Tailer, TailSettings
d = sys.argv[1]
Tailer(d, TailSettings(server_grace=0)).run(once=True)          # the binlog is indexed: idle polls
count = [0, 0]

def tracer(frame, event, arg):
    return line

def line(frame, event, arg):
    # every line run once the tail's handler is in place (a SIGTERM before
    # that is the default action's, and kills the process)
    if event == "line" and signal.getsignal(signal.SIGTERM) == t.stop:
        count[0] += 1
        if count[0] == count[1]:
            os.kill(os.getpid(), signal.SIGTERM)
            # the point is reached: the rest of the run goes untraced (the trace
            # only counts lines; tracing every line of the way out costs a
            # quarter of the test's time)
            sys.settrace(None)
            while frame is not None:
                frame.f_trace = None
                frame = frame.f_back
            return None
    return line

t = Tailer(d, TailSettings(interval=0.01, repoll=0.01, server_grace=0))
t.poll = lambda poll=t.poll, **kw: (poll(**kw), t.stop())        # warm: what its first run imports (inotify)
t.run()
t = Tailer(d, TailSettings(interval=0.01, repoll=0.01, server_grace=0))
t.poll = lambda poll=t.poll, **kw: (poll(**kw), t.stop())        # one look, then stop: count the lines
sys.settrace(tracer)
t.run()
sys.settrace(None)
lines = count[0]
print("points", lines, flush=True)
for n in range(1, lines + 1):                                    # SIGTERM at the n-th line
    count[:] = [0, n]
    t = Tailer(d, TailSettings(interval=0.01, repoll=0.01, server_grace=0))
    sys.settrace(tracer)
    t.run()                                                      # returns: a clean stop
    sys.settrace(None)
    print("stopped", n, flush=True)                              # progress: the parent watches for a hang
print("stopped cleanly at", lines, "points")
'''
_SIGTERM_STALL_S = 60


def test_sigterm_at_any_line_of_the_loop_stops_the_tail(tmp_path):
    """SIGTERM delivered at every line a following tail runs (its loop, a
    look at the directory, the wait between looks, the standard library
    underneath; woken by inotify, its watch made, armed and waited on):
    each time `run` returns. The handler used to set a
    threading.Event; at a line where the wait held that Event's lock it
    blocked on it for good: the process hung, deaf to further SIGTERMs."""
    src = M1011 / "nonmono" / "master-bin.000008"
    d = tmp_path / "binlogs"
    d.mkdir()
    shutil.copy(src, d / src.name)
    (d / "master-bin.index").write_text(f"./{src.name}\n")
    script = tmp_path / "sigterm_everywhere.py"
    script.write_text(_SIGTERM_EVERYWHERE)
    err = tmp_path / "stderr"
    # A hang is a point that never stops: the script reports each point it
    # stopped at (a point takes milliseconds of CPU), and silence for
    # _SIGTERM_STALL_S is the hang, whatever the machine's load makes the
    # whole run take.
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, str(script), str(d)], stdout=subprocess.PIPE, stderr=stderr,
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = b""
    try:
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], _SIGTERM_STALL_S)
            if not ready:
                last = out.decode().splitlines()[-1:]
                pytest.fail(f"the tail hung on a SIGTERM (nothing for {_SIGTERM_STALL_S} s after {last})")
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            out += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
        returncode = proc.wait()
        proc.stdout.close()
    assert returncode == 0, err.read_text()[-3000:]
    stdout = out.decode()
    assert int(stdout.split()[-2]) >= 100, stdout[-3000:]


def test_a_bug_in_one_file_does_not_end_the_sidecar(tmp_path, monkeypatch, caplog):
    """An exception that is not a GtidxError (a bug of ours, here made to
    happen while one binlog is indexed) is logged once as an internal error,
    that file backs off like any failure, the other files are indexed, and
    the next attempt after the bug is gone finishes it: the clean build."""
    src = M1011 / "multifile"
    d = tmp_path / "binlogs"
    shutil.copytree(src, d)
    for p in d.glob("*.idx"):
        p.unlink()
    names = sorted(p.name for p in d.glob("master-bin.0*"))
    broken = names[1]
    real = Tailer._handle

    def handle(self, path, last):
        if os.path.basename(path) == broken:
            raise ValueError("a bug")
        return real(self, path, last)
    monkeypatch.setattr(Tailer, "_handle", handle)
    caplog.set_level(logging.DEBUG, logger="gtidx.tail")
    settings = TailSettings(page_size=256, span_min=4096, max_ratio=None, server_grace=0)
    t = Tailer(str(d), settings)
    t.run(once=True)                                  # returns: no exception escapes
    assert set(t.failures) == {str(d / broken)}
    errors = [(r.getMessage(), r.fields) for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    (what, fields), = errors
    assert what == "cannot index" and fields["file"] == str(d / broken)
    assert "internal error: ValueError: a bug" in str(fields["error"])
    assert all((d / f"{n}.idx").exists() for n in names if n != broken)
    monkeypatch.setattr(Tailer, "_handle", real)
    t.run(once=True)
    assert not t.failures
    clean = tmp_path / "clean.idx"
    build_index(d / broken, out=str(clean), page_size=256, span_min=4096, max_ratio=None)
    assert (d / f"{broken}.idx").read_bytes() == clean.read_bytes()


def test_tail_records_the_identity_of_a_binlog_it_finished_once_quiet(tmp_path):
    """A binlog tail finishes has just been written: its index's fingerprint
    gets no identity then (``QUIET_S``), so every cold lookup would read its
    first and last 64 KiB to trust it. Once the binlog has been quiet for
    QUIET_S, a later poll records the identity (the content checked first);
    the index itself is not written again."""
    from gtidx.index.meta import QUIET_S, local_identity
    src = M1011 / "multifile"
    d = tmp_path / "binlogs"
    d.mkdir()
    first, second = [p.name for p in sorted(src.glob("master-bin.0*"))][:2]
    data = (src / first).read_bytes()
    (d / "master-bin.index").write_text(f"./{first}\n")
    (d / first).write_bytes(growing_copy(data, len(data) // 2))
    tailer = Tailer(str(d), TailSettings(page_size=256, span_min=4096, max_ratio=None, server_grace=0))
    tailer.poll()
    (d / first).write_bytes(data)
    (d / "master-bin.index").write_text(f"./{first}\n./{second}\n")
    second_data = (src / second).read_bytes()
    (d / second).write_bytes(growing_copy(second_data, len(second_data) // 2))
    tailer.poll()
    idx = str(d / f"{first}.idx")
    meta = IndexMeta.read(idx)
    assert meta.state == "complete" and meta.binlog_etag is None
    inode = os.stat(idx).st_ino
    time.sleep(QUIET_S + 0.2)
    tailer.poll()
    with Binlog(d / first) as b:
        assert IndexMeta.read(idx).binlog_etag == local_identity(b) is not None
        assert IndexMeta.read(idx).same_object(b)
    assert os.stat(idx).st_ino == inode and IndexMeta.read(idx).replace(binlog_etag=None) == meta


def test_tail_says_missing_for_a_missing_index(tmp_path, caplog):
    """Why a closed binlog's index was built: "missing" when there was none,
    "not a regular file" when something else was at its name (a FIFO)."""
    d = tmp_path / "binlogs"
    d.mkdir()
    for name in ("master-bin.000018", "master-bin.000019"):
        shutil.copy(M1011 / "multifile" / name, d / name)
    os.mkfifo(d / "master-bin.000019.idx")
    caplog.set_level(logging.INFO, logger="gtidx.tail")
    Tailer(str(d), TailSettings(server_grace=0)).run(once=True)
    why = {os.path.basename(r.fields["file"]): r.fields["why"] for r in caplog.records if r.getMessage() == "built"}
    assert why == {"master-bin.000018": "missing", "master-bin.000019": "not a regular file"}


def test_sigterm_ends_a_tail_with_a_fifo_at_the_catalog(tmp_path):
    """A FIFO at gtidx-catalog.json, the catalog a following tail keeps:
    read like a file, its open blocked the tail for good, deaf to SIGTERM
    (the handler sets a flag; the interrupted open is resumed). Refused
    without blocking, it is written again as a catalog, and SIGTERM ends the
    tail promptly with its documented clean exit, 0."""
    d = tmp_path / "binlogs"
    d.mkdir()
    for p in (M1011 / "multifile").glob("master-bin.0*"):
        shutil.copy(p, d / p.name)
    os.mkfifo(d / "gtidx-catalog.json")
    log = tmp_path / "tail.log"
    with open(log, "w") as err:
        tail = subprocess.Popen([sys.executable, "-m", "gtidx", "tail", "--interval", "0.1", str(d)], stderr=err,
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 20
        while "event=catalog updated" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        tail.send_signal(signal.SIGTERM)
        try:
            rc = tail.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the tail did not end on SIGTERM: {log.read_text()[-2000:]}")
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
    assert rc == 0, log.read_text()[-2000:]
    assert "catalog damaged, making it again" in log.read_text()
    assert (d / "gtidx-catalog.json").is_file()


def test_a_tail_that_keeps_its_binlog_open_sees_it_grown_rewritten_and_replaced(tmp_path, caplog):
    """One tail's looks at a growing binlog it keeps open between them: bytes
    appended are indexed; the file rewritten in place (the same inode, no
    smaller at the next look) or replaced by another file at its name is
    indexed again; closed, its index equals a clean build."""
    a = (M1011 / "bigtrx" / "master-bin.000004").read_bytes()
    b = (M118 / "mixed" / "master-bin.000002").read_bytes()      # larger
    d = tmp_path / "binlogs"
    d.mkdir()
    (d / "master-bin.index").write_text("./master-bin.000002\n")
    path = d / "master-bin.000002"
    settings = TailSettings(page_size=256, span_min=4096, max_ratio=None, server_grace=0)
    t = Tailer(str(d), settings)
    caplog.set_level(logging.INFO, logger="gtidx.tail")

    def look(data: bytes) -> None:          # written as a server would: in place, the same file
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        t.poll()
        assert not t.failed

    for cut in (3000, len(a) // 3, len(a) // 2):
        look(growing_copy(a, cut))
    assert t.state.reached[str(path)][0] > len(a) // 3
    look(growing_copy(b, len(a) // 2 + 1000))              # rewritten in place, not smaller
    reindexed = [r for r in caplog.records if "rewritten" in r.getMessage()]
    assert len(reindexed) == 1 and reindexed[0].fields["size"] >= reindexed[0].fields["indexed"]
    look(growing_copy(b, len(b) // 2))
    other = tmp_path / "other"
    other.write_bytes(growing_copy(a, len(a) - 100))
    os.replace(other, path)                                 # another file at the name
    t.poll()
    look(a)                                                 # closed
    clean = tmp_path / "clean.idx"
    build_index(path, out=str(clean), page_size=256, span_min=4096, max_ratio=None)
    assert (d / "master-bin.000002.idx").read_bytes() == clean.read_bytes()
    assert IndexMeta.read(str(d / "master-bin.000002.idx")).state == "complete"
