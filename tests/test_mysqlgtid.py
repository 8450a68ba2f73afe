"""The MySQL GTID-set model against MySQL 9.7's own functions.

The server is the oracle: ``GTID_SUBTRACT(s, '')`` normalizes and prints a
set (9.7 has no GTID_UNION: a union is ``GTID_SUBTRACT(CONCAT(a, ',', b),
'')``), ``GTID_SUBTRACT(a, b)`` subtracts, ``GTID_SUBSET(a, b)`` tests, a
malformed set is its error 1772. Random sets are compared with the server
and with a brute-force model (a Python set of (uuid, tag, gno)).
"""
from __future__ import annotations

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gtidx.errors import GtidSyntaxError
from gtidx.mysqlgtid import GNO_MAX, GtidSet, MysqlGtid
from tools.mysql97 import MySQL97

U = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
V = "8f2379f0-e75f-11f1-a262-02fc00000001"
W = "00000000-0000-0000-0000-0000000000ff"


@pytest.fixture(scope="module")
def cur():
    with MySQL97().ensure().connect() as c, c.cursor() as cur:
        yield cur


def server_norm(cur, text: str) -> str | None:
    """The server's normal form of ``text``; None when it refuses it."""
    try:
        cur.execute("SELECT GTID_SUBTRACT(%s, '')", (text,))
    except pymysql.err.MySQLError as e:
        assert e.args[0] == 1772, e
        return None
    return cur.fetchone()[0]


def server_subtract(cur, a: str, b: str) -> str:
    cur.execute("SELECT GTID_SUBTRACT(%s, %s)", (a, b))
    return cur.fetchone()[0]


def server_subset(cur, a: str, b: str) -> bool:
    cur.execute("SELECT GTID_SUBSET(%s, %s)", (a, b))
    return bool(cur.fetchone()[0])


# -- parsing and printing, case by case --------------------------------------

CASES = [
    f"{U}:1-3:5", f" {U} : 1 - 3 : 5 ", f"{U}:3-1", f"{U}", f"{U}:Tag:1-2:aa:3:1-2", f"{U}:tag",
    f"{U}:1,", f",{U}:1", f"{U}:1,,{V}:2", f"{V}:1,\n{U}:1", f"{U.upper()}:1", U.replace("-", "") + ":1",
    "{" + U + "}:1", f"{U}:{GNO_MAX}", f"{U}:1-{GNO_MAX}", f"{U}:_a:1", f"{U}:" + "a" * 32 + ":1",
    f"{U}:1:tag:2:1-3", f"{U}:tag:1:tag:2", f"{U}:01", f"{U}:1-1", f"{U}:5-7:1-3:4",
    f"{U}:TAG:1,{U}:tag:2", f"{U}:1\t,\t{V}:2", "", " ", ",", f"{U}:tag :1", f"{U}: tag:1",
    f"{V}:b:4:a:1,{W}:9,{U}:z:1:2", f"{U}:1-5:3-9:11:10",
    # refused by the server
    f"{U}:tag:", f"{U}::1", f"{V}:1\n{U}:1", f"{U}:0", f"{U}:{GNO_MAX + 1}", f"{U}:1a:1",
    f"{U}:" + "a" * 33 + ":1", f"{U}:1:", f"{U}:+1", f"{U}:1 2", f"{U}:t-g:1", f"{U}:tag:1-", f"{U}:-1",
    "3e11fa47-71ca-11e1-9e33-c80aa942956:1", "3e11fa47:1", f"{U}:1-99999999999999999999999",
    "{" + U + ":1", f"{U}:1;2", f"{U}:1-2-3",
    "3e11fa4771ca-11e1-9e33-c80aa9429562:1", "{" + U.replace("-", "") + "}:1", U + "}:1",
    "3e11fa47-71ca-11e1-9e33c80aa9429562:1", f"{U}:a b:1", f"{U}:a\n:1", f"{U}:\u0661", f"{U}:1 -2",
    f"{U}:9223372036854775807-1", f"{U}:1:a:2:", f"{U}:1,,,", f"\t{U}\t:\t1\t",
]


@pytest.mark.parametrize("text", CASES)
def test_parse_prints_as_the_server(cur, text):
    expected = server_norm(cur, text)
    if expected is None:
        with pytest.raises(GtidSyntaxError):
            GtidSet.parse(text)
    else:
        s = GtidSet.parse(text)
        assert str(s) == expected
        assert s.one_line() == expected.replace(",\n", ",")
        assert GtidSet.parse(str(s)) == s
        assert GtidSet.parse(s.one_line()) == s


