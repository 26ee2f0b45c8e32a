"""Tier 3: C generated for fused chains computes what the interpreter computes; the cache
of built libraries is keyed, checked and never trusted when its folder is not private;
without a compiler tier 3 is skipped with the reason."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shapevm as sv
import shapevm.numpy as snp
from shapevm import native
from shapevm.frontend.tracer import bind_op
from shapevm.jit.backend import codegen, tier3, toolchain
from shapevm.jit.backend.function import lower_function
from shapevm.jit.backend.registry import LOWERINGS
from shapevm.jit.backend.variant import Variant
from shapevm.jit.regions import find_regions
from shapevm.runtime.interpreter import Executable

needs_cc = pytest.mark.skipif(toolchain.compiler() is None, reason="no C compiler here")


def test_every_fusible_op_has_a_c_form() -> None:
    assert codegen.missing_ops() == []


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SHAPEVM_CACHE_DIR", str(tmp_path / "cache"))
    yield toolchain.cache_root()


def _chain_source() -> tuple[str, str]:
    from shapevm.jit.backend.chains import Chain, Node

    f32 = np.dtype(np.float32)
    chain = Chain((7,), [0], [Node("exp", (("in", 0),), f32)], [(0, 1)], input_dtypes=[f32])
    return codegen.chain_source(chain, "generic")


def test_a_power_of_a_constant_two_is_a_square_in_generated_code() -> None:
    """``pow(x, 2.0)`` (ONNX's ``Pow`` with a constant 2, a traced ``bind_op``) is ``x * x``
    in tier 3 as in the tile interpreter's plan, not the general power; other exponents
    stay ``vpow``."""
    from shapevm.jit.backend.chains import Chain, Node

    f32 = np.dtype(np.float32)
    for exponent, square in ((2.0, True), (3.0, False)):
        node = Node("pow", (("in", 0), ("lit", exponent)), f32)
        chain = Chain((7,), [0], [node], [(0, 1)], input_dtypes=[f32])
        _, source = codegen.chain_source(chain, "generic")
        code = source.partition("*/")[2]
        assert ("(x0 * x0)" in code and "vpow" not in code) == square, code


def test_program_text_cannot_leave_the_generated_comment() -> None:
    """A chain's text (from a program, maybe a loaded file) goes into a C comment only;
    an attribute holding ``*/`` and C after it stays inside that comment."""
    from shapevm.jit.backend.chains import Chain, Node

    f32 = np.dtype(np.float32)
    hostile = {"note": "*/ int injected; /*"}
    chain = Chain(
        (7,), [0], [Node("exp", (("in", 0),), f32, hostile)], [(0, 1)], input_dtypes=[f32]
    )
    _, source = codegen.chain_source(chain, "generic")
    comment, _, code = source.partition("*/")
    assert "injected" in comment and "injected" not in code


FUNCTIONS = {
    "gelu-ish": lambda x, y: 0.5 * x * (1 + snp.tanh(0.8 * (x + 0.04 * x * x * x))) + y,
    "where and comparisons": lambda x, y: snp.where((x > y) & (y > -0.5), x - y, snp.sqrt(y * y)),
    "floor, mod, pow": lambda x, y: snp.floor(x * 3.0) % 2.0 + snp.abs(y) ** 1.5,
    "maximum with nan": lambda x, y: snp.maximum(x, snp.log(y)) * snp.minimum(y, 0.25),
    "trailing sum": lambda x, y: snp.sum(snp.exp(x) * y, axis=-1, keepdims=True),
    "trailing max over two axes": lambda x, y: snp.max(snp.sin(x) + snp.cos(y), axis=(1, 2)),
    "mean then broadcast": lambda x, y: x - snp.mean(x * y, axis=-1, keepdims=True),
    # an op only ONNX models bring (Softplus, Mish): every op of the table, however it is used
    "softplus (mish)": lambda x, y: x * snp.tanh(bind_op("softplus", [x * 30.0])) + y,
}


def _check_against_the_interpreter(fn: Any, specs: Any, arrays: Any) -> None:
    """Every chain of ``fn`` runs generated code (the last set of arrays specialized, which
    bakes in an innermost extent the program fixes); each result matches the interpreter."""
    exp = sv.export(sv.jit(fn))(*specs)
    ex = Executable(exp.program)
    lowerings = [f for _, f in LOWERINGS]
    nf = lower_function(ex, find_regions(ex.fn, ex.program), lowerings=lowerings)
    assert any(k.chain is not None for r in nf.regions for k in r.lowered.kernels)
    for i, (args, env) in enumerate(arrays):
        want = exp.call(*args)
        variant = Variant(ex, ("exact", tuple(env.values())), nf, env)
        patches = tier3.generate(variant, env, specialize=i == len(arrays) - 1)
        short = [m for m in patches.skipped if "tier 2 runs rows shorter than" in m]
        assert patches.installed and patches.skipped == short, patches.skipped
        try:
            got = variant.run(list(args), env)
        finally:
            patches.remove()
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6, equal_nan=True)


@needs_cc
@pytest.mark.usefixtures("cache")
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_generated_chains_match_the_interpreter(name: str) -> None:
    b, s = sv.symbolic_shape("b, s")
    spec = sv.ShapeDtypeStruct((b, 3, s), np.float32)
    rng = np.random.default_rng(1)
    arrays = []
    # the last shape has more than 2^16 elements: the kernel splits its rows over the pool
    for n, m in [(1, 1), (2, 7), (3, 33), (4, 8192)]:
        x = rng.standard_normal((n, 3, m)).astype(np.float32)
        y = rng.standard_normal((n, 3, m)).astype(np.float32)
        arrays.append(((x, y), {"b": n, "s": m}))
    _check_against_the_interpreter(FUNCTIONS[name], (spec, spec), arrays)


LAYOUTS = {  # operands read in place, broadcast along the rows, or gathered (any stride, bool)
    "a transposed view": lambda x, y, z: snp.exp(snp.transpose(y) * 0.5) + x,
    "a column broadcast along each row": lambda x, y, z: snp.tanh(x * z) - z,
    "bool in and out": lambda x, y, z: snp.logical_xor(x > z, snp.transpose(y) < 0.5),
    "a bool column": lambda x, y, z: snp.where(z > 0.0, x, snp.transpose(y)),
    "max of a transposed view": lambda x, y, z: snp.max(snp.transpose(y) * x, axis=-1),
    "sum with a column": lambda x, y, z: snp.sum(x * z + 1.0, axis=-1),
}


@needs_cc
@pytest.mark.usefixtures("cache")
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_generated_chains_take_every_layout(name: str) -> None:
    """One row shorter than a vector, rows with a partial vector, and longer than a packed
    segment; rows shorter than 64 (3 x 7, 2 x 33) are declined by the generated kernel, and
    tier 2 runs them. (A chain over the column alone, rows of 1, is not generated.)"""
    b, s = sv.symbolic_shape("b, s")
    specs = [sv.ShapeDtypeStruct(shape, np.float32) for shape in [(b, s), (s, b), (b, 1)]]
    rng = np.random.default_rng(2)
    arrays = []
    for n, m in [(1, 1), (1, 7), (3, 7), (2, 33), (5, 101), (2, 256), (3, 64)]:
        args = [rng.standard_normal(shape).astype(np.float32) for shape in [(n, m), (m, n), (n, 1)]]
        arrays.append((tuple(args), {"b": n, "s": m}))
    _check_against_the_interpreter(LAYOUTS[name], specs, arrays)


@needs_cc
def test_a_second_build_is_a_cache_hit(cache: Path) -> None:
    symbol, source = _chain_source()
    first = toolchain.build(symbol, source, "generic")
    again = toolchain.build(symbol, source, "generic")
    assert not first.cached and again.cached and again.path == first.path
    assert again.compile_ms == 0.0
    assert (cache / f"{first.key}.json").exists()
    assert oct(cache.stat().st_mode & 0o777) == "0o700"


@needs_cc
def test_jit_info_lists_each_library_built_and_none_on_a_cache_hit(cache: Path) -> None:
    def chains(z: Any) -> Any:
        return snp.tanh(z * 1.75 + 0.5) * snp.exp(-z)

    rows = []
    for _ in range(2):  # the second function finds the first one's libraries
        f = sv.jit(chains, shapes="b, 64", hot_threshold=1, background=False, tier3_min_elements=0)
        f(np.ones((3, 64), np.float32))
        assert f.wait(60)
        (row,) = f.jit_info()
        assert row["tier3"] == "ready", row["tier3"]
        rows.append(row)
    built, hit = rows
    assert built["tier3_build_ms"] and all(ms > 0 for ms in built["tier3_build_ms"])
    assert sum(built["tier3_build_ms"]) == pytest.approx(built["tier3_ms"], abs=0.01)
    assert hit["tier3_build_ms"] == [] and hit["tier3_ms"] == 0.0


@needs_cc
def test_a_corrupt_entry_is_rebuilt_not_loaded(cache: Path) -> None:
    symbol, source = _chain_source()
    first = toolchain.build(symbol, source, "generic")
    first.path.write_bytes(b"\x7fELF not really")
    again = toolchain.build(symbol, source, "generic")
    assert not again.cached
    toolchain.load(again)  # loads: it was built again


@needs_cc
@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_folder_writable_by_others_is_never_used(cache: Path) -> None:
    cache.mkdir(parents=True)
    os.chmod(cache, 0o777)
    folder, note = toolchain.cache_dir()
    assert folder != cache and "writable by others" in note
    symbol, source = _chain_source()
    built = toolchain.build(symbol, source, "generic")
    assert not str(built.path).startswith(str(cache))


def test_no_compiler_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setenv("PATH", "/nonexistent")
    toolchain.reset()
    try:
        assert toolchain.compiler() is None
        from shapevm.jit.backend import tier3

        assert "no C compiler found ($CC ('/nonexistent/cc'), cc, gcc, clang" in str(
            tier3.available()
        )
    finally:
        monkeypatch.undo()
        toolchain.reset()


@needs_cc
def test_an_option_the_compiler_rejects_is_left_out(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GCC older than 11 refuses -fno-ipa-modref: the tuning options it accepts are
    kept, that one is dropped, and kernels still build."""
    found = toolchain.compiler()
    assert found is not None
    real = " ".join(found[0])
    fake = tmp_path / "old-gcc"
    fake.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in -fno-ipa-modref)\n'
        "  echo \"old-gcc: error: unrecognized command-line option '$a'\" >&2; exit 1;;\n"
        "esac; done\n"
        '[ "$1" = --version ] && { echo "gcc (Old) 10.2.1"; exit 0; }\n'
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    toolchain.reset()
    try:
        assert toolchain.compiler() == ((str(fake),), "gcc (Old) 10.2.1")
        flags = toolchain.flags("generic")
        assert "-fno-ipa-modref" not in flags
        assert "-fno-ipa-cp" in flags and "-fno-asynchronous-unwind-tables" in flags
        symbol, source = _chain_source()
        built = toolchain.build(symbol, source, "generic")
        assert not built.cached and built.path.exists()
    finally:
        monkeypatch.undo()
        toolchain.reset()


