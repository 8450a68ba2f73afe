"""Every fixture binlog (10.11 and 11.8) against what the real server said.

For each file: the groups equal the oracle's (GTID, start, end), and at every
sampled offset the scanner's state equals the server's BINLOG_GTID_POS
answer, or both give none.
"""
import pytest

from conftest import fixture_files, fixture_id
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import EncryptedBinlogError
from gtidx.gtid import Position

FILES = fixture_files()


def test_fixtures_are_present():
    servers = {p.parent.parent.name for p, _ in FILES}
    assert servers == {"mariadb-10.11", "mariadb-11.8"}, servers
    assert len(FILES) >= 25


@pytest.mark.parametrize("path, expected", FILES, ids=[fixture_id(p) for p, _ in FILES])
def test_scanner_agrees_with_the_server(path, expected):
    if path.parent.name == "encrypted":
        with pytest.raises(EncryptedBinlogError):
            Binlog(path)
        return
    with Binlog(path) as b:
        assert b.size == expected["size"]
        groups = [[str(g.gtid), g.start, g.end] for g in b.groups()]
        assert groups == expected["groups"]
        wrong = []
        for offset, answer in expected["pos"]:
            state = b.state_at(offset)
            mine = None if state is None else state.position()
            theirs = None if answer is None else Position.parse(answer)
            if mine != theirs:
                wrong.append((offset, str(mine), answer))
        assert not wrong, f"{len(wrong)} of {len(expected['pos'])} answers differ, first: {wrong[:3]}"
        assert len(expected["pos"]) >= 10
