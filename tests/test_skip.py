"""The optional compiled skip (gtidx/_skip.c) against its definition.

``walk.group_walk`` and ``walk.apply_until`` hand the events between two cold ones
to ``gtidx._skip.skip`` where it is built. The pure-Python loops are the
definition: these tests hold the C function equal to a brute-force Python
``skip`` on arbitrary bytes, and the walks with and without it equal on
every fixture binlog, on damaged copies and through tiny windows."""
from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gtidx.filebuf
from gtidx.binlog import walk
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import GtidxError

from conftest import damaged, fixture_files, fixture_id

TYPE_LENGTH = struct.Struct("<4xB4xI")


def test_the_compiled_skip_is_built():
    """pip builds it wherever a C compiler and Python's headers are (the
    test command installs them on a fresh machine): a walk without it is
    right but about 1.5x slower."""
    import gtidx._skip  # noqa: F401
    assert walk._skip is not None


def py_skip(buf, off: int, cold: bytes, limit: int | None = None) -> int:
    """The definition: the offsets the Python loops visit."""
    while limit is None or off <= limit:
        try:
            etype, ln = TYPE_LENGTH.unpack_from(buf, off)
        except struct.error:
            return off
        if ln < 19 or cold[etype]:
            return off
        off += ln
    return off


def _event_stream(draw_lengths, types) -> bytes:
    out = bytearray()
    for ln, t in zip(draw_lengths, types):
        ev = bytearray(min(max(ln, 13), 64))      # the length field may lie
        ev[4] = t
        ev[9:13] = struct.pack("<I", ln)
        out += ev
    return bytes(out)


@settings(max_examples=400, deadline=None)
@given(lengths=st.lists(st.one_of(st.integers(19, 60), st.integers(0, 25), st.integers(0, 2**32 - 1)),
                        max_size=30),
       types=st.lists(st.integers(0, 255), min_size=30, max_size=30),
       cold=st.sets(st.integers(0, 255), max_size=8),
       cut=st.integers(0, 40), off=st.integers(0, 80),
       limit=st.one_of(st.none(), st.integers(-5, 2000)))
def test_skip_equals_its_definition_on_any_bytes(lengths, types, cold, cut, off, limit):
    from gtidx._skip import skip
    data = _event_stream(lengths, types)
    data = data[:max(0, len(data) - cut)]
    table = bytes(t in cold for t in range(256))
    for buf in (data, bytearray(data), memoryview(bytearray(data))[1:]):
        if limit is None:
            assert skip(buf, off, table) == py_skip(buf, off, table)
        else:
            assert skip(buf, off, table, limit) == py_skip(buf, off, table, limit)


def test_skip_refuses_bad_arguments():
    from gtidx._skip import skip
    with pytest.raises(ValueError):
        skip(b"x" * 40, 0, b"\0" * 255)
    with pytest.raises(ValueError):
        skip(b"x" * 40, -1, bytes(256))
    with pytest.raises(TypeError):
        skip(b"x" * 40, 0)
    with pytest.raises(TypeError):
        skip("text", 0, bytes(256))


def _everything(path, spans=(1, 4096, 65536)) -> dict:
    """Every answer a walk gives for one binlog: groups, batches, framing,
    states at group boundaries and just past them (None there), or the
    error a damaged file gives (type and message)."""
    out = {}
    try:
        with Binlog(path) as b:
            spans_list = list(b.group_spans())
            out["spans"] = spans_list
            for span in spans:
                out[f"batches{span}"] = [(end, list(rows), due) for end, rows, due in b.group_batches(span)]
            out["end"] = b.complete_end(4, closed_check=False)
            # the tail check's walk (the end and the last event's start), from the first group and the last two
            out["ends"] = [walk.complete_ends(b, s) for s, _, _ in spans_list[:1] + spans_list[-2:]]
            ends = [e for _, e, _ in spans_list]
            picks = ends[:: max(1, len(ends) // 25)] + ends[-2:]
            out["states"] = [(o, None if (s := b.state_at(o)) is None else str(s.position()),
                              None if (s := b.state_at(o + 1)) is None else str(s.position()))
                             for o in picks]
    except GtidxError as e:
        out["error"] = (type(e).__name__, str(e), getattr(e, "offset", None))
    return out


def _both(monkeypatch, fn):
    """``fn()`` with the compiled skip and with the pure-Python loops."""
    import gtidx._skip
    monkeypatch.setattr(walk, "_skip", gtidx._skip.skip)
    compiled = fn()
    monkeypatch.setattr(walk, "_skip", None)
    pure = fn()
    return compiled, pure


@pytest.mark.parametrize("path", [p for p, _ in fixture_files()], ids=lambda p: fixture_id(p))
def test_walks_equal_with_and_without_the_compiled_skip(monkeypatch, path):
    compiled, pure = _both(monkeypatch, lambda: _everything(path))
    assert compiled == pure


@pytest.mark.parametrize("window", [32, 97])
def test_walks_equal_through_tiny_windows(monkeypatch, window):
    """Windows of 32 bytes and up: the skip stops where a header no longer
    fits, the window moves, the Python loop goes on from there."""
    monkeypatch.setattr(gtidx.filebuf, "WINDOW_FIRST", window)
    monkeypatch.setattr(gtidx.filebuf, "WINDOW", window)
    for path, _ in fixture_files()[::3]:
        compiled, pure = _both(monkeypatch, lambda: _everything(path, spans=(1, 3 * window)))
        assert compiled == pure, path


MIXED = next(p for p, _ in fixture_files() if "mixed" in str(p))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.one_of(st.none(), st.floats(0.05, 1)))
def test_damaged_binlogs_walk_alike(monkeypatch, tmp_path_factory, flips, cut):
    """Bytes overwritten anywhere (lengths, types, GTID heads) and files cut
    short: the same groups, states, or the same error, at the same offset."""
    data = damaged(MIXED.read_bytes(), flips, cut)
    path = tmp_path_factory.mktemp("dmg") / MIXED.name
    path.write_bytes(data)
    compiled, pure = _both(monkeypatch, lambda: _everything(path))
    assert compiled == pure
    os.unlink(path)


class _Chain:
    """What ``walk.complete_ends`` reads of a binlog: its size, windows, errors."""

    def __init__(self, path):
        self.src = gtidx.filebuf.ReadFile(path)
        self.size = self.src.size

    def window(self, start, end):
        return gtidx.filebuf.Window(self.src, start, end)

    def corrupt(self, message, offset):
        return GtidxError(f"{message} at {offset}")


def _ends_brute(data: bytes, start: int):
    off, last = start, None
    while off + 19 <= len(data):
        ln = TYPE_LENGTH.unpack_from(data, off)[1]
        if ln < 19:
            return ("error", off)
        if off + ln > len(data):
            break
        last, off = off, off + ln
    return off, last


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.one_of(st.integers(19, 90), st.integers(19, 3000), st.integers(0, 40)), max_size=60),
       cut=st.integers(0, 40), window=st.sampled_from([32, 64, 100, 4096]), gap=st.sampled_from([1, 20, 200]))
