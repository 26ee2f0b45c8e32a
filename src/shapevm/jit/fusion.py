"""Elementwise fusion: a chain of elementwise ops as one numba kernel, generated from the chain.

The pattern ``elementwise_chain`` claims two or more elementwise ops of one output shape
where each op after the first reads a value the chain made (``maximum(x @ w + b, 0.0)``
gives ``add`` then ``maximum``). The kernel is written as Python source: one loop nest over
the output, every operand loaded once per element (broadcast axes read index 0), each op
as a scalar expression cast to the program's dtype (so float32 stays float32, as in NumPy),
and each value the chain must hand on stored to its output. Values used only inside the
chain never exist as arrays. Transcendental ops (``exp``, ``tanh``...) join chains only
when numba has SVML: scalar libm calls lose to NumPy's SIMD loops (see `TRANSCENDENTAL`).

The source depends on the ops, dtypes and ranks only, never on dimension values, so one
kernel serves every shape. It is written to a module file under the cache directory
(``$SHAPEVM_CACHE_DIR``, else ``~/.cache/shapevm``) and compiled with ``njit(cache=True)``,
so other processes load it from disk. Module files are named by a hash of their source and
rewritten when their text differs; when loading fails (a corrupt module or numba cache
file) the files of that kernel are deleted and it is built again. numba is imported only
when the first kernel is built.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shapevm.jit import numba_cache
from shapevm.jit.graph import Op, RegionGraph
from shapevm.jit.kernel_server import KernelServer, KernelServerTimeout
from shapevm.jit.lowering import CompileContext, Group, Lowered, register_lowering
from shapevm.ops import OpFlag

log = logging.getLogger("shapevm.jit")

PATTERN = "elementwise_chain"
MAX_CHAIN = 48

# op -> scalar expression of its operands' expressions
_EXPR: dict[str, str] = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "maximum": "np.maximum({0}, {1})",
    "minimum": "np.minimum({0}, {1})",
    "pow": "np.power({0}, {1})",
    "neg": "(-{0})",
    "abs": "np.abs({0})",
    "exp": "np.exp({0})",
    "log": "np.log({0})",
    "sqrt": "np.sqrt({0})",
    "tanh": "np.tanh({0})",
    "sin": "np.sin({0})",
    "cos": "np.cos({0})",
    "less": "({0} < {1})",
    "greater": "({0} > {1})",
    "equal": "({0} == {1})",
    "less_equal": "({0} <= {1})",
    "greater_equal": "({0} >= {1})",
    "not_equal": "({0} != {1})",
    "where": "({1} if {0} else {2})",
}
# Without SVML, numba calls the scalar libm for these, which is slower than NumPy's SIMD
# loops (tanh 6x, exp 1.7x on 64x1024 float32): chains are split around them and they run
# as ufuncs writing into planned buffers. Arithmetic, comparisons, sqrt, abs, max/min fuse.
TRANSCENDENTAL = frozenset({"exp", "log", "tanh", "sin", "cos", "pow"})
FUSE_TRANSCENDENTAL: bool | None = None  # None: only when numba has SVML
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_BOOL = np.dtype(np.bool_)


# -- matching -------------------------------------------------------------------------------


def fusible(graph: RegionGraph, op: Op) -> bool:
    """An elementwise op this pattern can generate code for, on float (or bool) values."""
    info = op.info
    if op.kind != "call" or info is None or info.name not in _EXPR or len(op.outs) != 1:
        return False
    if info.name in TRANSCENDENTAL and not _fuse_transcendental():
        return False
    if OpFlag.ELEMENTWISE not in info.flags or OpFlag.FUSIBLE not in info.flags:
        return False
    out = graph.value(op.outs[0]).dtype
    ins = [graph.value(v).dtype for v in op.ins]
    if info.name == "where":
        return out in _FLOATS and (not ins or ins[0] == _BOOL or len(ins) < 3)
    if OpFlag.COMPARISON in info.flags:
        return out == _BOOL and all(d in _FLOATS for d in ins)
    return out in _FLOATS and all(d == out for d in ins)


def _fuse_transcendental() -> bool:
    if FUSE_TRANSCENDENTAL is not None:
        return FUSE_TRANSCENDENTAL
    import numba

    return bool(getattr(numba.config, "USING_SVML", False))


def numba_available() -> bool:
    global _NUMBA
    if _NUMBA is None:
        _NUMBA = importlib.util.find_spec("numba") is not None
    return _NUMBA


_NUMBA: bool | None = None


def match_chain(graph: RegionGraph, pos: int) -> list[int] | None:
    """Positions of the chain starting at ``pos`` (two ops or more), or ``None``."""
    first = graph.ops[pos]
    if not numba_available() or not fusible(graph, first):
        return None
    shape = graph.value(first.outs[0]).shape
    chain = [pos]
    made = set(first.outs)
    for q in range(pos + 1, len(graph.ops)):
        op = graph.ops[q]
        reads_chain = any(v in made for v in op.ins)
        if (
            reads_chain
            and fusible(graph, op)
            and graph.value(op.outs[0]).shape == shape
            and len(chain) < MAX_CHAIN
        ):
            chain.append(q)
            made.update(op.outs)
        elif reads_chain:
            break
    return chain if len(chain) >= 2 else None


# -- code generation ----------------------------------------------------------------------------


def generate(graph: RegionGraph, group: Group) -> tuple[str, list[str]]:
    """The module source of the chain's kernel and the numba type of each argument."""
    out_shape = graph.value(group.outs[0]).shape if group.outs else ()
    rank = len(out_shape)
    idx = [f"i{k}" for k in range(rank)]
    names: dict[int, str] = {}
    consts: list[str] = []
    params = [f"in{j}" for j in range(len(group.ins))]
    outs = [f"out{j}" for j in range(len(group.outs))]
    body: list[str] = []
    for j, v in enumerate(group.ins):
        names[v] = f"a{j}"
        body.append(f"a{j} = in{j}[{_index(graph.value(v).shape, out_shape, idx)}]")
    for p in group.positions:
        op = graph.ops[p]
        assert op.info is not None
        operands = _operand_texts(graph, op, names, consts)
        expr = _EXPR[op.info.name].format(*operands)
        (v,) = op.outs
        dtype = graph.value(v).dtype
        names[v] = f"v{v}"
        cast = "np.bool_" if dtype == _BOOL else f"np.{dtype.name}"
        body.append(f"v{v} = {cast}({expr})")
    for j, v in enumerate(group.outs):
        body.append(f"out{j}[{', '.join(idx) or '()'}] = {names[v]}")
    lines = [
        '"""Generated by shapevm.jit.fusion; rewritten when its text differs."""',
        "import numpy as np",
        "from numba import njit",
        "",
        *consts,
        "",
        "",
        '@njit(cache=True, nogil=True, error_model="numpy", boundscheck=False)',
        f"def kernel({', '.join(params + outs)}):",
    ]
    indent = "    "
    if rank:
        lines.append(f"{indent}{', '.join(f'n{k}' for k in range(rank))}, = out0.shape")
    for k in range(rank):
        lines.append(f"{indent * (k + 1)}for i{k} in range(n{k}):")
    lines += [indent * (rank + 1) + line for line in body]
    sigs = [_numba_type(graph.value(v).dtype, len(graph.value(v).shape), True) for v in group.ins]
    sigs += [_numba_type(graph.value(v).dtype, rank, False) for v in group.outs]
    return "\n".join(lines) + "\n", sigs


