"""Shared test fixtures: the reference binlogs and the private live server."""
from __future__ import annotations

import json
import os
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# Spark started by the tests (in this process or in CLI subprocesses) listens
# on and talks to the loopback address only.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from gtidx.binlog.mariadb import TYPE_LENGTH, U32, Binlog  # noqa: E402
from gtidx.errors import NotFoundError  # noqa: E402
from gtidx.gtid import Position  # noqa: E402
from tools.mariadb import MariaDB  # noqa: E402


def fixture_sets() -> list[Path]:
    """Every scenario folder with an oracle.json, 10.11 and 11.8."""
    return sorted(p.parent for p in FIXTURES.glob("mariadb-*/*/oracle.json"))


def fixture_files() -> list[tuple[Path, dict]]:
    """(binlog path, its oracle entry) for every fixture binlog."""
    out = []
    for d in fixture_sets():
        oracle = json.loads((d / "oracle.json").read_text())
        for f in oracle["files"]:
            out.append((d / f["name"], f))
    return out


def private(srv, what: str = "the private MariaDB server"):
    """``srv`` (a private server of ``tools``) started, or the test failed
    with why (never skipped, never an error in a fixture's traceback)."""
    try:
        return srv.start()
    except RuntimeError as e:
        pytest.fail(f"cannot start {what}: {e}", pytrace=False)


def growing_copy(data: bytes, n: int) -> bytes:
    """The first ``n`` bytes of a binlog as its server had them while writing:
    the FDE's IN_USE flag is set (its CRC is computed with the flag clear)."""
    part = bytearray(data[:n])
    if len(part) > 21:
        part[21] |= 1
    return bytes(part)


def damaged(data: bytes, flips, cut) -> bytes:
    """A binlog's bytes with ``flips`` ((where in [0, 1] past the magic, new
    byte value) pairs) overwritten, then cut to the fraction ``cut`` of its
    size (None: not cut): the damage the walks' property tests apply."""
    out = bytearray(data)
    for where, value in flips:
        out[min(len(out) - 1, 4 + int(where * (len(out) - 5)))] = value
    if cut is not None:
        out = out[:max(4, int(cut * len(out)))]
    return bytes(out)


