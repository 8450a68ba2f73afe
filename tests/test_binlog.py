"""The binlog scanner on real server-written files, and on damaged copies of them."""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from conftest import FIXTURES
from gtidx.binlog import events as binlog_events
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import (CorruptBinlogError, EncryptedBinlogError, GtidxError, GtidxIOError,
                          MySQLBinlogError, UnsupportedBinlogError)
from gtidx.gtid import BinlogState, Gtid, Position

M118 = FIXTURES / "mariadb-11.8"
M1011 = FIXTURES / "mariadb-10.11"
MIXED = M118 / "mixed" / "master-bin.000002"
XA = M118 / "xa" / "master-bin.000006"
NOCRC = M118 / "nochecksum" / "master-bin.000014"
MULTI = M118 / "multifile"


def oracle(path: Path) -> dict:
    o = json.loads((path.parent / "oracle.json").read_text())
    return next(f for f in o["files"] if f["name"] == path.name)


def copy_bytes(path: Path) -> bytearray:
    return bytearray(path.read_bytes())


def write(tmp_path: Path, data, name="master-bin.000001") -> Path:
    p = tmp_path / name
    p.write_bytes(bytes(data))
    return p


def set_in_use(data: bytearray) -> bytearray:
    """Mark a copy as still being written (the FDE's IN_USE flag). The FDE's
    CRC is computed with that flag cleared, so the copy stays valid."""
    data[4 + 17] |= binlog_events.IN_USE_FLAG
    return data


def event_offsets(path: Path) -> list[tuple[int, int, int]]:
    with Binlog(path) as b:
        return [(off, t, ln) for off, t, _, ln in b.headers()]


# -- the format description and the preamble -------------------------------------


def test_fde_facts():
    with Binlog(MIXED) as b:
        assert b.fde.binlog_version == 4
        assert "MariaDB" in b.fde.server_version and b.fde.server_version.startswith("11.8.")
        assert b.fde.checksum == binlog_events.CHECKSUM_CRC32 and b.checksum_len == 4
        assert b.fde.in_use is False and not b.growing
        assert b.gtid_list_offset == 256
        assert b.body_start == b.gtid_list_end > b.gtid_list_offset


def test_no_checksum_file():
    with Binlog(NOCRC) as b:
        assert b.fde.checksum == binlog_events.CHECKSUM_NONE and b.checksum_len == 0
        assert all(b.event_ok(off) for off, *_ in b.headers())     # framing alone, no CRC to check


def test_start_state_is_the_gtid_list_and_the_server_answer_at_4():
    for path in [MIXED, XA, NOCRC, *sorted(MULTI.glob("master-bin.[0-9][0-9][0-9][0-9][0-9][0-9]"))]:
        answer = dict(oracle(path)["pos"]).get(4)
        with Binlog(path) as b:
            if answer is not None:
                assert b.start_state.position() == Position.parse(answer)
            assert len(b.start_state) >= 1


# -- decoders ------------------------------------------------------------------------


def test_xa_groups_carry_their_flags():
    with Binlog(XA) as b:
        flags = [g.flags2 for g in b.groups()]
    assert sum(1 for f in flags if f & binlog_events.FL_PREPARED_XA) >= 100
    assert sum(1 for f in flags if f & binlog_events.FL_COMPLETED_XA) >= 100


def test_events_of_real_files_end_in_rotate_and_hold_one_gtid_list():
    files = sorted(MULTI.glob("master-bin.[0-9][0-9][0-9][0-9][0-9][0-9]"))
    for path, nxt in zip(files, files[1:]):
        with Binlog(path) as b:
            events = list(b.events())
            rotate = events[-1]
            assert rotate.type == binlog_events.ROTATE and rotate.end == b.size
            assert bytes(rotate.body[8:]) == nxt.name.encode()    # after the 8-byte position: the next file
            assert any(e.type == binlog_events.BINLOG_CHECKPOINT for e in events)
            lists = [e for e in events if e.type == binlog_events.GTID_LIST]
            assert len(lists) == 1
            assert BinlogState(binlog_events.decode_gtid_list(lists[0].body)) == b.start_state


