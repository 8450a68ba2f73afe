"""The ``gtidx`` command line: parse arguments, call one api function, format.

``main`` (the group ``cli``, its lazy command table ``COMMANDS``, the console
entry ``main``), ``options`` (the click options and parameter types several
commands share), ``output`` (stdout, error lines, warnings), and the
commands, one module per family: ``lookup`` (seek), ``offsets`` (pos,
probe), ``commands`` (scan, show, build, verify, info, dump), ``changes``
(changes), ``sidecar`` (tail, status) and ``archive`` (catalog, spark), each
imported only when one of its commands runs or a help text lists it.

The console script is ``gtidx.cli:main``; note that the name ``main`` here
is that function, not the module ``gtidx.cli.main`` (``from gtidx.cli.main
import ...`` reaches the module).
"""
from .main import COMMANDS, GtidxGroup, cli, main

__all__ = ["COMMANDS", "GtidxGroup", "cli", "main"]
