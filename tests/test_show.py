"""gtidx show: an event group decoded, against mariadb-binlog -v on the same
files (every group of every fixture; a live 10.11 server's binlogs under
binlog_row_metadata and binlog_row_image settings)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from gtidx import api
from gtidx.binlog import Binlog
from gtidx.show import decode_group
from showoracle import binlog_rows, differences

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def fixture_binlogs() -> list[Path]:
    """Every fixture binlog mariadb-binlog can read (not the encrypted set)."""
    return sorted(p for p in FIXTURES.glob("mariadb-*/*/*-bin.[0-9]*")
                  if p.suffix[1:].isdigit() and p.parent.name != "encrypted")


@pytest.mark.parametrize("path", fixture_binlogs(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_every_fixture_group_equals_mariadb_binlog(path):
    theirs = binlog_rows(path)
    with Binlog(path) as b:
        groups = list(b.groups())
    assert set(theirs) == {g.start for g in groups}
    decoded = 0
    with_rows = [g for g in groups if theirs[g.start]]
    through_api = {g.start for g in with_rows[:1] + with_rows[-1:]}   # the rest: the decoder, one open file
    b = Binlog(path)
    for g in groups:
        mine = (api.show(path, offset=g.start) if g.start in through_api else decode_group(b, g)).as_dict()
        assert (mine["gtid"], mine["start"], mine["end"]) == (str(g.gtid), g.start, g.end)
        assert mine["column_names"] in ("positional", "none")
        wrong = differences(mine["rows"], theirs[g.start])
        assert not wrong, (g, wrong[:5])
        decoded += bool(mine["rows"])
    b.close()
    assert decoded == len(with_rows)
