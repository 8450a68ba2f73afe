"""How gtidx reads files that change under it or are not what they seem.

* Files that shrink under a long-lived reader (issue 11 item 6): a reader in
  its own process holds a binlog and its index open while another process
  truncates them; lookups must give a GtidxError or the right answer, never
  kill the reader (SIGBUS from a mapping past the new end of the file).
* Non-regular files (item 8): a FIFO, socket or directory as a binlog or as
  FILE.idx must be refused (exit 2, "not a regular file"), never block.
* Huge and sparse indexes, and address-space limits (item 12): judged from
  their header and last pages in bounded memory and time; a lookup falls
  back to a scan.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from gtidx.errors import BadInputError
from gtidx.index.build import build_index
from gtidx.index.files import open_index
from gtidx.binlog.mariadb import Binlog, IN_USE_FLAG
from gtidx.gtid import Position
from gtidx.filebuf import ReadFile
from gtidx.index.reader import IndexReader
import gtidx.index.reader

ROOT = Path(__file__).resolve().parent.parent
MIXED = FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002"
MANY = FIXTURES / "mariadb-10.11" / "manydomains" / "master-bin.000024"
MANY118 = FIXTURES / "mariadb-11.8" / "manydomains" / "master-bin.000025"   # with the server's own .idx
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def oracle(path: Path) -> dict:
    o = json.loads((path.parent / "oracle.json").read_text())
    return next(f for f in o["files"] if f["name"] == path.name)


def copy(src: Path, d: Path, *, in_use: bool = False) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    dst = d / src.name
    data = bytearray(src.read_bytes())
    if in_use:
        data[4 + 17] |= IN_USE_FLAG        # still being written: the FDE's CRC ignores the flag
    dst.write_bytes(data)
    return dst


# -- a reader in its own process ----------------------------------------------------------------

READER = r"""
import json, sys
import gtidx.index.reader
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import GtidxError

path, binlog, paged = sys.argv[1], sys.argv[2], sys.argv[3] == "paged"
warm, queries = json.loads(sys.argv[4]), json.loads(sys.argv[5])
if paged:
    gtidx.index.reader.WHOLE_MAX = 0      # read the index page by page, as a big one is

def ask(logs, b, q):
    try:
        if q[0] == "pos":
            return {"ok": str(logs.state_at(binlog, q[1]).position)}
        if q[0] == "locate":
            loc = logs.locate(q[1])
            return {"ok": [loc.start, loc.end]}
        if q[0] == "groups":
            return {"ok": [[str(g.gtid), g.start, g.end] for g in b.groups()]}
    except GtidxError as e:
        return {"error": type(e).__name__, "message": str(e)}