def test_gtid_executed_text(cur):
    """@@gtid_executed parses to a set that prints back exactly."""
    cur.execute("SELECT @@GLOBAL.gtid_executed")
    text = cur.fetchone()[0]
    assert str(GtidSet.parse(text)) == text


def test_one_gtid():
    g = MysqlGtid.parse(f" {U.upper()} : TaG : 07 ")
    assert g == MysqlGtid(U, "tag", 7) and str(g) == f"{U}:tag:7"
    assert str(MysqlGtid.parse(f"{U}:5")) == f"{U}:5"
    for bad in (f"{U}", f"{U}:0", f"{U}:1-2", f"{U}:t:a:1", "0-1-5", f"{U}:{GNO_MAX + 1}", f"{U}:1x"):
        with pytest.raises(GtidSyntaxError):
            MysqlGtid.parse(bad)
    s = GtidSet.parse(f"{U}:1-3:t:5")
    assert MysqlGtid(U, "", 2) in s and MysqlGtid(U, "t", 5) in s
    assert MysqlGtid(U, "", 4) not in s and MysqlGtid(U, "t", 4) not in s and MysqlGtid(V, "", 1) not in s


def test_add_keeps_the_set_normal():
    s = GtidSet()
    for gno in (5, 1, 3, 2, 4, 9, 7, 8, 6, 2):
        s.add(U, "", gno)
    assert str(s) == f"{U}:1-9" and len(s) == 9
    s.add(U, "x", 3)
    assert str(s) == f"{U}:1-9:x:3" and s.last(U) == 9 and s.last(U, "x") == 3 and s.last(V) is None


# -- random sets: the server and a brute-force model ----------------------------

uuids = st.sampled_from([U, V, W])
tags = st.sampled_from(["", "a", "b_1", "Zz"])


@st.composite
def set_texts(draw) -> tuple[str, set]:
    """Random set text in the server's accepted variety, and its members."""
    members: set = set()
    items = []
    for _ in range(draw(st.integers(0, 4))):
        uuid = draw(uuids)
        shown = draw(st.sampled_from([uuid, uuid.upper(), uuid.replace("-", ""), "{" + uuid + "}"]))
        parts = [shown]
        tag = ""
        for _ in range(draw(st.integers(0, 4))):
            if draw(st.booleans()):
                new = draw(tags)
                if new:                 # (a set cannot switch back to untagged)
                    parts.append(new)
                    tag = new.lower()
                    continue
            base = draw(st.sampled_from([0, 0, 0, GNO_MAX - 40]))   # the top of the range too
            a = base + draw(st.integers(1, 40))
            b = base + draw(st.integers(1, 40))
            if a == b and draw(st.booleans()):
                parts.append(str(a))
            else:
                parts.append(f"{a}-{b}" if draw(st.booleans()) else f"{a} - {b}")
            members.update((uuid, tag, g) for g in range(a, b + 1))
        items.append(draw(st.sampled_from(["", " ", "\n"])).join([""] + [":".join(parts)]))
    sep = draw(st.sampled_from([",", ", ", ",\n", " ,"]))
    return sep.join(items), members


def brute(members: set) -> GtidSet:
    return GtidSet(members)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(set_texts(), set_texts())
def test_random_sets_against_the_server(cur, a, b):
    ta, ma = a
    tb, mb = b
    sa, sb = GtidSet.parse(ta), GtidSet.parse(tb)
    # the model: parsing gives exactly the members
    assert sa == brute(ma) and sb == brute(mb)
    assert set(sa) == ma and len(sa) == len(ma)
    assert (sa | sb) == brute(ma | mb)
    assert (sa - sb) == brute(ma - mb)
    assert (sa & sb) == brute(ma & mb)
    assert sa.issubset(sb) == (ma <= mb)
    # the server
    assert str(sa) == server_norm(cur, ta)
    assert str(sa | sb) == server_norm(cur, ta + "," + tb)
    assert str(sa - sb) == server_subtract(cur, ta, tb)
    assert sa.issubset(sb) == server_subset(cur, ta, tb)
    assert sb.issubset(sa) == server_subset(cur, tb, ta)
