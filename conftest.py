"""Collection rules for the whole repository (doctests in src/ included)."""

import importlib.util

# The native kernels import numba at module level; without it their doctests cannot even be
# collected, and tests/jit/native skips itself.
collect_ignore_glob = []
if importlib.util.find_spec("numba") is None:
    collect_ignore_glob.append("src/shapevm/jit/native/*")