def test_patch_takes_generated_code_only() -> None:
    """`Executor.patch` calls what it is given with the generated code's environment as
    its data: a family's kernel (which reads its own data there) is refused."""

    @sv.jit(shapes="b, 16", tier3=False)
    def chain(z: Any) -> Any:
        return snp.tanh(z * 1.5) + z

    chain(np.ones((2, 16), np.float32))
    (row,) = chain.jit_info()
    fn = chain.engines[0].variant(row["key"]).function
    (region,) = fn.regions
    index = next(i for i, k in enumerate(region.lowered.kernels) if k.chain is not None)
    with pytest.raises(native.NativeKernelError, match="not generated code"):
        fn.direct.patch(index, native.rowop_kernel("softmax"))


@needs_cc
@pytest.mark.usefixtures("cache")
@needs_cc
def test_a_cancelled_generate_takes_its_kernels_out(cache: Path) -> None:
    """A compile cancelled (or failing) after some kernels were patched in takes them out:
    the engine never gets the `Patches` that would remove them."""
    from shapevm.jit.errors import CompileCancelled

    def two_chains(x: Any) -> Any:
        return snp.sin(snp.exp(x @ np.ones((64, 64), np.float32)) @ np.ones((64, 64), np.float32))

    (b,) = sv.symbolic_shape("b")
    exp = sv.export(sv.jit(two_chains))(sv.ShapeDtypeStruct((b, 64), np.float32))
    ex = Executable(exp.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    kernels = [k for r in nf.regions for k in r.lowered.kernels if k.chain is not None]
    assert len(kernels) >= 2, [k.label for r in nf.regions for k in r.lowered.kernels]
    calls: list[int] = []

    def check() -> None:
        calls.append(len(nf.patched))
        if len(calls) == 2:
            raise CompileCancelled("timed out")

    variant = Variant(ex, ("exact", (3,)), nf, {"b": 3})
    with pytest.raises(CompileCancelled):
        tier3.generate(variant, {"b": 3}, specialize=True, check=check)
    assert calls[1] >= 1, "the first kernel was patched in before the cancel"
    assert nf.patched == {}
    patches = tier3.generate(variant, {"b": 3}, specialize=True)
    assert nf.patched and patches.installed
    patches.remove()
    assert nf.patched == {}


def test_keys_that_build_the_same_kernel_share_its_slot() -> None:
    """Twelve batch sizes of one width generate the same C for each chain: each kernel is
    patched once and counted per key (copies filled the instruction's 8 slots, and the 9th
    key reported its kernels skipped); it leaves with the last key using it."""

    def chains(z: Any) -> Any:
        return snp.tanh(z * 1.75 + 0.5) * snp.exp(-z)

    f = sv.jit(chains, shapes="b, 64", hot_threshold=1, background=False, tier3_min_elements=0)
    for b in range(1, 13):
        f(np.ones((b, 64), np.float32))
    assert f.wait(60)
    rows = f.jit_info()
    assert len(rows) == 12 and {r["tier3"] for r in rows} == {"ready"}, rows
    (engine,) = f.engines
    records = list(engine._records.values())
    functions = {id(r.variant.function): r.variant.function for r in records}
    assert len(functions) == 1, "the keys share the code lowered ahead"
    (function,) = functions.values()
    assert function.patched and all(users == 12 for _, _, users in function.patched.values())
    x = np.linspace(-2, 2, 5 * 64, dtype=np.float32).reshape(5, 64)
    np.testing.assert_allclose(f(x), chains(x), rtol=1e-5, atol=1e-6)
    for r in records[:-1]:
        r.patches.remove()
    assert all(users == 1 for _, _, users in function.patched.values())
    records[-1].patches.remove()
    assert function.patched == {}


@needs_cc
@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="no process priorities here")
def test_the_compiler_runs_at_the_lowest_priority(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tier 3 compiles while calls run on every core: the compiler only takes what the
    calls leave idle (it runs under ``nice -n 19`` where ``nice`` exists)."""
    if toolchain._nice() == ():
        pytest.skip("no `nice` on PATH")
    found = toolchain.compiler()
    assert found is not None
    seen = tmp_path / "niceness"
    fake = tmp_path / "cc"
    fake.write_text(  # the niceness of each run that writes a library
        f'#!/bin/sh\nfor a in "$@"; do case "$a" in *.so) nice >> {seen};; esac; done\n'
        f'exec {" ".join(found[0])} "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    toolchain.reset()
    try:
        symbol, source = _chain_source()
        assert not toolchain.build(symbol, source, "generic").cached
        assert seen.read_text().split() == ["19"]
    finally:
        monkeypatch.undo()
        toolchain.reset()


@needs_cc
@pytest.mark.skipif(not hasattr(os, "killpg"), reason="no process groups here")
def test_a_compile_running_at_exit_is_killed_and_leaves_nothing(tmp_path: Path) -> None:
    """A background compile must not outlive its process: the compiler and what it
    started are killed at exit, and its temporary files are removed (they were written
    into the cache, or a temporary folder, after the process had gone)."""
    import subprocess
    import sys
    import time

    found = toolchain.compiler()
    assert found is not None
    pidfile = tmp_path / "pid"
    fake = tmp_path / "cc"
    fake.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *.so*) echo $$ > {pidfile}; sleep 60;; esac\n'
        f'exec {" ".join(found[0])} "$@"\n'
    )
    fake.chmod(0o755)
    child = (
        "import threading, time, sys\n"
        "from pathlib import Path\n"
        "from shapevm.jit.backend import toolchain\n"
        "from tests.jit.backend.test_tier3 import _chain_source\n"
        "threading.Thread(target=toolchain.build, args=(*_chain_source(), 'generic'),\n"
        "                 daemon=True).start()\n"
        f"while not Path({str(pidfile)!r}).exists(): time.sleep(0.01)\n"
        "sys.exit(0)\n"
    )
    env = dict(os.environ, CC=str(fake), SHAPEVM_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-c", child], env=env, check=True, timeout=60)
    pid = int(pidfile.read_text())
    for _ in range(100):  # the group was killed at exit; give the kernel a moment
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.02)
    else:
        pytest.fail(f"the compiler (pid {pid}) outlived the process that started it")
    left = [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert left == [], left


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_leaves_its_parents_compiles_alone() -> None:
    """A child made by fork while a compile runs inherits the table of running compiles;
    its exit must not kill the parent's compiler nor remove the parent's files."""
    import subprocess

    proc = subprocess.Popen(["sleep", "30"], start_new_session=True, text=True)
    with toolchain._running_lock:
        toolchain._running[proc.pid] = (proc, ())
    try:
        pid = os.fork()
        if pid == 0:  # the child: exits through the normal path, atexit handlers included
            toolchain._stop_compiles()
            os._exit(0)
        os.waitpid(pid, 0)
        assert proc.poll() is None, "the child killed its parent's compile"
    finally:
        with toolchain._running_lock:
            toolchain._running.pop(proc.pid, None)
        proc.kill()
        proc.wait()


@needs_cc
@pytest.mark.usefixtures("cache")
def test_a_chain_of_scalars_is_left_to_tier_2_and_the_others_generated() -> None:
    """A function with a chain over a scalar (a total scaled: ``exp(x.sum() * 0.5)``)
    beside a chain over rows: the scalar one stays in tier 2 and the row one is generated
    (the shape of a rank-0 chain made the whole of tier 3 fail)."""

    def fn(x: Any) -> Any:
        return snp.tanh(x * 1.5) * 2.0, snp.exp(x.sum() * 0.5) - 1.0

    f = sv.jit(fn, shapes="b, 64", hot_threshold=1, background=False, tier3_min_elements=0)
    x = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32) * 0.01
    f(x)
    assert f.wait(60)
    (row,) = f.jit_info()
    assert row["tier3"].startswith("partial: ") and "rank 0" in row["tier3"], row["tier3"]
    assert row["tier3_build_ms"], "the row chain was generated"
    want = sv.jit(fn, shapes="b, 64", enabled=False)(x)
    for got, ref in zip(f(x), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


def test_small_chains_keep_tier_2_and_say_why() -> None:
    """A hot key whose chains are below ``tier3_min_elements`` at its shape compiles no C:
    its row says so and the engine counts it skipped; a larger key of the same function is
    not held back by the gate."""

    def chains(z: Any) -> Any:
        return snp.tanh(z * 1.75 + 0.5) * snp.exp(-z)

    f = sv.jit(chains, shapes="b, 64", hot_threshold=1, background=False, tier3_min_elements=512)
    f(np.ones((3, 64), np.float32))  # 192 elements
    f(np.ones((8, 64), np.float32))  # 512
    assert f.wait(60)
    small, large = sorted(f.jit_info(), key=lambda r: r["key"][1])
    assert small["tier"] == 2 and small["tier3"].startswith("skipped: its chains are small")
    assert "192 elements, below tier3_min_elements=512" in small["tier3"]
    assert large["tier3"] != small["tier3"] and "small at this shape" not in large["tier3"]
    (engine,) = f.engines
    assert engine.counters.tier3_skipped >= 1
    with pytest.raises(ValueError, match="tier3_min_elements must be an integer >= 0"):
        sv.jit(chains, shapes="b, 64", tier3_min_elements=-1)


@needs_cc
@pytest.mark.usefixtures("cache")
def test_exact_keys_bake_in_a_fixed_width_but_not_a_dimension_variable() -> None:
    """A chain over a sequence (its innermost extent a dimension variable) builds one library
    for every length; one over a fixed width has the width in its source."""
    s_len = sv.symbolic_shape("s")[0]
    by_seq = sv.export(sv.jit(lambda m: (1.0 - m) * -10000.0))(
        sv.ShapeDtypeStruct((2, s_len), np.float32)
    )
    ex = Executable(by_seq.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    built = []
    for s in (7, 13, 40):
        variant = Variant(ex, ("exact", (s,)), nf, {"s": s})
        patches = tier3.generate(variant, {"s": s}, specialize=True)
        assert patches.installed and not patches.skipped, patches.skipped
        m = np.linspace(0, 1, 2 * s, dtype=np.float32).reshape(2, s)
        np.testing.assert_allclose(variant.run([m], {"s": s})[0], by_seq.call(m), rtol=1e-6)
        assert all("#define INNER_CONST -1" in src for _, src in patches.sources)
        built.append(patches.built)
        patches.remove()
    assert built[1:] == [0, 0], built  # the later lengths found the first one's library
    b = sv.symbolic_shape("b")[0]
    by_width = sv.export(sv.jit(lambda z: snp.tanh(z) * 2.0))(
        sv.ShapeDtypeStruct((b, 96), np.float32)
    )
    ex = Executable(by_width.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    variant = Variant(ex, ("exact", (3,)), nf, {"b": 3})
    patches = tier3.generate(variant, {"b": 3}, specialize=True)
    assert patches.sources and all("#define INNER_CONST 96" in src for _, src in patches.sources)
    patches.remove()


def test_rows_shorter_than_64_stay_with_tier_2() -> None:
    """A chain over a fixed short last axis (points' 3 coordinates) is not generated, and
    says why; one whose last axis is a dimension variable is, and its kernel declines rows
    shorter than 64 at run time (one row a vector at a time took 25 times tier 2's time on
    rows of 3), so results stay the interpreter's at every width."""
    b, k = sv.symbolic_shape("b, k")
    bias = sv.export(sv.jit(lambda x, c: snp.tanh(x * 2.0 + c) * x))(
        sv.ShapeDtypeStruct((b, 3), np.float32), sv.ShapeDtypeStruct((3,), np.float32)
    )
    ex = Executable(bias.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    variant = Variant(ex, ("exact", (500,)), nf, {"b": 500})
    patches = tier3.generate(variant, {"b": 500}, specialize=True)
    assert not patches.installed and patches.skipped
    assert all("rows of 3: tier 2 runs rows shorter than 64" in m for m in patches.skipped)
    wide = sv.export(sv.jit(lambda x, c: snp.tanh(x * 2.0 + c) * x))(
        sv.ShapeDtypeStruct((b, k), np.float32), sv.ShapeDtypeStruct((k,), np.float32)
    )
    ex = Executable(wide.program)
    nf = lower_function(ex, find_regions(ex.fn, ex.program))
    variant = Variant(ex, ("exact", (7, 100)), nf, {"b": 7, "k": 100})
    if tier3.available() is not None:
        pytest.skip(tier3.available())
    patches = tier3.generate(variant, {"b": 7, "k": 100}, specialize=False)
    assert patches.installed and not patches.skipped
    rng = np.random.default_rng(6)
    try:
        for n, m in [(500, 3), (40, 63), (9, 64), (2, 300), (1, 5)]:
            x = rng.standard_normal((n, m)).astype(np.float32)
            c = rng.standard_normal(m).astype(np.float32)
            got = variant.run([x, c], {"b": n, "k": m})[0]
            np.testing.assert_allclose(got, wide.call(x, c), rtol=1e-6, atol=1e-6)
    finally:
        patches.remove()


@needs_cc
@pytest.mark.usefixtures("cache")
def test_a_reduction_of_a_tensor_as_it_lies_stays_in_tier_2() -> None:
    """A bare reduction of a contiguous float32 tensor (per-image extremes for a min-max
    scaling, ``x.min(axis=(1, 2))``) is left to tier 2, which reduces it in runs of its
    vector kernel (generated code took twice as long); the scaling beside it is generated,
    and every result is the interpreter's."""

    def fn(x: Any) -> Any:
        lo, hi = x.min(axis=(1, 2)), x.max(axis=(1, 2), keepdims=True)
        return lo, hi, snp.tanh(x * 1.5) * 2.0

    f = sv.jit(fn, shapes="b, h, 64", hot_threshold=1, background=False, tier3_min_elements=0)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 64)).astype(np.float32)
    f(x)
    assert f.wait(60)
    (row,) = f.jit_info()
    assert row["tier3"].startswith("partial: ") and "as it lies" in row["tier3"], row["tier3"]
    assert row["tier3_build_ms"], "the tanh chain was generated"
    ref = sv.jit(fn, shapes="b, h, 64", enabled=False)
    for shape in [(3, 5, 64), (1, 1, 64), (2, 300, 64)]:
        x = rng.standard_normal(shape).astype(np.float32)
        x[0, 0, 3] = np.nan if shape[1] > 1 else x[0, 0, 3]
        for got, want in zip(f(x), ref(x), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@needs_cc
@pytest.mark.usefixtures("cache")
def test_generated_rows_join_the_axes_every_operand_continues() -> None:
    """A per-image min-max scaling ``(y - lo) / (hi - lo)`` with ``lo``, ``hi`` of
    ``[b, 1, 1]``: the generated kernel joins ``h`` and ``w`` into one row where every
    operand steps through them as one (rows of ``w`` paid their offsets and broadcast
    copies each: 37 us on [8, 96, 96], 8 joined), while enough rows stay for the pool's
    tasks; a broadcast column or a transposed operand keeps its rows. The interpreter's
    values at shapes on both sides of that."""

    def fn(y: Any, lo: Any, hi: Any, c: Any) -> Any:
        return (y - lo) / (hi - lo + 1e-6), y * c + 1.0, snp.swapaxes(y, 1, 2) * 2.0 + y

    spec = ("b, h, h", "b, 1, 1", "b, 1, 1", "b, h, 1")
    f = sv.jit(fn, shapes=spec, hot_threshold=1, background=False, tier3_min_elements=0)
    ref = sv.jit(fn, shapes=spec, enabled=False)
    rng = np.random.default_rng(15)
    for b, h in [(8, 96), (1, 300), (2, 5), (64, 40), (3, 1)]:
        y = rng.standard_normal((b, h, h)).astype(np.float32)
        lo, hi = y.min(axis=(1, 2), keepdims=True), y.max(axis=(1, 2), keepdims=True)
        c = rng.standard_normal((b, h, 1)).astype(np.float32)
        f(y, lo, hi, c)
        assert f.wait(60)
        for got, want in zip(f(y, lo, hi, c), ref(y, lo, hi, c), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert any(row["tier"] == 3 for row in f.jit_info()), f.jit_info()