def _index(shape: Sequence[Any], out_shape: Sequence[Any], idx: list[str]) -> str:
    if not shape:
        return "()"
    offset = len(out_shape) - len(shape)
    parts = []
    for k, d in enumerate(shape):
        parts.append("0" if isinstance(d, int) and d == 1 else idx[offset + k])
    return ", ".join(parts)


def _operand_texts(
    graph: RegionGraph, op: Op, names: dict[int, str], consts: list[str]
) -> list[str]:
    from shapevm.bytecode.program import OpCall

    instr = op.instr
    assert isinstance(instr, OpCall) and op.info is not None
    tensor_ins = iter(op.ins)
    out_dtype = graph.value(op.outs[0]).dtype
    operand_dtype = (
        graph.value(op.ins[0]).dtype if OpFlag.COMPARISON in op.info.flags and op.ins else out_dtype
    )
    texts: list[str] = []
    for x in instr.ins:
        if isinstance(x, (bool, int, float)):
            dtype = _BOOL if (op.info.name == "where" and not texts) else operand_dtype
            name = f"C{len(consts)}"
            kind = "np.bool_" if dtype == _BOOL else f"np.{dtype.name}"
            consts.append(f"{name} = {kind}({x!r})")
            texts.append(name)
        else:
            texts.append(names[next(tensor_ins)])
    return texts


def _numba_type(dtype: np.dtype[Any], ndim: int, readonly: bool) -> str:
    return f"{dtype.name}:{ndim}:{'r' if readonly else 'w'}"


# -- compiling and caching ------------------------------------------------------------------------

_MEMO: dict[tuple[str, tuple[str, ...]], Any] = {}
_MEMO_LOCK = threading.Lock()


