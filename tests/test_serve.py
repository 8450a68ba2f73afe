"""The pieces of ``gtidx serve`` against independent implementations and
real binlog bytes (the whole protocol against a real replica and source:
tests/test_serve_live.py): length-coded integers, packet framing across the
16 MiB piece size, mysql_native_password against PyMySQL's client side,
and the events a source makes up, read back by gtidx's own event checks."""
from __future__ import annotations

import os
import socket
import threading

import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES, growing_copy
from gtidx.binlog.events import EVENT_HEADER, GTID_LIST, HEADER_LEN, decode_gtid_list, event_crcs
from gtidx.binlog.mariadb import Binlog
from gtidx.gtid import Gtid, Position
from gtidx.serve import stream, wire
from gtidx.serve.stream import Skipper

BOUNDS = [0, 250, 251, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000, 2**64 - 1]


@given(st.one_of(st.sampled_from(BOUNDS), st.integers(0, 2**64 - 1)))
def test_lenenc_round_trip(n):
    data = b"x" + wire.lenenc_int(n) + b"y"
    assert wire.read_lenenc_int(data, 1) == (n, len(data) - 1)


def test_lenenc_refuses_null_and_cut_numbers():
    for bad in (b"\xfb", b"\xff", b"\xfc\x01", b"\xfe" + b"\0" * 7, b""):
        with pytest.raises(wire.ProtocolError):
            wire.read_lenenc_int(bad, 0)


