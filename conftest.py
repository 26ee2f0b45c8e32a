"""Collection rules for the whole repository (doctests in src/ included)."""

# The native kernels import numba at module level; without it (or with a broken install)
# their doctests cannot even be collected, and tests/jit/native skips itself.
collect_ignore_glob = []
try:
    import numba  # noqa: F401
except ImportError:
    collect_ignore_glob.append("src/shapevm/jit/native/*")