def test_gtid_list_count_top_bits_are_masked():
    body = struct.pack("<I", 0xF0000001) + struct.pack("<IIQ", 0, 1, 5)
    assert binlog_events.decode_gtid_list(body) == [Gtid(0, 1, 5)]
    with pytest.raises(CorruptBinlogError):
        binlog_events.decode_gtid_list(struct.pack("<I", 0x0FFFFFFF) + bytes(16))


def test_query_terminators():
    def query(text: bytes) -> bytes:
        return struct.pack("<IIBHH", 1, 0, 1, 0, 0) + b"d\0" + text
    assert binlog_events.is_group_terminator(binlog_events.QUERY, query(b"COMMIT"), False)
    assert binlog_events.is_group_terminator(binlog_events.QUERY, query(b"XA COMMIT X'31',X'',1"), False)
    assert binlog_events.is_group_terminator(binlog_events.QUERY, query(b"ROLLBACK"), False)
    assert not binlog_events.is_group_terminator(binlog_events.QUERY, query(b"ROLLBACK TO `sp1`"), False)
    assert not binlog_events.is_group_terminator(binlog_events.QUERY, query(b"XA END X'31',X'',1"), False)
    assert binlog_events.is_group_terminator(binlog_events.QUERY, query(b"CREATE TABLE t (a int)"), True)
    assert binlog_events.is_group_terminator(binlog_events.XID, b"\0" * 8, False)
    assert not binlog_events.is_group_terminator(19, b"", False)


# -- walks -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", [MIXED, XA, NOCRC], ids=lambda p: p.parent.name)
def test_header_walk_sums_lengths_to_the_file_size(path):
    evs = event_offsets(path)
    assert evs[0][:2] == (4, binlog_events.FORMAT_DESCRIPTION)
    for (o1, _, l1), (o2, _, _) in zip(evs, evs[1:]):
        assert o1 + l1 == o2
    assert evs[-1][0] + evs[-1][2] == path.stat().st_size


def test_every_crc_checks_out_and_a_flipped_byte_is_found(tmp_path):
    offsets = [off for off, _, _ in event_offsets(MIXED)]
    with Binlog(MIXED) as b:
        assert len(offsets) > 10000 and all(b.event_ok(off) for off in offsets)
    data = copy_bytes(MIXED)
    victim = event_offsets(MIXED)[500]
    data[victim[0] + 25] ^= 0x40
    with Binlog(write(tmp_path, data)) as b:
        assert [off for off in offsets if not b.event_ok(off)] == [victim[0]]


def test_groups_match_the_group_boundaries():
    with Binlog(XA) as b:
        groups = list(b.groups())
    assert [[str(g.gtid), g.start, g.end] for g in groups] == oracle(XA)["groups"]
    starts = {o for o, t, _ in event_offsets(XA) if t == binlog_events.GTID}
    assert {g.start for g in groups} == starts


def test_groups_from_a_later_boundary():
    with Binlog(MIXED) as b:
        all_groups = list(b.groups())
        later = list(b.groups(all_groups[100].start))
    assert later == all_groups[100:]


def test_state_at_offsets():
    o = oracle(MIXED)
    with Binlog(MIXED) as b:
        for off, answer in o["pos"]:
            st = b.state_at(off)
            assert (st is None) == (answer is None)
            if st is not None:
                assert st.position() == Position.parse(answer)
        assert b.state_at(b.size + 1) is None
        assert b.state_at(b.size) is not None
        assert b.state_at(5) is None
        assert b.state_at(4) == b.start_state
        # inside the magic: both 10.11 and 11.8 answer as for offset 4
        assert b.state_at(0) == b.state_at(3) == b.start_state


# -- unsupported and hostile inputs --------------------------------------------------------


def test_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(GtidxIOError) as e:
        Binlog(tmp_path / "nope")
    assert e.value.exit_code == 3 and "No such file" in str(e.value)


def test_empty_file(tmp_path):
    with pytest.raises(UnsupportedBinlogError, match="empty file"):
        Binlog(write(tmp_path, b""))


