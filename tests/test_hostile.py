"""Hostile inputs: damaged copies of real binlogs. Every operation either
answers or raises a GtidxError: never another exception, never a hang
(pytest-timeout bounds each test)."""
from __future__ import annotations

import os
import random
import struct
import tempfile

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import GtidxError

M118 = FIXTURES / "mariadb-11.8"
SOURCES = {
    "nonmono": (M118 / "nonmono" / "master-bin.000008").read_bytes(),
    "xa-head": (M118 / "xa" / "master-bin.000006").read_bytes()[:12000],
    "nochecksum-head": (M118 / "nochecksum" / "master-bin.000014").read_bytes()[:12000],
}

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 20)),
    st.tuples(st.just("u32"), st.integers(0, 1 << 20), st.sampled_from([0, 1, 18, 19, 0xFFFFFFFF, 0x7FFFFFFF])),
    st.tuples(st.just("splice"), st.integers(0, 1 << 20), st.integers(0, 1 << 20), st.integers(1, 300)),
    st.tuples(st.just("in_use"),),
)


def mutate(data: bytearray, op) -> bytearray:
    n = len(data)
    if n == 0:
        return data
    kind = op[0]
    if kind == "flip":
        data[op[1] % n] ^= 1 << op[2]
    elif kind == "truncate":
        del data[op[1] % n:]
    elif kind == "u32" and n >= 4:
        struct.pack_into("<I", data, op[1] % (n - 3), op[2])
    elif kind == "splice":
        a, b, ln = op[1] % n, op[2] % n, op[3]
        data[b:b + ln] = data[a:a + ln]
    elif kind == "in_use" and n > 21:
        data[21] |= 1
    return data


def exercise(path: str) -> None:
    """Everything a user can ask of one binlog; GtidxError is an answer."""
    try:
        b = Binlog(path)
    except GtidxError:
        return
    with b:
        for job in (lambda: list(b.groups()),
                    lambda: list(b.events()),
                    lambda: [b.state_at(o) for o in (0, 4, 256, b.size // 2, b.size, b.size + 1)],
                    lambda: [b.event_ok(g.start) for g in b.groups()]):
            try:
                job()
            except GtidxError as e:
                assert "\n" not in str(e)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SOURCES)), st.lists(mutation, min_size=1, max_size=4))
def test_mutated_binlogs(source, ops):
    data = bytearray(SOURCES[source])
    for op in ops:
        data = mutate(data, op)
    fd, path = tempfile.mkstemp(prefix="gtidx-hostile-")
    try:
        os.write(fd, bytes(data))
        os.close(fd)
        exercise(path)
    finally:
        os.unlink(path)


def test_seeded_random_bytes_and_random_tails(tmp_path):
    rnd = random.Random(20261122)
    head = SOURCES["xa-head"][:300]
    for i in range(200):
        body = rnd.randbytes(rnd.randrange(0, 5000))
        for data in (body, b"\xfebin" + body, head + body):
            p = tmp_path / f"f{i}"
            p.write_bytes(data)
            exercise(str(p))
