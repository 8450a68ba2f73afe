"""``gtidx show`` and ``gtidx probe`` on MySQL binlogs, against the live
MySQL 9.7 and its own oracles: every transaction of a binlog written here
(tables of many column types, ``binlog_row_metadata`` FULL and MINIMAL,
``binlog_row_image`` FULL/MINIMAL/NOBLOB, ``binlog_transaction_compression``
ON for part of the transactions, partial JSON updates, tagged GTIDs)
shown as ``mysqlbinlog -v --base64-output=DECODE-ROWS`` prints it; probe's
event boundaries equal to SHOW BINLOG EVENTS' positions; damage exit 3 with
its offset. Each run writes a binlog of its own (FLUSH BINARY LOGS)."""
from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from gtidx import api
from gtidx.binlog.mysql import MysqlBinlog
from tests.mysqlhistory import STATEMENTS, TABLE, mysqlbinlog_command, same_rows
from tests.showoracle import differences, mysql_escaped, mysqlbinlog_rows
from tools.mysql97 import MySQL97

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mysql-9.7"


@pytest.fixture(scope="module")
def written(mysql_show_history):
    """A closed binlog of the rounds (``mysqlhistory``): (its path, its SHOW BINLOG EVENTS, server)."""
    return mysql_show_history


def _mysqlbinlog(srv) -> list:
    return mysqlbinlog_command(srv)


def test_show_equals_mysqlbinlog(written):
    path, events, srv = written
    oracle = mysqlbinlog_rows(path, _mysqlbinlog(srv))
    payloads = {int(e[1]) for e in events if e[2] == "Transaction_payload"}
    compared = rows = compressed = partial = 0
    kinds = set()
    statements, annotations = [], []
    with MysqlBinlog(path) as b:
        groups = list(b.transactions())
    assert sorted(oracle) == [g.start for g in groups]
    for g in groups:
        doc = api.show(path, offset=g.start).as_dict()
        want = oracle[g.start]
        assert doc["gtid"] == want["gtid"], g
        assert (doc["start"], doc["end"]) == (g.start, g.end)
        assert doc["compressed"] == want["compressed"] == any(g.start < p < g.end for p in payloads)
        wrong = same_rows(doc["rows"], want["rows"], doc["column_names"])
        assert wrong == [], (g, wrong[:3])
        compared += 1
        rows += len(doc["rows"])
        compressed += doc["compressed"]
        kinds.add(doc["column_names"])
        partial += sum(isinstance(v, str) and v.startswith("JSON_") for r in doc["rows"]
                       for v in (r["after"] or {}).values())
        statements += doc["statements"]
        annotations += doc["annotations"]
    print(f"{compared} transactions ({compressed} compressed, {rows} rows, {partial} partial JSON updates) "
          "equal mysqlbinlog -v")
    assert TABLE.replace("\n", " ").split() == next(x for x in statements if "shw.t" in x).split()
    assert "SET INSERT_ID=1" in statements and STATEMENTS[1] in statements
    assert "XA START X'6778',X'6271',7" in statements and "XA PREPARE X'6778',X'6271',7" in statements
    assert "XA COMMIT X'6778',X'6271',7" in statements
    assert annotations == ["INSERT INTO shw.ai (v) VALUES ('annotated')"]
    assert compressed >= 10 and partial >= 3 and kinds >= {"metadata", "positional"}
    assert any(doc_gtid.count(":") == 2 for doc_gtid in (v["gtid"] for v in oracle.values()))


