"""The optional compiled pieces of gtidx: ``gtidx._skip`` (see gtidx/_skip.c)
and the row decoder ``gtidx._rows`` (see gtidx/_rows.c, linked with zlib).

Everything else is in pyproject.toml. Where no C compiler or Python headers
are at hand the extensions are left out (``optional=True``) and gtidx runs its
pure-Python walk and row decoding, which are also their definitions and the
tests' oracles.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("gtidx._skip", ["gtidx/_skip.c"], optional=True),
                   Extension("gtidx._rows", ["gtidx/_rows.c"], libraries=["z"], optional=True)])
