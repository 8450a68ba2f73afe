"""The repository's developer tools: fuzzing and fault campaigns, benchmarks,
fixture and workload generators, private MariaDB servers. Not shipped in the
gtidx wheel (pyproject.toml packages only gtidx*).

Each command is a module run with the repository root on the module path:
``tools/fuzz ...`` (a small wrapper, from any directory) or, from the
repository root, ``python -m tools.fuzz ...``; tests import them
(``from tools import fuzz``, ``from tools.mariadb import MariaDB``).
"""