def test_show_by_gtid_and_the_cli(written, tmp_path):
    path, events, srv = written
    with MysqlBinlog(path) as b:
        groups = list(b.transactions())
    tagged = next(g for g in groups if g.gtid is not None and g.gtid.tag)
    compressed = next(g for g in groups if any(e[2] == "Transaction_payload" and g.start <= int(e[1]) < g.end
                                              for e in events))
    doc = api.show(path, gtid=str(tagged.gtid)).as_dict()
    assert (doc["gtid"], doc["start"], doc["rows"][0]["after"]["v"]) == (str(tagged.gtid), tagged.start, "tagged")
    run = [sys.executable, "-m", "gtidx"]
    out = subprocess.run([*run, "show", "--json", "--gtid", str(compressed.gtid), str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == api.show(path, offset=compressed.start).as_dict()
    out = subprocess.run([*run, "show", str(path), str(compressed.start)], capture_output=True, text=True)
    assert out.returncode == 0 and "# compressed: " in out.stdout and out.stdout.count("### ") >= 2
    out = subprocess.run([*run, "show", str(path), str(compressed.start + 1)], capture_output=True, text=True)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "not an event boundary" in out.stderr


def _payload_event(events) -> int:
    return next(int(e[1]) for e in events if e[2] == "Transaction_payload")


def test_damaged_payload_is_exit_3_at_its_offset(written, tmp_path):
    path, events, srv = written
    at = _payload_event(events)
    data = bytearray(path.read_bytes())
    ln = struct.unpack_from("<I", data, at + 9)[0]
    start = max(int(e[1]) for e in events if int(e[1]) < at and e[2] == "Gtid")
    run = [sys.executable, "-m", "gtidx", "show"]
    # a flipped byte in the compressed bytes: the event's CRC32 says so
    bad = bytearray(data)
    bad[at + ln - 10] ^= 0x40
    (tmp_path / "crc").write_bytes(bad)
    out = subprocess.run([*run, str(tmp_path / "crc"), str(start)], capture_output=True, text=True)
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and f"offset {at}" in out.stderr, out.stderr
    # the same with its CRC32 made right again: the payload itself does not read
    struct.pack_into("<I", bad, at + ln - 4, zlib.crc32(bad[at:at + ln - 4]))
    (tmp_path / "forged").write_bytes(bad)
    out = subprocess.run([*run, str(tmp_path / "forged"), str(start)], capture_output=True, text=True)
    assert out.returncode == 3 and out.stderr.count("\n") == 1, out.stderr
    assert f"offset {at}" in out.stderr and "TRANSACTION_PAYLOAD" in out.stderr, out.stderr


def test_probe_equals_show_binlog_events(written):
    """Every event boundary of the binlog (SHOW BINLOG EVENTS' positions) is
    one for probe, with the set ``pos`` gives there; three bytes inside each
    event give that event's start and end."""
    path, events, srv = written
    # the events of a compressed transaction are listed too, each at the payload's end and ending there
    spans = [(int(e[1]), int(e[4])) for e in events if int(e[1]) < int(e[4])]
    assert len(spans) < len(events) and spans[0][0] == 4 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert spans[-1][1] == path.stat().st_size
    probed = 0
    with api.open_binlogs(path) as logs:
        for lo, hi in spans:
            r = logs.probe(path, lo)
            assert (r.before, r.after, r.damaged) == (lo, lo, None)
            assert r.position == logs.state_at(path, lo).state
            for inside in {lo + 1, (lo + hi) // 2, hi - 1}:
                r = logs.probe(path, inside)
                assert (r.before, r.after) == (lo, hi), (lo, hi, inside)
                assert r.state == logs.state_at(path, lo).state
                probed += 1
    assert probed > 3 * len(spans) // 2
    out = subprocess.run([sys.executable, "-m", "gtidx", "probe", "--json", str(path), str(spans[-1][0] + 1)],
                         capture_output=True, text=True)
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and (doc["before"], doc["after"]) == spans[-1] and "\n" not in doc["state"]
    out = subprocess.run([sys.executable, "-m", "gtidx", "probe", str(path), str(spans[-1][1] + 1)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "past the end" in out.stderr


def test_probe_across_a_destroyed_header(written, tmp_path):
    """A destroyed header (a compressed transaction's payload event): the
    damaged range is that event, the chain resumes at the next one, the set
    after it unknown; exit 0 (the damage is in the answer)."""
    path, events, srv = written
    spans = [(int(e[1]), int(e[4])) for e in events if int(e[1]) < int(e[4])]
    lo, hi = next((int(e[1]), int(e[4])) for e in events if e[2] == "Transaction_payload")
    data = bytearray(path.read_bytes())
    data[lo + 9:lo + 13] = b"\xff\xff\xff\x7f"          # its length: nothing real
    bad = tmp_path / path.name
    bad.write_bytes(data)
    r = api.probe(bad, lo + 5)
    assert (r.before, r.after, r.damaged) == (lo, hi, (lo, hi))
    r = api.probe(bad, hi + 1)
    assert r.damaged == (lo, hi) and r.state is None and r.before == hi
    out = subprocess.run([sys.executable, "-m", "gtidx", "probe", str(bad), str(hi)], capture_output=True, text=True)
    assert out.returncode == 0 and f"damaged: no trustworthy event in bytes {lo} to {hi}" in out.stdout
    out = subprocess.run([sys.executable, "-m", "gtidx", "show", str(bad), str(max(s for s, _ in spans if s < lo))],
                         capture_output=True, text=True)
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and f"offset {lo}" in out.stderr, out.stderr


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_show_equals_mysqlbinlog_on_the_fixtures(fixture):
    """Every transaction of every MySQL fixture (anonymous ones, tagged
    GTIDs, many UUIDs, compressed, without checksums) as mysqlbinlog -v
    prints it."""
    srv = MySQL97().ensure()
    compared = 0
    for path in sorted((FIXTURES / fixture).glob("binlog.0*")):
        oracle = mysqlbinlog_rows(path, _mysqlbinlog(srv))
        with MysqlBinlog(path) as b:
            groups = list(b.transactions())
        assert sorted(oracle) == [g.start for g in groups]
        for g in groups:
            doc = api.show(path, offset=g.start).as_dict()
            want = oracle[g.start]
            assert (doc["gtid"] or "ANONYMOUS") == want["gtid"] and doc["compressed"] == want["compressed"]
            assert differences(doc["rows"], want["rows"], escape=mysql_escaped) == [], g
            compared += 1
    assert compared or fixture == "empty"


def test_an_unknown_event_in_a_payload_is_an_error_naming_it(written, tmp_path):
    """An event type gtidx show does not know, inside a compressed
    transaction (forged: the BEGIN made type 37 with the ignorable flag, the
    payload compressed again, sizes and CRC32 right): exit 2, one line, its
    type named, never left out."""
    import zstandard
    from gtidx.binlog import mysqlpayload
    path, events, srv = written
    lo, hi = next((int(e[1]), int(e[4])) for e in events if e[2] == "Transaction_payload")
    start = max(int(e[1]) for e in events if int(e[1]) < lo and e[2] == "Gtid")
    data = bytearray(path.read_bytes())
    body = bytes(data[lo + 19:hi - 4])
    p = mysqlpayload.decode(body, path=str(path), offset=lo)
    inner = bytearray(b"".join(bytes(mysqlpayload.EVENT_HEADER.pack(e.timestamp, e.type, e.server_id, e.length, 0,
                                                                    e.flags)) + e.body for e in p.events))
    assert p.events[0].type == 2           # the BEGIN
    inner[4] = 37
    struct.pack_into("<H", inner, 17, p.events[0].flags | 0x80)
    packed = zstandard.ZstdCompressor().compress(bytes(inner))

    def field(kind, value):
        v = value.to_bytes(2, "little")
        return bytes([kind, 3, 252]) + v
    new_body = field(2, 0)[:1] + bytes([1, 0]) + field(3, len(inner)) + field(1, len(packed)) + b"\0" + packed
    header = bytearray(data[lo:lo + 19])
    struct.pack_into("<I", header, 9, 19 + len(new_body) + 4)
    struct.pack_into("<I", header, 13, 0)
    event = bytes(header) + new_body
    event += struct.pack("<I", zlib.crc32(event))
    forged = tmp_path / path.name
    forged.write_bytes(bytes(data[:lo]) + event + bytes(data[hi:hi]))   # the file ends after it
    with MysqlBinlog(forged) as b:
        g = next(x for x in b.groups() if x.start == start)
    with pytest.raises(Exception) as e:
        api.show(forged, offset=g.start)
    assert e.value.exit_code == 2 and "an event of type 37" in str(e.value) and e.value.offset == lo, e.value
    out = subprocess.run([sys.executable, "-m", "gtidx", "show", str(forged), str(start)], capture_output=True,
                         text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "type 37" in out.stderr, out.stderr
    assert f"offset {lo}" in out.stderr and "uncompressed payload" in out.stderr


def test_show_through_the_index_equals_show_by_scan(written, tmp_path, monkeypatch):
    """With gtidx's MySQL index beside the binlog, the walk to a transaction
    starts at the record before it (records lie at transaction ends) and
    shows the same."""
    path, events, srv = written
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    from gtidx import admin
    assert all(not isinstance(r, Exception) for r in admin.build([str(copy)], span_min=1, max_ratio=None))
    starts = []
    group_at = api._group_at

    def spy(b, offset, start=None):
        starts.append(start)
        return group_at(b, offset, start)
    monkeypatch.setattr(api, "_group_at", spy)
    with MysqlBinlog(path) as b:
        groups = list(b.transactions())
    for g in groups:
        a, b = api.show(copy, offset=g.start).as_dict(), api.show(path, offset=g.start).as_dict()
        assert {**a, "file": None} == {**b, "file": None}
    from_index = [s for s in starts[::2] if s is not None]
    assert len(from_index) >= len(groups) - 2 and len(starts[1::2]) == len(groups) and not any(starts[1::2])


def test_json_doubles_as_the_server_prints_them():
    """A JSON double's text (``mysqljson.to_text`` of the binary form) is
    the server's (``CAST(JSON_ARRAY(...) AS CHAR)``): fixed or exponent
    notation, ``.0`` on a whole number, over many magnitudes."""
    from gtidx import mysqljson
    srv = MySQL97().ensure()
    rng = random.Random("gtidx-json-doubles")
    values = [1e300, -5e-7, 0.1, 100.0, 1e15, 1e16, 1.5e-14, 1.5e-15, 1e-5, 1e21, 2.0 ** 60, 1e-300, 5e-324,
              -0.0, 0.0, 1 / 3, 3.25e10] + [rng.random() * 10 ** rng.randint(-25, 25) * rng.choice([1, -1])
                                            for _ in range(300)]
    marks = ",".join("CAST(%s AS DOUBLE)" for _ in values)
    theirs = srv.sql(f"SELECT CAST(JSON_ARRAY({marks}) AS CHAR)", [repr(v) for v in values])[0][0]
    ours = "[" + ", ".join(mysqljson.to_text(bytes([mysqljson.DOUBLE]) + struct.pack("<d", v)) for v in values) + "]"
    assert ours == theirs
