"""``import shapevm`` loads what tracing needs and leaves the rest to first use.

Each check runs a fresh interpreter: the test process has long since loaded everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Loaded at first use only: the text parser, the binary reader and writer, `shapevm.vm`,
# the tools and the monitor. The JIT core (interpreter, scheduler, engine) and the native
# tier (the C library and the lowerings) load with the package: a jitted function needs
# both as it is wrapped.
DEFERRED = (
    "shapevm.bytecode.binary_reader",
    "shapevm.bytecode.binary_writer",
    "shapevm.bytecode.parser",
    "shapevm.tools",
    "shapevm.vm",
)
WITH_THE_PACKAGE = ("shapevm.runtime.interpreter", "shapevm.jit.engine", "shapevm.jit.backend")


def _fresh(code: str) -> object:
    """The JSON that ``code`` prints, run in a new interpreter."""
    env = {**os.environ, "SHAPEVM_MONITOR": ""}  # no monitor page in the child
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_leaves_deferred_modules_unloaded() -> None:
    loaded = _fresh("import json, sys, shapevm; print(json.dumps(sorted(sys.modules)))")
    assert isinstance(loaded, list)
    assert [m for m in DEFERRED if m in loaded] == []
    assert "shapevm.frontend.tracer" in loaded  # the check sees what it should
    assert [m for m in WITH_THE_PACKAGE if m not in loaded] == []


def test_import_does_not_load_logging() -> None:
    """shapevm's own modules import `logging` at first use only. What loaded it before
    shapevm (numpy, a site hook) is not shapevm's: the check is of what shapevm adds."""
    code = (
        "import json, sys, numpy\n"
        "before = 'logging' in sys.modules\n"
        "import shapevm\n"
        "print(json.dumps([before, 'logging' in sys.modules]))"
    )
    result = _fresh(code)
    assert isinstance(result, list)
    before, after = result
    if before:
        pytest.skip("numpy or a site hook loaded logging before shapevm: nothing to check")
    assert not after, "import shapevm loaded logging"


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("type(sv.jit).__name__", "function"),
        ("sv.vm.__name__", "shapevm.vm"),
        ("sv.RuntimeOpError.__module__", "shapevm.runtime.interpreter"),
        ("all(hasattr(sv, n) for n in sv.__all__)", True),
        ("sorted(set(sv.__all__) - set(dir(sv)))", []),
        ("sv.bytecode.parse_program.__module__", "shapevm.bytecode.parser"),
        ("sv.runtime.Executable.__module__", "shapevm.runtime.interpreter"),
        ("sorted(n for n in jit_pkg.__all__ if not hasattr(jit_pkg, n))", []),
    ],
)
def test_deferred_names_resolve(expr: str, expected: object) -> None:
    code = (
        "import json, sys, shapevm as sv, shapevm.bytecode, shapevm.runtime\n"
        "jit_pkg = sys.modules['shapevm.jit']\n"
        f"print(json.dumps({expr}))"
    )
    assert _fresh(code) == expected


def test_jit_stays_the_function_after_the_engine_loads() -> None:
    code = (
        "import json, numpy as np, shapevm as sv, shapevm.numpy as snp\n"
        "f = sv.jit(lambda x: snp.maximum(x, 0.0))\n"
        "y = f(np.array([-1.0, 2.0], np.float32))\n"
        "import shapevm.vm\n"
        "print(json.dumps([type(sv.jit).__name__, y.tolist()]))"
    )
    assert _fresh(code) == ["function", [0.0, 2.0]]