@pytest.mark.parametrize("size", [0, 5, wire.MAX_PIECE - 1, wire.MAX_PIECE, wire.MAX_PIECE + 3])
def test_a_payload_crosses_the_piece_size(size):
    """A payload of 2**24 - 1 bytes or more goes in pieces, the last one
    shorter (empty when the size divides evenly), and reads back whole."""
    a, b = socket.socketpair()
    try:
        payload = os.urandom(64) * (size // 64) + os.urandom(size % 64)
        sender, reader = wire.Connection(a), wire.Connection(b)
        framed = sender.frame(payload)
        assert len(framed) == size + 4 * (size // wire.MAX_PIECE + 1)
        assert sender.seq == (size // wire.MAX_PIECE + 1) & 0xFF
        t = threading.Thread(target=a.sendall, args=(framed,))
        t.start()
        assert reader.read_packet(limit=1 << 25) == payload
        t.join()
    finally:
        a.close()
        b.close()


@settings(max_examples=50)
@given(st.binary(min_size=1, max_size=40), st.binary(min_size=20, max_size=20))
def test_native_password_against_pymysql(password, scramble):
    from pymysql._auth import scramble_native_password
    auth = scramble_native_password(password, scramble)
    assert wire.native_password_ok(password, scramble, auth)
    assert not wire.native_password_ok(password + b"!", scramble, auth)
    assert not wire.native_password_ok(password, scramble, auth[:-1])


def test_an_empty_password_is_an_empty_auth():
    scramble = wire.new_scramble()
    assert len(scramble) == wire.SCRAMBLE_LEN and 0 not in scramble
    assert wire.native_password_ok(b"", scramble, b"")
    assert not wire.native_password_ok(b"", scramble, b"\0" * 20)


@pytest.mark.parametrize("checksum", [True, False])
def test_made_up_events_pass_the_readers_checks(checksum):
    gtids = [Gtid(0, 1, 1638), Gtid(7, 2, 2**40)]
    events = [stream.fake_rotate("master-bin.000042", 4, 1, checksum),
              stream.heartbeat("master-bin.000042", 1234, 1, checksum),
              stream.fake_gtid_list(gtids, 18324, 1, checksum)]
    for ev in events:
        ts, etype, server_id, length, log_pos, flags = EVENT_HEADER.unpack_from(ev, 0)
        assert (ts, server_id, length) == (0, 1, len(ev))
        assert flags == (0 if etype == stream.HEARTBEAT else stream.ARTIFICIAL)
        if checksum:
            stored, computed = event_crcs(ev, etype)
            assert stored == computed
    body = events[2][HEADER_LEN:len(events[2]) - (4 if checksum else 0)]
    assert events[2][4] == GTID_LIST and decode_gtid_list(body) == gtids


def test_cleared_fde_of_real_binlogs():
    """The FDE of bundled binlogs (10.11 and 11.8, with and without
    checksums, one still IN_USE) with log_pos and created zeroed and the
    in-use flag cleared (as the server sends it): its CRC32 checks out
    again, the rest is unchanged."""
    fdes = []
    for path in sorted(FIXTURES.glob("mariadb-*/*/master-bin.0*")):
        if path.parent.name in ("multifile", "nochecksum") and path.suffix != ".idx":
            with Binlog(path) as b:
                fdes.append((bytes(b.buffer[4:4 + b.fde.length]), b.checksum_len > 0))
    fdes.append((growing_copy(b"\0" * 4 + fdes[0][0], 4 + len(fdes[0][0]))[4:], fdes[0][1]))
    assert len(fdes) >= 5 and {c for _, c in fdes} == {True, False}
    for fde, crc in fdes:
        out = stream.cleared_fde(fde, crc)
        assert EVENT_HEADER.unpack_from(out, 0)[4] == 0
        assert out[stream.CREATED_AT:stream.CREATED_AT + 4] == b"\0\0\0\0"
        assert out[:13] == fde[:13] and out[19:stream.CREATED_AT] == fde[19:stream.CREATED_AT]
        assert stream.FLAGS.unpack_from(out, 17)[0] == stream.FLAGS.unpack_from(fde, 17)[0] & ~stream.BINLOG_IN_USE
        assert out[stream.CREATED_AT + 4:len(out) - 4] == fde[stream.CREATED_AT + 4:len(fde) - 4]
        if crc:
            stored, computed = event_crcs(out, out[4])
            assert stored == computed
    in_use = [fde for fde, _ in fdes if stream.FLAGS.unpack_from(fde, 17)[0] & stream.BINLOG_IN_USE]
    assert in_use, "a bundled binlog still in use"
    for fde, crc in fdes:           # a replica starting at the file's first event: only the in-use flag goes
        out = stream.cleared_fde(fde, crc, log_pos=False, created=False)
        assert (out == fde) == (fde not in in_use)
        assert out[:17] == fde[:17] and out[19:len(out) - 4] == fde[19:len(fde) - 4]


def test_skipper_per_domain():
    """The server's rule (``BinlogSeries.replica_start``): a domain skips
    until the requested server logs a seq at least the requested one; equal
    is skipped, greater is sent; other domains and servers' groups before it
    are skipped; an unnamed domain skips nothing. Each domain reached owes
    a fake GTID_LIST."""
    s = Skipper(Position.parse("0-1-10,1-2-5"))
    assert s.leaves_out(0, 1, 9) and s.leaves_out(0, 3, 50) and not s.leaves_out(2, 1, 1)
    assert not s.owed
    assert s.leaves_out(0, 1, 10) and s.owed
    s.owed = False
    assert not s.leaves_out(0, 1, 5) and not s.owed                    # reached: everything after is sent
    assert s.pending == {1: Gtid(1, 2, 5)}
    assert not s.leaves_out(1, 2, 7) and not s.pending and s.owed      # greater: the first sent


@pytest.mark.parametrize("size", [10, (1 << 16) - 2, 1 << 16, wire.MAX_PIECE - 2, wire.MAX_PIECE - 1, wire.MAX_PIECE + 7])
def test_an_event_sent_from_where_it_is_reads_back_whole(size):
    """``send_prefixed`` (the OK byte and an event): small or large, the
    replica reads one payload, and the sequence numbers go on as framed."""
    a, b = socket.socketpair()
    try:
        event = os.urandom(64) * (size // 64) + os.urandom(size % 64)
        sender, reader = wire.Connection(a), wire.Connection(b)
        t = threading.Thread(target=lambda: (sender.send_prefixed(b"\0", memoryview(event)), sender.send(b"next")))
        t.start()
        assert reader.read_packet(limit=1 << 25) == b"\0" + event
        assert reader.read_packet() == b"next"
        t.join()
        assert sender.seq == reader.seq
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("args, words", [
    ([], "needs --user and --password-file"),
    (["--user", "repl"], "needs --user and --password-file"),
    (["--no-auth", "--user", "repl"], "--no-auth takes no --user"),
    (["--no-auth", "--bind", "0.0.0.0"], "--no-auth on 0.0.0.0"),
    (["--no-auth", "--bind", "localhost"], "--bind wants an IP address"),
])
def test_authentication_is_required_except_no_auth_on_loopback(args, words):
    from click.testing import CliRunner
    from gtidx.cli import cli
    r = CliRunner().invoke(cli, ["serve", str(FIXTURES / "mariadb-10.11" / "multifile"), "--port", "0", *args])
    assert r.exit_code == 2, r.output
    assert words in r.output and "Traceback" not in r.output
