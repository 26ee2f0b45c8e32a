"""The on-disk kernel cache: a second process loads machine code; damage costs a rebuild."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba", exc_type=ImportError)

from shapevm.jit.native import codegen, diskcache

ROOT = Path(__file__).resolve().parents[3]

_PROGRAM = """
import sys, numpy as np
from shapevm.jit.native.codegen import compile_fused
from shapevm.jit.native.expr import input, unary
k = compile_fused(unary("tanh", input(0)) * 3.0 + input(0), ["float32"], [1],
                  cache_dir=sys.argv[1])
y = k(np.float32([0.0, 1.0]))
print(k.origin, float(y[1]))
"""


def _run(cache_dir: Path) -> tuple[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM, str(cache_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    origin, value = done.stdout.split()
    return origin, float(value)


def _damage(cache_dir: Path, how: str) -> int:
    files = [p for p in (cache_dir / "kernels").rglob("*") if p.is_file()]
    for p in files:
        data = p.read_bytes()
        if how == "truncate":
            p.write_bytes(data[: len(data) // 2])
        elif how == "garble":
            p.write_bytes(bytes((b * 31 + 7) % 256 for b in data))
        else:
            p.write_bytes(b"")
    return len(files)


def test_second_process_loads_machine_code_and_survives_damage(tmp_path: Path) -> None:
    expected = pytest.approx(1.0 + 3.0 * 0.7615941559557649, rel=1e-6)
    assert _run(tmp_path) == ("compiled", expected)
    assert _run(tmp_path) == ("disk", expected)
    for how in ("truncate", "garble", "empty"):
        # the module, numba's index and its machine code: all three damaged at once
        assert _damage(tmp_path, how) >= 3
        assert _run(tmp_path) == ("compiled", expected), how
        assert _run(tmp_path) == ("disk", expected), how


def test_damaged_module_in_this_process_is_rebuilt(tmp_path: Path) -> None:
    from shapevm.jit.native.expr import input, unary

    e = unary("sin", input(0)) + 2.0
    k = codegen.compile_fused(e, ["float32"], [1], cache_dir=tmp_path)
    path = k.builds[0].path
    assert path is not None and path.read_text() == k.source()
    path.write_text("def kernel(:\n")  # not even Python
    codegen.clear_memory_cache()
    again = codegen.compile_fused(e, ["float32"], [1], cache_dir=tmp_path)
    assert path.read_text() == again.source()


def test_cache_dir_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(diskcache.ENV_VAR, str(tmp_path / "here"))
    assert diskcache.default_cache_dir() == tmp_path / "here"
    monkeypatch.delenv(diskcache.ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert diskcache.default_cache_dir() == tmp_path / "xdg" / "shapevm"


def test_module_names_depend_on_source_and_machine() -> None:
    a = diskcache.module_name("x = 1\n")
    assert a == diskcache.module_name("x = 1\n") and a != diskcache.module_name("x = 2\n")
    assert a.startswith("svk_") and "numba" in diskcache.machine_tag()