def test_complete_ends_equal_their_definition(monkeypatch, tmp_path_factory, lengths, cut, window, gap):
    """The end of the complete events and the last one's start, through any
    window and any step back: with the compiled skip, without it, and a
    brute force over the bytes agree (a short event: the same error)."""
    data = bytearray()
    for ln in lengths:
        ev = bytearray(max(ln, 19))
        ev[4] = 2
        ev[9:13] = struct.pack("<I", ln)
        data += ev
    data = bytes(data[:max(0, len(data) - cut)])
    path = tmp_path_factory.mktemp("chain") / "c-bin.000001"
    path.write_bytes(data)
    monkeypatch.setattr(gtidx.filebuf, "WINDOW_FIRST", window)
    monkeypatch.setattr(gtidx.filebuf, "WINDOW", window)
    monkeypatch.setattr(walk, "_BACK_GAP", gap)

    def ends():
        b = _Chain(path)
        try:
            return walk.complete_ends(b, 0)
        except GtidxError as e:
            return ("error", int(str(e).rsplit(" ", 1)[1]))
        finally:
            b.src.close()
    compiled, pure = _both(monkeypatch, ends)
    assert compiled == pure == _ends_brute(data, 0)
    os.unlink(path)


GROWING = [p for p, _ in fixture_files() if any(k in str(p) for k in ("bigtrx", "mixed", "manydomains"))][:4]


@pytest.mark.parametrize("window", [None, 32, 97, 4096])
def test_a_walks_end_read_off_its_last_view_equals_walking_it_again(monkeypatch, tmp_path, window):
    """Where a group walk ends (a growing binlog cut anywhere: inside a
    header, an event, a GTID event, at a boundary), the end of its complete
    events and the start of the last one are read off the walk's last view
    (``walk._ends_in_view``), not walked again from the last cold event: the
    same as ``complete_ends`` from there, compiled and pure, through any
    window. Through the default windows most walks can tell; the rest (the
    last complete event starts in an earlier view) walk again, as before."""
    import gtidx._skip
    from conftest import growing_copy
    if window is not None:
        monkeypatch.setattr(gtidx.filebuf, "WINDOW_FIRST", window)
        monkeypatch.setattr(gtidx.filebuf, "WINDOW", window)
    seen = []
    real = Binlog.tail_end

    def tail_end(self, mark, open_start, flags2, last_before=None, complete=None):
        seen.append((self, mark, complete))
        return real(self, mark, open_start, flags2, last_before, complete)
    monkeypatch.setattr(Binlog, "tail_end", tail_end)
    told = walks = 0
    path = tmp_path / "master-bin.000001"
    assert GROWING
    for source in GROWING:
        data = source.read_bytes()
        for k in range(1, 41):
            cut = max(300, len(data) * k // 41 + (k * 7919) % 97)
            path.write_bytes(growing_copy(data, cut))
            with Binlog(path) as b:
                seen.clear()
                try:
                    for _ in b.group_batches(4096):
                        pass
                except GtidxError:
                    pass
                for _, mark, complete in seen:
                    walks += 1
                    if complete is None:
                        continue
                    told += 1
                    compiled, pure = _both(monkeypatch, lambda: walk.complete_ends(b, mark))
                    assert complete == compiled == pure, (source, cut, mark)
                    monkeypatch.setattr(walk, "_skip", gtidx._skip.skip)    # back on for the next walk
    assert walks and told >= (0.8 * walks if window is None else 1), (told, walks)