def mysql_events(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, length) of every event of a whole MySQL binlog, along
    its event headers."""
    off, out = 4, []
    while off + 19 <= len(data):
        etype, ln = TYPE_LENGTH.unpack_from(data, off)
        out.append((off, etype, ln))
        off += ln
    return out


def trx_length_field(data: bytes, off: int) -> tuple[int, int]:
    """Where the transaction_length of the GTID or ANONYMOUS_GTID event at
    ``off`` is: (the offset of its packed integer, the bytes of its value
    after the first byte: 0 (the first byte is the value, < 251), 2, 3 or 8)."""
    body = off + 19
    at = body + 42 + 7                              # past the fixed part and the immediate commit timestamp
    if data[body + 42 + 6] & 0x80:                  # its top bit: the original timestamp follows
        at += 7
    return at, {252: 2, 253: 3, 254: 8}.get(data[at], 0)


def set_trx_length(data: bytearray, off: int, value: int, fix_crc: bool) -> None:
    """Rewrite the transaction_length of the GTID event at ``off`` in the
    width it has (the event keeps its size); with ``fix_crc`` its CRC32
    recomputed as the server computes it (zlib.crc32 of the event before it)."""
    at, width = trx_length_field(data, off)
    if width:
        data[at + 1:at + 1 + width] = value.to_bytes(width, "little")
    else:
        assert value < 251, value
        data[at] = value
    if fix_crc:
        ln = TYPE_LENGTH.unpack_from(data, off)[1]
        U32.pack_into(data, off + ln - 4, zlib.crc32(data[off:off + ln - 4]))


@pytest.fixture(params=["compiled", "python"])
def build_walk(request, monkeypatch):
    """The MySQL walks (the index build's, ``transactions``) with the
    compiled mysql_walk and skip (gtidx/_skip.c) and without them (the
    pure-Python walk alone, their definition)."""
    from gtidx.binlog import mysql as mysqlbinlog
    if request.param == "compiled":
        assert mysqlbinlog._mysql_walk is not None, "gtidx._skip is not built (see setup.py)"
    else:
        monkeypatch.setattr(mysqlbinlog, "_mysql_walk", None)
        monkeypatch.setattr(mysqlbinlog, "_skip", None)
    return request.param


def forge_catalog(raw: dict) -> None:
    """Lies in the catalog (``raw``) of fixtures/mariadb-10.11/multifile:
    master-bin.000019 (which holds 0-1-400 and the first group at the second
    1795317387) said to end a second earlier, and to hold no seq_no of
    domain 0, server 1 below 500. Believed, ``seek --time @1795317387`` would
    answer in 000020 (a restore replaying past the point asked for),
    ``seek --gtid 0-1-400`` "not in these binlogs"."""
    e = next(e for e in raw["files"] if e["name"] == "master-bin.000019")
    e["max_timestamp"] = e["first_timestamp"] - 1
    e["ranges"] = [r if r[:2] != [0, 1] else [0, 1, 500, 501] for r in e["ranges"]]


def forge_index_record(binlog: Path, forged) -> tuple[int, int]:
    """A lie in the index beside ``binlog`` (gtidx's, fingerprinted: judged
    usable as it was): the offset of one record from the second half (one
    that is no leaf's first key, so no separator repeats it) becomes
    ``forged(b, offset)`` (``b`` the open binlog), its page sealed again
    (a valid CRC32). The index stays an inode of its own, so its fingerprint
    (an xattr or sidecar) stays. (the record's offset, the forged one)."""
    import struct
    from gtidx.index import format as fmt
    from gtidx.index.files import open_index
    idx = Path(f"{binlog}.idx")
    data = bytearray(idx.read_bytes())
    page_size = fmt.FILE_HEADER.unpack_from(data, 0)[3]
    with Binlog(binlog) as b:
        status = open_index(b)
        assert status.usable, status.reason
        offsets = [r.offset for r in status.reader.records()]
        status.close()
        for off in offsets[len(offsets) // 2:-1]:
            at = [i for i in range(4, len(data) - 4, 4) if data[i:i + 4] == struct.pack("<I", off)]
            if len(at) == 1:
                new = forged(b, off)
                break
        else:
            raise AssertionError(f"no record of {binlog} to forge")
    struct.pack_into("<I", data, at[0], new)
    page = at[0] // page_size * page_size
    data[page:page + page_size] = fmt.seal(bytearray(data[page:page + page_size]))
    with open(idx, "r+b") as f:
        f.write(data)
    return off, new


def fixture_id(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.parent.name}/{path.name}"


def answers_equal(path: Path, expected: dict, logs, via: str | None) -> list:
    """Every (offset, BINLOG_GTID_POS answer) of a fixture's oracle against
    ``logs.state_at``: the (offset, ours, theirs) that differ, and the
    answers that did not come ``via`` the given way (when given)."""
    wrong = []
    for offset, answer in expected["pos"]:
        try:
            r = logs.state_at(path, offset)
            mine = r.position
            if via and r.via != via:
                wrong.append((offset, "via", r.via))
        except NotFoundError:
            mine = None
        theirs = None if answer is None else Position.parse(answer)
        if mine != theirs:
            wrong.append((offset, str(mine), answer))
    return wrong


@pytest.fixture(scope="session")
def oracle_files():
    files = fixture_files()
    assert len(files) >= 20, f"fixtures missing under {FIXTURES}"
    return files


class AttachedServer(MariaDB):
    """A private server started outside the tests (by tools/test), reached by its socket."""

    def __init__(self, socket_path: str):
        super().__init__(Path(socket_path).parent)
        self.socket = socket_path
        basename = self.sql("SELECT @@log_bin_basename")[0][0]
        self.binlog_dir = Path(basename).parent

    def start(self, timeout: float = 0):
        return self

    def stop(self, timeout: float = 0):
        pass


@pytest.fixture(scope="session")
def mysql_show_history():
    """The live MySQL 9.7 history of ``tests/mysqlhistory.py``, written once
    per session for the modules that compare it with mysqlbinlog -v:
    (the closed binlog's path, its SHOW BINLOG EVENTS, the server)."""
    from tests.mysqlhistory import write_history
    return write_history()


@pytest.fixture(scope="session")
def _spark_at_exit():
    """Stops the shared local Spark session when the run ends."""
    yield
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


@pytest.fixture
def spark(_spark_at_exit):
    """The one local Spark session (local[2], on 127.0.0.1) every in-process
    Spark test shares: started by the first test that asks for it, then got
    again (``gs.session`` gets or creates). Only a module that needs another
    master (the standalone cluster's tests) stops it; the next test asking
    starts it again in the same JVM. Tests and the CLI in this process never
    stop it (``gtidx spark`` stops only a session it started)."""
    gs = pytest.importorskip("gtidx.spark")
    return gs.session("local[2]", app="gtidx-tests")


@pytest.fixture(scope="session")
def live_server(tmp_path_factory):
    """The private MariaDB 10.11: the one tools/test started (GTIDX_TEST_SOCKET),
    or one of our own in a temp dir. Never skipped: without a server these
    tests fail and say how to get one."""
    sock = os.environ.get("GTIDX_TEST_SOCKET")
    if sock:
        yield AttachedServer(sock)
        return
    srv = private(MariaDB(tmp_path_factory.mktemp("mariadb")))
    try:
        yield srv
    finally:
        srv.stop()


def copy_set(tmp_path: Path, scenario: Path, build: bool = True) -> Path:
    """A fixture scenario copied (writable), each binlog indexed (small
    pages, short spans: several records per file) unless ``build`` is False."""
    import shutil
    from gtidx import api
    from gtidx.index.build import build_index
    d = tmp_path / f"{scenario.parent.name}-{scenario.name}"
    shutil.copytree(scenario, d)
    for p in d.iterdir():
        p.chmod(0o644)
    if build:
        for f in api.list_binlogs(d):
            build_index(f, page_size=256, span_min=4096, max_ratio=None, force=True)
    return d


def count_listings(monkeypatch) -> list:
    """The paths listed (``list_files`` called from outside itself: a
    directory's ``*.index`` listed on the way is the same listing), from
    every module that calls it."""
    from gtidx.series import listing
    real = listing.list_files
    listed, depth = [], [0]

    def counting(path, store, listings, *kind):
        if depth[0] == 0:
            listed.append(path)
        depth[0] += 1
        try:
            return real(path, store, listings, *kind)
        finally:
            depth[0] -= 1
    for name, module in list(sys.modules.items()):
        if name.startswith("gtidx") and getattr(module, "list_files", None) is real:
            monkeypatch.setattr(module, "list_files", counting)
    return listed