def cache_dir() -> Path:
    """Where generated kernels and numba's cache files live: ``$SHAPEVM_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/shapevm``, else ``~/.cache/shapevm``."""
    root = os.environ.get("SHAPEVM_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path(os.path.expanduser("~")) / ".cache") / "shapevm"


def clear_memo() -> None:
    """Forget the kernels loaded in this process (the disk cache stays)."""
    with _MEMO_LOCK:
        _MEMO.clear()


def load_kernel(
    source: str, sig: Sequence[str], in_process: bool = False, timeout: float = 300.0
) -> Any:
    """The compiled dispatcher of ``source`` for the argument types ``sig``.

    Unless ``in_process``, the kernel is compiled into the disk cache by the kernel server
    process first, so this process only loads it (a few milliseconds of GIL time instead
    of hundreds); if the server cannot run, it is compiled here.
    """
    key = (source, tuple(sig))
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
        if hit is not None:
            return hit
        digest = hashlib.sha256(source.encode()).hexdigest()[:24]
        name = f"svk_{digest}"
        folder = _kernel_folder(_numba_version())
        path = folder / f"{name}.py"
        numba_cache.install()
        try:
            _write(path, source)
            if not in_process and not any((folder / "__pycache__").glob(f"{name}.*.nbi")):
                _precompile(path, name, sig, timeout)
            import numba

            types = tuple(_from_text(numba, t) for t in sig)
            dispatcher = _compile(path, name, types)
        except Exception as exc:  # a corrupt module or cache file: drop it and build again
            log.warning(
                "kernel cache %s unusable (%s: %s); rebuilding", path, type(exc).__name__, exc
            )
            _purge(folder, name)
            _write(path, source, force=True)
            import numba

            dispatcher = _compile(path, name, tuple(_from_text(numba, t) for t in sig))
        _MEMO[key] = dispatcher
        return dispatcher


_SERVER = KernelServer()


@functools.cache
def _numba_version() -> str:
    return importlib.metadata.version("numba")  # without importing numba itself


def _precompile(path: Path, name: str, sig: Sequence[str], timeout: float) -> None:
    try:
        _SERVER.compile(str(path), name, list(sig), timeout)
    except KernelServerTimeout:
        raise
    except (RuntimeError, OSError) as exc:  # compiled in this process instead
        log.info("kernel server could not compile %s (%s); compiling in-process", name, exc)


def _kernel_folder(numba_version: str) -> Path:
    tag = f"numba-{numba_version}-py{sys.version_info[0]}{sys.version_info[1]}"
    folder = cache_dir() / "kernels" / tag
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
        return folder
    except OSError:
        fallback = Path(tempfile.gettempdir()) / f"shapevm-kernels-{os.getuid()}" / tag
        fallback.mkdir(parents=True, exist_ok=True)
        log.warning("cache directory %s is not writable; kernels go to %s", folder, fallback)
        return fallback


def _write(path: Path, source: str, force: bool = False) -> None:
    if not force:
        try:
            if path.read_text() == source:
                return
        except (OSError, UnicodeDecodeError):
            pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(source)
    os.replace(tmp, path)


def _purge(folder: Path, name: str) -> None:
    for f in [*folder.glob(f"{name}.*"), *(folder / "__pycache__").glob(f"{name}.*")]:
        try:
            f.unlink()
        except OSError:
            pass


def _compile(path: Path, name: str, types: tuple[Any, ...]) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's cache finds the kernel's globals through it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    dispatcher = module.kernel
    dispatcher.compile(types)
    dispatcher.disable_compile()
    return dispatcher


def _from_text(numba: Any, text: str) -> Any:
    dtype, ndim, mode = text.split(":")
    return numba.types.Array(
        numba.from_dtype(np.dtype(dtype)), int(ndim), "C", readonly=mode == "r"
    )


# -- the lowering ---------------------------------------------------------------------------------


def build_chain(graph: RegionGraph, group: Group, ctx: CompileContext) -> Lowered:
    labels = "+".join(graph.ops[p].instr.op for p in group.positions)  # type: ignore[attr-defined]
    if not group.outs:  # nothing the chain makes is ever read: no work at all
        return Lowered("out", _nothing, (), PATTERN, label=labels, shape_generic=True)
    source, sig = generate(graph, group)
    ctx.check()
    kernel = load_kernel(source, sig, not ctx.kernel_process, ctx.time_left())
    out_values = [graph.value(v) for v in group.outs]
    inplace = tuple(
        (oi, ii)
        for oi, o in enumerate(out_values)
        for ii, v in enumerate(group.ins)
        if graph.value(v).shape == o.shape and graph.value(v).dtype == o.dtype
    )

    def run(args: list[Any], outs: list[Any], frame: Any) -> None:
        try:
            kernel(*args, *outs)
        except TypeError:  # an operand numba was not compiled for: strided, unaligned
            kernel(*[np.ascontiguousarray(a) for a in args], *outs)

    return Lowered("out", run, inplace, PATTERN, label=labels, shape_generic=True)


def _nothing(args: list[Any], outs: list[Any], frame: Any) -> None:
    return None


register_lowering(PATTERN, match_chain, build_chain)