logs = api.BinlogSeries.from_path(path)
b = Binlog(binlog)
warm = [ask(logs, b, q) for q in warm]              # the index open, some pages read
print("ready", flush=True)
sys.stdin.readline()                                 # the file changes now
print(json.dumps([ask(logs, b, q) for q in queries]), flush=True)
"""


def run_reader(path: Path, binlog: Path, queries: list, change, *, source: Path, paged: bool = False) -> list:
    """Start a reader holding ``path`` open (a lookup set) and ``binlog``
    (a Binlog), with one lookup done near the start of the file; let
    ``change()`` alter the files, then ask ``queries``. The reader must
    survive: its answers are returned."""
    early = next(o for o, a in oracle(source)["pos"] if a is not None and o > 1000)
    p = subprocess.Popen([sys.executable, "-c", READER, str(path), str(binlog),
                          "paged" if paged else "whole", json.dumps([["pos", early]]), json.dumps(queries)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        change()
        out, err = p.communicate("go\n", timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != -signal.SIGBUS, "the reader died of SIGBUS"
    assert p.returncode == 0, (p.returncode, err[-2000:])
    return json.loads(out.strip().splitlines()[-1])


def pos_queries(path: Path, n: int = 40) -> tuple[list, list]:
    """``n`` state_at queries spread over the file, and the server's answers."""
    answers = [(o, a) for o, a in oracle(path)["pos"] if a is not None and o > 4]
    step = max(1, len(answers) // n)
    picked = answers[::step][-n:]
    picked.reverse()                   # the end of the file first: most likely past a cut
    return [["pos", o] for o, _ in picked], [a for _, a in picked]


def check_pos_answers(got: list, expected: list) -> tuple[int, int]:
    right = errors = 0
    for g, want in zip(got, expected):
        if "error" in g:
            errors += 1
        else:
            assert Position.parse(g["ok"]) == Position.parse(want), (g, want)
            right += 1
    return right, errors


def test_growing_binlog_truncated_under_a_reader(tmp_path):
    """A binlog with IN_USE set (a server's active one) is cut by crash
    recovery while a reader holds it: the reader answers or says the file
    shrank (GtidxIOError), it does not die of SIGBUS."""
    b = copy(MIXED, tmp_path / "d", in_use=True)
    queries, expected = pos_queries(MIXED)
    groups = [["groups"]]
    got = run_reader(b, b, queries + groups, lambda: os.truncate(b, 4096), source=MIXED)
    right, errors = check_pos_answers(got[:-1], expected)
    assert errors, "nothing past the cut was asked"
    shrank = [g for g in got if "error" in g and "shrank" in g["message"]]
    assert shrank and all(g["error"] == "GtidxIOError" for g in shrank), got
    assert str(b) in shrank[0]["message"] and "offset" in shrank[0]["message"]
    # the walk to the end of the file: an error, or every group as before
    assert "error" in got[-1] or got[-1]["ok"] == oracle(MIXED)["groups"]


@pytest.mark.parametrize("paged", [False, True], ids=["whole", "paged"])
def test_index_truncated_in_place_under_a_reader(tmp_path, paged):
    """An index cut in place under a reader that has it open (the old
    `gtidx tail` did this): lookups answer right (from the index pages
    already read, or by a scan), never SIGBUS."""
    b = copy(MANY, tmp_path / "d")
    r = build_index(b, page_size=64, span_min=1, max_ratio=None)
    assert r.action == "built" and r.pages > 1000
    idx = Path(str(b) + ".idx")
    queries, expected = pos_queries(MANY)
    got = run_reader(b, b, queries, lambda: os.truncate(idx, 64 * 10), source=MANY, paged=paged)
    right, errors = check_pos_answers(got, expected)
    assert right == len(expected) and not errors, got       # a scan answers what the index cannot


def test_server_index_truncated_in_place_under_a_reader(tmp_path):
    """The same with the server's own index (MariaDB 11.8 writes FILE.idx)."""
    d = tmp_path / "d"
    b = copy(MANY118, d)
    shutil.copy(str(MANY118) + ".idx", str(b) + ".idx")
    queries, expected = pos_queries(MANY118)
    got = run_reader(b, b, queries, lambda: os.truncate(str(b) + ".idx", 4096), source=MANY118, paged=True)
    assert check_pos_answers(got, expected) == (len(expected), 0)


def test_growing_binlog_and_index_truncated_under_a_reader(tmp_path):
    """Crash recovery cuts the active binlog while a reader holds it and
    its partial index."""
    b = copy(MIXED, tmp_path / "d", in_use=True)
    r = build_index(b, page_size=64, span_min=1, max_ratio=None, force=True)
    assert r.action == "built"
    idx = Path(str(b) + ".idx")
    queries, expected = pos_queries(MIXED)

    def cut():
        os.truncate(b, 20000)
        os.truncate(idx, 640)
    got = run_reader(b, b, queries, cut, source=MIXED, paged=True)
    right, errors = check_pos_answers(got, expected)
    assert errors


def test_closed_binlog_replaced_by_rename_under_a_reader(tmp_path):
    """A closed binlog (mapped) replaced by a shorter file of the same name:
    the reader keeps reading the file it opened, and answers right."""
    b = copy(MIXED, tmp_path / "d")
    build_index(b)
    queries, expected = pos_queries(MIXED)

    def replace():
        short = tmp_path / "short"
        short.write_bytes(MIXED.read_bytes()[:5000])
        os.replace(short, b)
        os.unlink(str(b) + ".idx")
    got = run_reader(b, b, queries + [["groups"]], replace, source=MIXED)
    assert check_pos_answers(got[:-1], expected) == (len(expected), 0)
    assert got[-1]["ok"] == oracle(MIXED)["groups"]


def test_closed_binlog_truncated_in_place_under_a_reader(tmp_path):
    """The one way a server shrinks a closed binlog: semi-sync replica crash
    recovery (MDEV-21117) cuts a binlog from the checkpoint file on, which
    may have been rotated already. A lookup or walk that starts after the
    cut says the file shrank; the reader does not die."""
    b = copy(MIXED, tmp_path / "d")
    build_index(b)
    queries, expected = pos_queries(MIXED)
    got = run_reader(b, b, queries + [["groups"]], lambda: os.truncate(b, 8192), source=MIXED)
    right, errors = check_pos_answers(got[:-1], expected)
    assert errors and "error" in got[-1] and "shrank" in got[-1]["message"], got


WALKER = r"""
import json, sys
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import GtidxError
from gtidx.index.build import build_index

mode, path = sys.argv[1], sys.argv[2]

def pause():
    print("walking", flush=True)
    sys.stdin.readline()                   # the file is cut now, the walk goes on

try:
    if mode == "scan":                     # what `gtidx scan` and a locate walk do
        n = 0
        with Binlog(path) as b:
            for g in b.groups():
                n += 1
                if n == 10:
                    pause()
        out = {"ok": n}
    else:                                  # an index build, its walk paused after the first batch
        walk = Binlog.group_batches
        def paused(self, *a, **kw):
            for i, batch in enumerate(walk(self, *a, **kw)):
                if i == 1:
                    pause()
                yield batch
        Binlog.group_batches = paused
        out = {"ok": build_index(path, page_size=64, span_min=1, max_ratio=None).action}
except GtidxError as e:
    out = {"error": type(e).__name__, "message": str(e)}
print(json.dumps(out), flush=True)
"""


@pytest.mark.parametrize("mode", ["scan", "build"])
def test_closed_binlog_truncated_during_a_walk(tmp_path, mode):
    """Semi-sync replica crash recovery (MDEV-21117) can cut a binlog that is
    already rotated and closed, also while a walk of it runs (a build, a
    scan, a lookup's walk, tail finishing the file). The walk is paused in a
    reader process, the file cut in place behind it, and the walk resumed:
    it says the file shrank (or answers from what it had read), it never
    dies of SIGBUS (which a mapped closed binlog did)."""
    b = copy(MIXED, tmp_path / "d")
    assert not Binlog(b).growing
    p = subprocess.Popen([sys.executable, "-c", WALKER, mode, str(b)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        assert p.stdout.readline().strip() == "walking", p.stderr.read()
        os.truncate(b, 300_000)
        out, err = p.communicate("go\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != -signal.SIGBUS, "the walker died of SIGBUS"
    assert p.returncode == 0, (p.returncode, err[-2000:])
    got = json.loads(out.strip().splitlines()[-1])
    assert got.get("error") == "GtidxIOError" and "shrank" in got["message"], got
    assert str(b) in got["message"]
    assert not Path(str(b) + ".idx").exists()
    assert sorted(os.listdir(b.parent)) == [b.name]        # no temp file left either


def largest(fixture: str) -> Path:
    d = FIXTURES / fixture
    return max((p for p in d.iterdir() if p.name[-6:].isdigit()), key=lambda p: p.stat().st_size)


@pytest.mark.parametrize("fixture", ["mariadb-10.11/mixed", "mariadb-10.11/nochecksum", "mariadb-10.11/xa",
                                     "mariadb-11.8/bigtrx", "mariadb-11.8/nonmono"])
@pytest.mark.parametrize("window", [32, 33, 45, 64, 97, 1000])
def test_walks_resume_exactly_at_window_edges(monkeypatch, tmp_path, fixture, window):
    """Walks read through a moving window (filebuf.Window) and resume where
    an unpack did not fit: with windows of 32 bytes (the largest read at one
    offset, a GTID event's head) and up, every event and GTID head straddles
    an edge somewhere; groups, batches, states and framing still equal the
    server's answers (oracle.json), closed and growing."""
    import gtidx.filebuf
    src = largest(fixture)
    o = oracle(src)
    monkeypatch.setattr(gtidx.filebuf, "WINDOW_FIRST", window)
    monkeypatch.setattr(gtidx.filebuf, "WINDOW", window)
    answers = [(off, a) for off, a in o["pos"]]
    picked = answers[::max(1, len(answers) // 12)] + answers[-3:]
    for path in (src, copy(src, tmp_path, in_use=True)):
        with Binlog(path) as b:
            groups = [[str(g.gtid), g.start, g.end] for g in b.groups()]
            if b.growing:        # a last group without its terminator is not reported yet
                assert groups == o["groups"][:len(groups)] and len(groups) >= len(o["groups"]) - 1
            else:
                assert groups == o["groups"]
            batched = [f"{x[3]}-{x[1]}-{x[2]}" for _, gtids, _ in b.group_batches(3 * window)
                       for x in gtids]
            assert batched == [g[0] for g in groups]
            assert b.complete_end(4) == o["size"]
            assert sum(ln for _, _, _, ln in b.headers()) == o["size"] - 4
            for off, want in picked:
                got = b.state_at(off)
                assert (got is None) == (want is None), off
                if want is not None:
                    assert Position.parse(str(got.position())) == Position.parse(want), off


def test_binlogs_read_only_what_they_touch(tmp_path):
    """No binlog is mapped (any binlog can shrink, a closed one too): opening
    reads the preamble, a walk reads through a moving window (the chunk cache
    stays as it was), a lookup's event read fills its chunks; a growing and a
    closed copy answer alike."""
    b = copy(MIXED, tmp_path / "g", in_use=True)
    closed = copy(MIXED, tmp_path / "c")
    with Binlog(b) as g, Binlog(closed) as c:
        assert g.growing and not c.growing
        missing = c._private._missing
        assert 0 < missing < len(c._private._have) and g._private._missing == missing
        assert list(g.groups()) == list(c.groups())
        late = oracle(MIXED)["groups"][-5][1]
        assert g.state_at(late) == c.state_at(late)
        assert c._private._missing == missing          # the walks did not fill the cache
        maps = Path("/proc/self/maps").read_text()
        assert str(b) not in maps and str(closed) not in maps
        assert c.event_ok(late)                          # a lookup reads its event: the CRC check,
        assert c._private._missing == missing          # straight from the file (not kept either)
        assert g.buffer[late:late + 100] == c.buffer[late:late + 100]


def test_a_growing_binlog_read_again_keeps_its_buffer_until_something_is_kept_in_it(tmp_path):
    """A tail's look at a growing binlog (``Binlog.refresh``) reads through
    walks and one-off reads only: the buffer behind ``mapping`` (which the
    open filled with the preamble) is not made again for it, and the next
    look goes on with it at the new size. Once a read kept chunks in it, the
    next look gets a fresh one: the bytes read before are read again, never
    served from before (the file may have been rewritten meanwhile)."""
    data = MIXED.read_bytes()
    path = tmp_path / MIXED.name
    grown = bytearray(data[:len(data) // 2])
    grown[4 + 17] |= IN_USE_FLAG
    path.write_bytes(grown)
    with Binlog(path) as b:
        assert b._private._mem is not None                 # the preamble, read at open
        assert b.refresh(os.stat(path)) and b._private._mem is None
        buf = b._private
        walked = list(b.groups())
        assert walked and b._private is buf and buf._mem is None      # the walk kept nothing
        with open(path, "ab") as f:
            f.write(data[len(grown):len(grown) + 50_000])
        assert b.refresh(os.stat(path)) and b._private is buf and b.size == len(grown) + 50_000
        with Binlog(path) as again:
            assert [g.gtid for g in b.groups()] == [g.gtid for g in again.groups()]
        late = walked[-1].start
        b.fill(late, late + 19)                                  # kept in the buffer
        assert b.mapping[late:late + 19].tobytes() == data[late:late + 19] and b._private._mem is not None
        with open(path, "r+b") as f:                     # rewritten in place, then grown
            f.seek(late)
            f.write(bytes(19))
            f.seek(0, 2)
            f.write(data[f.tell():f.tell() + 1000])
        assert b.refresh(os.stat(path)) and b._private is not buf
        b.fill(late, late + 19)
        assert b.mapping[late:late + 19].tobytes() == bytes(19)


# -- non-regular files ----------------------------------------------------------------------------

def gtidx_cli(*args, timeout: float = 20) -> subprocess.CompletedProcess:
    """The CLI in a subprocess: a hang fails the test (TimeoutExpired)."""
    return subprocess.run([sys.executable, "-m", "gtidx", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=ENV, stdin=subprocess.DEVNULL)


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "master-bin.000001"
    os.mkfifo(p)
    return p


@pytest.mark.parametrize("cmd", [
    ["seek", "--gtid", "0-1-5"], ["pos", None, "4"], ["scan"], ["build"], ["build", "--force"],
])
def test_fifo_as_binlog_is_refused(fifo, cmd):
    args = [fifo if a is None else a for a in cmd]
    if None not in cmd:
        args.append(fifo)
    r = gtidx_cli(*args)
    assert "not a regular file (a FIFO)" in r.stdout + r.stderr, r
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("cmd", ["info", "verify", "dump"])
def test_fifo_as_index_is_refused_by_index_commands(tmp_path, cmd):
    b = copy(MIXED, tmp_path)
    os.mkfifo(str(b) + ".idx")
    r = gtidx_cli(cmd, str(b) + ".idx")
    assert r.returncode == 2 and "not a regular file (a FIFO)" in r.stderr, r


def test_fifo_as_index_falls_back_to_a_scan(tmp_path):
    b = copy(MIXED, tmp_path)
    idx = str(b) + ".idx"
    os.mkfifo(idx)
    offset, answer = next((o, a) for o, a in reversed(oracle(MIXED)["pos"]) if a)
    r = gtidx_cli("pos", "--json", b, offset)
    assert r.returncode == 0, r
    doc = json.loads(r.stdout)
    assert doc["via"] == "scan" and Position.parse(doc["position"]) == Position.parse(answer)
    assert "not a regular file" in r.stderr          # the one warning
    r = gtidx_cli("status", tmp_path)
    assert r.returncode == 0 and "not a regular file" in r.stdout, r
    # build replaces the FIFO with a real index (by rename: nothing is written into the FIFO)
    r = gtidx_cli("build", b)
    assert r.returncode == 0, r
    assert Path(idx).is_file()
    assert gtidx_cli("pos", "--json", b, offset).stdout.count('"via": "index"') == 1


def test_fifo_named_like_a_binlog_in_a_directory(tmp_path):
    b = copy(MIXED, tmp_path)
    os.mkfifo(tmp_path / "master-bin.000003")
    for args in (["seek", "--gtid", "0-1-100", tmp_path], ["status", tmp_path], ["build", tmp_path]):
        r = gtidx_cli(*args)         # no hang; the FIFO is named in the error
        assert "Traceback" not in r.stderr, r
        if r.returncode:
            assert "not a regular file (a FIFO)" in r.stdout + r.stderr, r
    assert b.exists()


def test_tail_once_with_fifos_does_not_hang(tmp_path):
    """`gtidx tail --once` over a directory with a FIFO named like a binlog
    and a FIFO as another binlog's FILE.idx: it finishes, names the FIFO
    binlog, and replaces the FIFO index with a real one (by rename)."""
    b = copy(MIXED, tmp_path)
    os.mkfifo(str(b) + ".idx")
    os.mkfifo(tmp_path / "master-bin.000099")
    r = gtidx_cli("tail", "--once", tmp_path)
    assert "Traceback" not in r.stderr, r
    assert "master-bin.000099" in r.stderr and "not a regular file (a FIFO)" in r.stderr, r
    assert Path(str(b) + ".idx").is_file()


def test_socket_and_directory_are_not_regular_files(tmp_path):
    sock_path = tmp_path / "master-bin.000001"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock_path))
    try:
        with pytest.raises(BadInputError, match=r"not a regular file \(a socket\)") as e:
            Binlog(sock_path)
        assert e.value.exit_code == 2
    finally:
        s.close()
    d = tmp_path / "dir.000002"
    d.mkdir()
    with pytest.raises(BadInputError, match=r"not a regular file \(a directory\)"):
        Binlog(d)
    b = copy(MIXED, tmp_path / "x")
    os.mkdir(str(b) + ".idx")
    with Binlog(b) as bl:
        st = open_index(bl)
        assert st.state == "corrupt" and "a directory" in st.reason


def test_symlink_to_a_binlog_is_read(tmp_path):
    b = copy(MIXED, tmp_path / "real")
    link = tmp_path / "master-bin.000002"
    link.symlink_to(b)
    offset, answer = next((o, a) for o, a in reversed(oracle(MIXED)["pos"]) if a)
    r = gtidx_cli("pos", "--json", link, offset)
    assert r.returncode == 0, r
    assert Position.parse(json.loads(r.stdout)["position"]) == Position.parse(answer)


# -- huge and sparse indexes, address-space limits ------------------------------------------------

def sparse_index(b: Path, how: str) -> Path:
    """A 4 GiB sparse FILE.idx: a real index with a hole after it, or a hole
    with a real index at its end."""
    build_index(b, force=True)
    idx = Path(str(b) + ".idx")
    data = idx.read_bytes()
    with open(idx, "r+b") as f:
        if how == "hole-after":
            f.truncate(4 << 30)
        else:
            f.truncate(0)
            f.seek((4 << 30) - len(data))
            f.write(data)
    assert idx.stat().st_size == 4 << 30 and idx.stat().st_blocks * 512 < 1 << 20
    return idx


LIMITED = r"""
import resource, subprocess, sys
limit = int(sys.argv[1])
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
r = subprocess.run(sys.argv[2:], preexec_fn=cap, capture_output=True, text=True)
sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); sys.exit(r.returncode)
"""


def gtidx_limited(limit: int, *args, timeout: float = 30):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", LIMITED, str(limit), sys.executable, "-m", "gtidx",
                        *map(str, args)], capture_output=True, text=True, timeout=timeout, env=ENV)
    return r, time.monotonic() - t0


@pytest.mark.parametrize("how", ["hole-after", "hole-before"])
def test_sparse_4gib_index_is_judged_in_bounded_memory_and_time(tmp_path, how):
    b = copy(MIXED, tmp_path)
    idx = sparse_index(b, how)
    limit = 1 << 30                 # 1 GiB of address space: far less than the file
    offset, answer = next((o, a) for o, a in reversed(oracle(MIXED)["pos"]) if a)
    for args in (["info", idx], ["verify", idx], ["dump", idx]):
        r, secs = gtidx_limited(limit, *args)
        assert r.returncode == 3 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r
        assert secs < 10, (args, secs)
    for args in (["pos", "--json", b, offset], ["seek", "--json", "--gtid", "0-1-100", b]):
        r, secs = gtidx_limited(limit, *args)
        assert r.returncode == 0 and '"via": "scan"' in r.stdout, r
        assert secs < 10, (args, secs)
    assert Position.parse(json.loads(gtidx_limited(limit, "pos", "--json", b, offset)[0].stdout)["position"]) \
        == Position.parse(answer)
    r, secs = gtidx_limited(limit, "status", tmp_path)
    assert r.returncode == 0 and secs < 10, r


def test_paged_index_reader_equals_the_whole_one_in_bounded_memory(tmp_path, monkeypatch):
    """A big index is read page by page with pread into a bounded cache:
    every search and the full check give what the reader of the whole
    bytes gives, and the cache never holds more than its bound."""
    b = copy(MANY, tmp_path)
    build_index(b, page_size=64, span_min=1, max_ratio=None)
    idx = str(b) + ".idx"
    monkeypatch.setattr(gtidx.index.reader, "WHOLE_MAX", 0)
    monkeypatch.setattr(gtidx.index.reader, "CACHE_BYTES", 64 * 32)
    whole = IndexReader(Path(idx).read_bytes())
    with ReadFile(idx) as f:
        paged = IndexReader(f, path=idx)
        assert paged._src is f
        assert paged.check() == whole.check()
        assert list(paged.records()) == list(whole.records())
        for offset, _ in oracle(MANY)["pos"]:
            assert paged.at_offset(offset) == whole.at_offset(offset)
            assert len(paged._cache) <= 32
