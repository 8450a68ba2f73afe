"""tools/bench_report.py's arithmetic: per-round ratios, then min/median/max,
and the Markdown it writes (the live measurements themselves run outside
the test suite: `tools/bench`)."""
from __future__ import annotations

import pytest

from tools import bench_report as br


def fake_report() -> dict:
    def lookups(k):
        return {"offset: gtidx index, warm": {"n": 100, "median_ms": 0.2 * k, "p99_ms": 0.4 * k, "wrong": 0},
                "gtid: gtidx locate, warm": {"n": 100, "median_ms": 0.25 * k, "p99_ms": 0.5, "wrong": 0},
                "offset: MariaDB 10.11 BINLOG_GTID_POS (scan)": {"n": 100, "median_ms": 30.0, "p99_ms": 80.0,
                                                                  "wrong": 1}}
    return {"machine": {"python_cpu": "CPython 3.11, cpu", "cores": 2, "memory": "24 GiB", "date": "today"},
            "rounds": 3, "targets": 100, "slow_targets": 10, "server": "10.11.x",
            "workload": {"server": "10.11.x", "files": ["a", "b", "c", "d"], "bytes": 4 << 28},
            "rounds_raw": {
                "build": [{"bare header walk": 800.0, "gtidx build": 700.0, "mariadb-binlog (decode)": 40.0},
                          {"bare header walk": 700.0, "gtidx build": 700.0, "mariadb-binlog (decode)": 35.0},
                          {"bare header walk": 750.0, "gtidx build": 500.0, "mariadb-binlog (decode)": 50.0}],
                "lookups": [lookups(1), lookups(2), lookups(1.5)],
                "cli": [{"python -c pass": 30.0, "gtidx seek --gtid G FILE": 90.0},
                        {"python -c pass": 40.0, "gtidx seek --gtid G FILE": 80.0},
                        {"python -c pass": 35.0, "gtidx seek --gtid G FILE": 70.0}]},
            "index_sizes": [{"set": "mariadb-11.8/mixed", "binlog_bytes": 1000, "gtidx_bytes": 3,
                             "gtidx_ratio": 0.003, "server_bytes": 3, "server_ratio": 0.003},
                            {"set": "mariadb-10.11/mixed", "binlog_bytes": 1000, "gtidx_bytes": 4,
                             "gtidx_ratio": 0.004, "server_bytes": None, "server_ratio": None}]}


def test_ratios_are_taken_within_each_round():
    r = fake_report()
    br.summarize(r)
    # build: contender / gtidx in each round: 800/700, 700/700, 750/500
    assert r["build"]["bare header walk"]["x_gtidx"] == {"min": 1.0, "median": 800 / 700, "max": 1.5}
    assert r["build"]["gtidx build"]["MB_s"] == {"min": 500.0, "median": 700.0, "max": 700.0}
    # lookups: against gtidx warm of the same kind (offset or gtid) in the same round
    srv = r["lookups"]["offset: MariaDB 10.11 BINLOG_GTID_POS (scan)"]
    assert srv["x_gtidx"] == pytest.approx({"min": 75, "median": 100, "max": 150})
    assert srv["wrong"] == 3
    assert r["lookups"]["gtid: gtidx locate, warm"]["x_gtidx"]["median"] == 1.0
    assert r["cli"]["gtidx seek --gtid G FILE"]["x_python"] == {"min": 2.0, "median": 2.0, "max": 3.0}


def test_markdown_tables_and_readme_block(tmp_path):
    r = fake_report()
    br.summarize(r)
    md = br.markdown(r)
    assert "| bare header walk | 750 (700-800) | 1.14 (1-1.5) |" in md
    assert "| offset: MariaDB 10.11 BINLOG_GTID_POS (scan) | 100 | 30 (30-30) | 80 (80-80) | " \
           "100 (75-150) | 3 |" in md
    assert "| mariadb-10.11/mixed | 1,000 | 0.40% | - |" in md
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{br.BEGIN}\nold table\n{br.END}\noutro\n")
    br.update_readme(md, readme)
    text = readme.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith("outro\n")
    assert md in text and "bench/results/report.png" in text