@pytest.mark.parametrize("data", [b"hello world, not a binlog at all" * 10, b"\x00" * 64, b"\xfeb"])
def test_not_a_binlog(tmp_path, data):
    with pytest.raises(UnsupportedBinlogError, match="not a binlog"):
        Binlog(write(tmp_path, data))


@pytest.mark.parametrize("cut", [4, 10, 22, 100, 255])
def test_truncated_format_description(tmp_path, cut):
    with pytest.raises(CorruptBinlogError) as e:
        Binlog(write(tmp_path, copy_bytes(MIXED)[:cut]))
    assert e.value.offset == 4
    assert "FORMAT_DESCRIPTION" in str(e.value)


def test_corrupt_format_description_crc(tmp_path):
    data = copy_bytes(MIXED)
    data[30] ^= 1            # inside the server version string
    with pytest.raises(CorruptBinlogError, match="FORMAT_DESCRIPTION event fails its CRC32"):
        Binlog(write(tmp_path, data))


def fix_fde_crc(data: bytearray) -> bytearray:
    length = struct.unpack_from("<I", data, 4 + 9)[0]
    event = bytearray(data[4:4 + length - 4])
    event[17] &= 0xFE
    struct.pack_into("<I", data, 4 + length - 4, zlib.crc32(event))
    return data


def test_mysql_binlog_is_refused_clearly(tmp_path):
    data = copy_bytes(MIXED)
    version = b"8.0.36".ljust(50, b"\0")
    data[4 + 19 + 2:4 + 19 + 52] = version
    with pytest.raises(MySQLBinlogError, match="MySQL binlogs are not supported yet"):
        Binlog(write(tmp_path, fix_fde_crc(data)))


def test_binlog_v3_is_refused_clearly(tmp_path):
    data = copy_bytes(MIXED)
    data[4 + 4] = binlog_events.START_EVENT_V3
    with pytest.raises(UnsupportedBinlogError, match="v1/v3"):
        Binlog(write(tmp_path, data))


def test_binlog_version_other_than_4(tmp_path):
    data = copy_bytes(MIXED)
    struct.pack_into("<H", data, 4 + 19, 3)
    with pytest.raises(UnsupportedBinlogError, match="format v3"):
        Binlog(write(tmp_path, fix_fde_crc(data)))


def test_event_length_zero_is_corruption_with_its_offset(tmp_path):
    data = copy_bytes(MIXED)
    off = event_offsets(MIXED)[300][0]
    struct.pack_into("<I", data, off + 9, 0)
    with Binlog(write(tmp_path, data)) as b:
        with pytest.raises(CorruptBinlogError, match="below the 19-byte header") as e:
            list(b.groups())
        assert e.value.offset == off
        with pytest.raises(CorruptBinlogError) as e2:
            b.state_at(b.size)
        assert e2.value.offset == off


@pytest.mark.parametrize("growing", [False, True])
def test_huge_event_length(tmp_path, growing):
    data = copy_bytes(MIXED)
    off = event_offsets(MIXED)[300][0]
    struct.pack_into("<I", data, off + 9, 0xFFFFFFF0)
    if growing:
        set_in_use(data)
    with Binlog(write(tmp_path, data)) as b:
        if growing:
            # A writer may be mid-event: stop before it, not an error.
            groups = list(b.groups())
            assert groups and groups[-1].end <= off
        else:
            with pytest.raises(CorruptBinlogError, match="runs past the end") as e:
                list(b.groups())
            assert e.value.offset == off


def test_truncated_closed_file_is_corruption(tmp_path):
    data = copy_bytes(MIXED)[:-10]
    with Binlog(write(tmp_path, data)) as b:
        with pytest.raises(CorruptBinlogError, match="closed binlog"):
            list(b.groups())


def test_growing_file_stops_at_the_last_complete_group(tmp_path):
    """Cut a still-being-written copy at every event boundary and in the
    middle of events: the groups seen are exactly the complete ones."""
    full = copy_bytes(XA)
    with Binlog(XA) as b:
        all_groups = list(b.groups())
    events = event_offsets(XA)
    cuts = sorted({o for o, _, _ in events[3:200]} | {o + 7 for o, _, _ in events[3:200]})
    for cut in cuts:
        p = write(tmp_path, set_in_use(bytearray(full[:cut])))
        with Binlog(p) as b:
            got = list(b.groups())
        expected = [g for g in all_groups if g.end <= cut]
        assert got == expected, f"cut at {cut}"


