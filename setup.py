"""The optional compiled piece of gtidx (``gtidx._skip``, see gtidx/_skip.c).

Everything else is in pyproject.toml. Where no C compiler or Python headers
are at hand the extension is left out (``optional=True``) and gtidx runs its
pure-Python walk, which is also the walk's definition and the tests' oracle.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("gtidx._skip", ["gtidx/_skip.c"], optional=True)])
