"""``gtidx serve`` following a binlog that is still written, without a
server: a real binlog (bundled 10.11 ones: big transactions, several files, compressed events, XA)
written in two steps, cut anywhere first (the FDE's IN_USE flag set, as
its server has it while writing), then whole. The stream sends, in the
first step, exactly the complete groups (and the events outside groups)
before the cut, never part of a group, and after the second the rest: in
all, every event of the file once, in order. The oracle of "complete
group" is gtidx's group walk of the whole file (tests/test_binlog.py holds
that walk against the server's SHOW BINLOG EVENTS)."""
from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, growing_copy
from gtidx.binlog.mariadb import Binlog
from gtidx.serve import wire
from gtidx.serve.stream import Stream

HEARTBEAT = 27
SOURCES = [FIXTURES / "mariadb-10.11" / name for name in ("bigtrx", "multifile", "compressed", "xa")]


def first_binlog(directory: Path) -> Path:
    return sorted(p for p in directory.iterdir() if p.name.startswith("master-bin.0"))[0]


def read_until_heartbeat(conn: wire.Connection) -> list[bytes]:
    out = []
    while True:
        ev = conn.read_packet(limit=1 << 26)[1:]
        if ev[4] == HEARTBEAT:
            return out
        out.append(ev)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SOURCES), st.floats(0, 1))
def test_a_growing_binlog_is_sent_a_complete_group_at_a_time(tmp_path_factory, source, where):
    original = first_binlog(source).read_bytes()
    with Binlog(first_binlog(source)) as b:
        body = b.body_start
        fde_end = 4 + b.fde.length
        spans = [(gs, ge) for gs, ge, _ in b.group_spans()]
        outside = [off + ln for off, _, _, ln in b.headers(fde_end) if not any(gs <= off < ge for gs, ge in spans)]
    stops = sorted({fde_end, *outside, *(ge for _, ge in spans)})   # where a sender may stop: never inside a group
    cut = body + int(where * (len(original) - body))
    d = tmp_path_factory.mktemp("follow")
    path = d / "master-bin.000001"
    path.write_bytes(growing_copy(original, cut))
    a, z = socket.socketpair()
    stream = Stream(wire.Connection(a), [str(path)], 0, 4, None, 1, 0.05, lambda line: None,
                    relist=lambda: [str(path)])
    t = threading.Thread(target=lambda: _run(stream))
    t.start()
    try:
        replica = wire.Connection(z)
        first = read_until_heartbeat(replica)
        assert first[0][4] == 4 and first[1][4] == 15                 # the fake ROTATE, the FDE
        sent = fde_end + sum(len(e) for e in first[2:])
        assert sent == max(x for x in stops if x <= cut)               # all that is complete, nothing more
        tmp = d / "grown"
        tmp.write_bytes(original)
        os.replace(tmp, path)
        rest = read_until_heartbeat(replica)
        got = b"".join(first[2:] + rest)
        assert got == original[fde_end:]
    finally:
        z.close()
        t.join(10)
        a.close()


def _run(stream: Stream) -> None:
    try:
        stream.run()
    except (wire.ProtocolError, OSError):
        pass                                   # the replica's end closes the stream