def test_growing_file_yields_a_terminated_last_group(tmp_path):
    with Binlog(MIXED) as b:
        g = list(b.groups())[10]
    data = set_in_use(copy_bytes(MIXED)[:g.end])
    with Binlog(write(tmp_path, data)) as b:
        assert b.growing
        assert list(b.groups())[-1] == g


def test_encrypted_binlog(tmp_path):
    enc = sorted((M1011 / "encrypted").glob("master-bin.[0-9][0-9][0-9][0-9][0-9][0-9]"))
    assert enc, "the encrypted fixture is missing"
    for p in enc:
        with pytest.raises(EncryptedBinlogError, match="encrypted binlog"):
            Binlog(p)


def test_errors_are_one_line_gtidx_errors(tmp_path):
    for data in [b"", b"\xfebin", b"\xfebin" + bytes(30)]:
        with pytest.raises(GtidxError) as e:
            Binlog(write(tmp_path, data))
        assert "\n" not in str(e.value) and str(tmp_path) in str(e.value)


# -- a closed binlog cut short (issue 11 item 4) -----------------------------------------------------

def _cuts_inside_a_group(path: Path):
    """(cut, group) pairs: event boundaries inside multi-event groups (after
    the GTID event, before the last event), and the end of the last group
    (the ROTATE removed)."""
    with Binlog(path) as b:
        groups = list(b.groups())
        heads = [(off, t) for off, t, _, _ in b.headers()]
    out = []
    for g in groups[5:60:7]:
        inside = [off for off, _ in heads if g.start < off < g.end]
        if inside:
            out.append((inside[len(inside) // 2], g))
    out.append((groups[-1].end, None))
    return groups, out


@pytest.mark.parametrize("path", [MIXED, XA, M1011 / "mixed" / "master-bin.000002", NOCRC],
                         ids=["11.8-mixed", "11.8-xa", "10.11-mixed", "11.8-nochecksum"])
def test_closed_binlog_cut_at_an_event_boundary_says_truncated(tmp_path, path):
    """A closed binlog ends with ROTATE or STOP: cut elsewhere (a partial
    copy), its complete groups are still listed, the cut group never, and
    the walk ends with a CorruptBinlogError that says "truncated". The state
    at any offset before the cut is still the server's."""
    full = copy_bytes(path)
    groups, cuts = _cuts_inside_a_group(path)
    expected_pos = oracle(path)["pos"]
    for cut, cut_group in cuts:
        p = write(tmp_path, full[:cut])
        with Binlog(p) as b:
            assert not b.growing
            seen = []
            with pytest.raises(CorruptBinlogError, match="truncated") as e:
                for g in b.groups():
                    seen.append(g)
            assert e.value.offset == cut
            complete = [g for g in groups if g.end <= cut]
            if cut_group is not None:
                assert seen == [g for g in groups if g.end < cut_group.end]      # the cut group is not there
            else:
                assert seen == complete
            with pytest.raises(CorruptBinlogError, match="truncated"):
                list(b.group_batches(1))
            for offset, answer in expected_pos:
                if 4 < offset < cut:
                    st = b.state_at(offset)
                    assert (None if st is None else st.position()) == (None if answer is None else Position.parse(answer))


def test_closed_binlog_ending_with_its_last_complete_group_lists_it(tmp_path):
    """Cut exactly after a group's terminating XID (the rest, ROTATE included,
    lost): that group is complete and listed, and the file is still truncated."""
    with Binlog(MIXED) as b:
        g = list(b.groups())[10]
    with Binlog(write(tmp_path, copy_bytes(MIXED)[:g.end])) as b:
        seen = []
        with pytest.raises(CorruptBinlogError, match="truncated"):
            for x in b.groups():
                seen.append(x)
        assert seen[-1] == g
