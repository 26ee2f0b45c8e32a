"""Pattern lowerings onto the hand-written native kernels (`shapevm.jit.native`).

Registered with the JIT's lowering registry, before ``elementwise_chain``:

- ``dense``: ``matmul(x, CONST w)`` [+ ``add(CONST bias)``] [+ relu as ``maximum(., 0)`` or
  the tanh form of GELU as `shapevm.nn.gelu` traces it] with x f32[M, K] or f32[B, S, K]:
  one GEMM on the micro-kernel tiles against weights packed once, with the bias and
  activation in its epilogue, at every row count (`shapevm.jit.native.entries.Dense`);
- ``layer_norm``: the ops of `shapevm.nn.layer_norm` over the last axis (gain and shift
  optional), with the residual ``add`` that feeds it when nothing else reads the sum;
- ``conv2d``: a 3x3 convolution, padding 1, stride 1 or 2, dilation 1, one group, CONST
  weights [+ CONST bias] [+ relu];
- ``global_avg_pool``: ``mean(x, axis=(2, 3))`` of an NCHW tensor;
- ``attention``: ``matmul(q, transpose(k, (0, 1, 3, 2)))`` [* scale], softmax over the last
  axis, ``matmul(., v)`` [then ``transpose(0, 2, 1, 3)`` and ``reshape`` to [B, S, H*D]];
- ``softmax``: `shapevm.nn.softmax` over the last axis [of ``mul(x, scale)``].

Matching is exact: op names, literal operands (0.5, 1.0, 0.044715...), attributes, float32
dtypes and static inner dimensions are checked, and every value made inside a group must be
read only inside it and not leave the region. Anything else runs the default lowering.

Matchers are pure Python and never import numba; builders do (in the compile thread). The
weights of a constant are packed once per process (`packed_dense`, `packed_conv`) and
shared by every variant and key that uses them. The kernels are compiled (or loaded from
numba's disk cache) when a builder first needs them, with fixed argument types, so no call
ever waits for numba (`shapevm.jit.native.entries`).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shapevm.bytecode.program import LoadConst
from shapevm.jit import fusion
from shapevm.jit.graph import Op, RegionGraph
from shapevm.jit.lowering import CompileContext, Group, Lowered, register_lowering
from shapevm.jit.patterns import (
    L,
    T,
    V,
    last_axis,
    match_template,
    only_user,
    operands,
    users,
)

F32 = np.dtype(np.float32)
Array = np.ndarray[Any, Any]

# -- helpers ----------------------------------------------------------------------------------


def native_available() -> bool:
    from shapevm.jit.fusion import numba_available

    return numba_available()


def _f32(graph: RegionGraph, *vids: int) -> bool:
    return all(graph.value(v).dtype == F32 for v in vids)


def _shape(graph: RegionGraph, vid: int) -> tuple[Any, ...]:
    return tuple(graph.value(vid).shape)


def const_array(graph: RegionGraph, vid: int) -> Array | None:
    """The array of a ``LOAD_CONST`` value of the region (``None`` for other values)."""
    value = graph.value(vid)
    if value.kind != "const" or value.producer < 0:
        return None
    instr = graph.ops[value.producer].instr
    if not isinstance(instr, LoadConst):
        return None
    return np.asarray(graph.constants[instr.const])


def _call(op: Op | None, name: str) -> bool:
    return op is not None and op.kind == "call" and op.info is not None and op.info.name == name


def _literal_operand(op: Op, value: float) -> int | None:
    """The value id of the tensor operand of a binary op whose other operand is ``value``."""
    ops = operands(op)
    if len(ops) != 2:
        return None
    kinds = [k for k, _ in ops]
    if sorted(kinds) != ["l", "v"]:
        return None
    lit = next(x for k, x in ops if k == "l")
    if isinstance(lit, bool) or lit != value:
        return None
    return int(next(x for k, x in ops if k == "v"))


def _other(op: Op, vid: int) -> int | None:
    """The other tensor operand of a binary op with two tensor operands, one of them ``vid``."""
    ops = operands(op)
    if len(ops) != 2 or any(k != "v" for k, _ in ops):
        return None
    a, b = (x for _, x in ops)
    if a == vid and b != vid:
        return int(b)
    if b == vid and a != vid:
        return int(a)
    return None


class _WeakCache:
    """Values derived from constant arrays, kept while the arrays live (keyed by identity)."""

    def __init__(self) -> None:
        self._items: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        # Reentrant: a finalizer (`_drop`) may run from a collection inside a locked section.
        self._lock = threading.RLock()

    def get(self, key: tuple[Any, ...], arrays: Sequence[Any], make: Callable[[], Any]) -> Any:
        ids = (*key, *(id(a) for a in arrays))
        with self._lock:
            hit = self._items.get(ids)
            if hit is not None and all(r() is a for r, a in zip(hit[0], arrays, strict=True)):
                return hit[1]
        value = make()
        refs = tuple(weakref.ref(a) for a in arrays)
        with self._lock:
            hit = self._items.get(ids)
            if hit is not None and all(r() is a for r, a in zip(hit[0], arrays, strict=True)):
                return hit[1]
            self._items[ids] = (refs, value)
        for a in arrays:
            weakref.finalize(a, self._drop, ids)
        return value

    def _drop(self, ids: tuple[Any, ...]) -> None:
        with self._lock:
            self._items.pop(ids, None)

    def __len__(self) -> int:
        return len(self._items)


PACKED = _WeakCache()
"""Packed weights and prepared kernels per constant: built once, shared by all variants."""

_PACKS = [0]  # how many times weights were packed in this process (tests check "once")


def packed_dense(w: Array, bias: Array | None, epilogue: str) -> Any:
    """The `entries.Dense` kernel of constant ``w`` [K, N] (and ``bias``): weights packed
    and kernel warmed once per process and epilogue, whatever the number of variants using
    it."""
    from shapevm.jit.native import entries

    def make_kernel() -> Any:
        _PACKS[0] += 1
        kernel = entries.Dense(w, bias, epilogue)
        kernel.warm()
        return kernel

    arrays = [w] if bias is None else [w, bias]
    return PACKED.get(("dense-kernel", epilogue), arrays, make_kernel)


def packed_conv(w: Array, bias: Array | None, stride: int, epilogue: str) -> Any:
    """The `entries.Conv3x3` kernel of constant ``w`` [Co, Ci, 3, 3] (and ``bias``)."""
    from shapevm.jit.native import pack_conv3x3

    def make_packed() -> Any:
        _PACKS[0] += 1
        return pack_conv3x3(w, bias)

    arrays = [w] if bias is None else [w, bias]
    packed = PACKED.get(("conv",), arrays, make_packed)

    def make_kernel() -> Any:
        kernel = packed.kernel(stride, epilogue)
        kernel.warm()
        return kernel

    return PACKED.get(("conv-kernel", stride, epilogue), arrays, make_kernel)


_SHARED: dict[tuple[Any, ...], Any] = {}
_SHARED_LOCK = threading.Lock()


def shared_kernel(key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """A kernel without constants (layer norm, softmax...), made and warmed once."""
    with _SHARED_LOCK:
        found = _SHARED.get(key)
    if found is None:
        found = make()
        with _SHARED_LOCK:
            found = _SHARED.setdefault(key, found)
    return found


def _nothing(args: list[Any], outs: list[Any], frame: Any) -> None:
    return None


# -- dense ------------------------------------------------------------------------------------

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_S = V("s")
_CUBE = T("mul", (T("mul", (_S, _S)), _S))
_INNER = T(
    "mul",
    (T("add", (_S, T("mul", (L(0.044715, rtol=1e-6), _CUBE)))), L(_SQRT_2_OVER_PI, rtol=1e-6)),
)
GELU_TANH = T("mul", (T("mul", (_S, L(0.5))), T("add", (T("tanh", (_INNER,)), L(1.0)))))
"""``0.5 s (1 + tanh(sqrt(2/pi) (s + 0.044715 s^3)))`` as `shapevm.nn.gelu` traces it."""


@dataclass(frozen=True)
class DenseMatch:
    positions: tuple[int, ...]
    x: int
    w: int
    bias: int | None
    epilogue: str


def _activation(graph: RegionGraph, s: int) -> tuple[str, list[int]]:
    """The activation applied to ``s`` (read by nothing else): relu or GELU-tanh."""
    if s in graph.live_out:
        return "none", []
    user = only_user(graph, s)
    if _call(user, "maximum") and user is not None and _literal_operand(user, 0.0) == s:
        return "relu", [user.pos]
    readers = users(graph, s)
    for p in readers:
        op = graph.ops[p]
        if _call(op, "mul") and _literal_operand(op, 0.5) == s:
            root = only_user(graph, op.outs[0])
            if root is None or not _call(root, "mul"):
                continue
            m = match_template(graph, root.outs[0], GELU_TANH)
            if m is None or m.values.get("s") != s or not m.closed(graph):
                continue
            if set(readers) <= m.positions:
                return "gelu_tanh", sorted(m.positions)
    return "none", []


def analyze_dense(graph: RegionGraph, pos: int) -> DenseMatch | None:
    op = graph.ops[pos]
    if not _call(op, "matmul") or len(op.outs) != 1:
        return None
    ops = operands(op)
    if len(ops) != 2 or any(k != "v" for k, _ in ops):
        return None
    x, w = (int(v) for _, v in ops)
    wc = const_array(graph, w)
    if wc is None or wc.ndim != 2 or wc.dtype != F32 or not _f32(graph, x, op.outs[0]):
        return None
    xs = _shape(graph, x)
    if len(xs) not in (2, 3) or xs[-1] != wc.shape[0] or const_array(graph, x) is not None:
        return None
    k, n = wc.shape
    if k == 0 or n == 0:
        return None
    positions = [pos]
    cur = op.outs[0]
    bias = None
    user = only_user(graph, cur)
    if _call(user, "add") and user is not None:
        b = _other(user, cur)
        bc = const_array(graph, b) if b is not None else None
        if (
            b is not None
            and bc is not None
            and bc.dtype == F32
            and bc.shape == (n,)
            and _shape(graph, user.outs[0]) == _shape(graph, cur)
        ):
            bias = b
            positions.append(user.pos)
            cur = user.outs[0]
    epilogue, act = _activation(graph, cur)
    positions += act
    return DenseMatch(tuple(sorted(positions)), x, w, bias, epilogue)


def match_dense(graph: RegionGraph, pos: int) -> list[int] | None:
    if not native_available():
        return None
    found = analyze_dense(graph, pos)
    return list(found.positions) if found else None


def build_dense(graph: RegionGraph, group: Group, ctx: CompileContext) -> Lowered:
    found = analyze_dense(graph, group.positions[0])
    assert found is not None and found.positions == group.positions
    w = const_array(graph, found.w)
    bias = const_array(graph, found.bias) if found.bias is not None else None
    assert w is not None
    ctx.check()
    kernel = packed_dense(w, bias, found.epilogue)
    ix = group.ins.index(found.x)
    k, n = w.shape
    label = f"dense {k}x{n}" + (" +bias" if bias is not None else "")
    label += f" {found.epilogue}" if found.epilogue != "none" else ""
    if not group.outs:
        return Lowered("out", _nothing, (), "dense", label=label, shape_generic=True)

    def run(args: list[Any], outs: list[Any], frame: Any) -> None:
        kernel(args[ix], outs[0])

    return Lowered("out", run, (), "dense", label=label, shape_generic=True)


# -- layer norm -------------------------------------------------------------------------------

_LN_X = V("x")
_LN_D = T("sub", (_LN_X, T("mean", (_LN_X,), last_axis())), name="d")
_LN_VAR = T("mean", (T("mul", (V("d"), V("d"))),), last_axis())
LN_CORE = T("mul", (_LN_D, T("div", (L(1.0), T("sqrt", (T("add", (_LN_VAR, L(None, "eps"))),))))))
"""``(x - mean(x)) * (1 / sqrt(mean((x - mean(x))^2) + eps))`` as `shapevm.nn.layer_norm`
traces it (means over the last axis, kept)."""
LN_TEMPLATES = (
    ("gb", T("add", (T("mul", (LN_CORE, V("g"))), V("b")))),
    ("g", T("mul", (LN_CORE, V("g")))),
    ("b", T("add", (LN_CORE, V("b")))),
    ("", LN_CORE),
)


@dataclass(frozen=True)
class LayerNormMatch:
    positions: tuple[int, ...]
    x: int
    residual: int | None
    gain: int | None
    shift: int | None
    eps: float


def _ln_root_candidates(graph: RegionGraph, x: int) -> list[int]:
    """Values that may end a layer norm of ``x``: the ``mul(d, r)`` and up to two more ops."""
    out = []
    for p in users(graph, x):
        sub = graph.ops[p]
        if not _call(sub, "sub"):
            continue
        d = sub.outs[0]
        for q in users(graph, d):
            mul = graph.ops[q]
            if _call(mul, "mul") and _other(mul, d) is not None:
                cur = mul.outs[0]
                out.append(cur)
                for _ in range(2):
                    nxt = only_user(graph, cur)
                    if nxt is None or not (_call(nxt, "mul") or _call(nxt, "add")):
                        break
                    cur = nxt.outs[0]
                    out.append(cur)
    return out


def analyze_layer_norm(graph: RegionGraph, pos: int) -> LayerNormMatch | None:
    op = graph.ops[pos]
    residual: tuple[int, int] | None = None
    if _call(op, "mean"):
        x = op.ins[0] if op.ins else -1
    elif _call(op, "add") and len(op.ins) == 2 and len(set(op.ins)) == 2:
        lhs, rhs = op.ins
        if _shape(graph, lhs) != _shape(graph, rhs) or not _f32(graph, lhs, rhs):
            return None
        x = op.outs[0]
        if x in graph.live_out:
            return None
        residual = (lhs, rhs)
    else:
        return None
    if x < 0 or not _f32(graph, x):
        return None
    shape = _shape(graph, x)
    if not shape or not isinstance(shape[-1], int) or shape[-1] == 0:
        return None
    d = shape[-1]
    best: LayerNormMatch | None = None
    for root in reversed(_ln_root_candidates(graph, x)):
        for _kind, template in LN_TEMPLATES:
            m = match_template(graph, root, template)
            if m is None or m.values.get("x") != x or "eps" not in m.literals:
                continue
            g = m.values.get("g")
            b = m.values.get("b")
            if any(
                u is not None and (_shape(graph, u) != (d,) or not _f32(graph, u)) for u in (g, b)
            ):
                continue
            positions = set(m.positions)
            if residual is not None:
                positions.add(op.pos)
                if any(u not in positions for u in users(graph, x)):
                    continue
            if not m.closed(graph) or not _f32(graph, *(graph.ops[p].outs[0] for p in positions)):
                continue
            if residual is None and op.pos != min(positions):
                continue
            best = LayerNormMatch(
                tuple(sorted(positions)),
                residual[0] if residual else x,
                residual[1] if residual else None,
                g,
                b,
                m.literals["eps"],
            )
            break
        if best is not None:
            break
    return best


def match_layer_norm(graph: RegionGraph, pos: int) -> list[int] | None:
    if not native_available():
        return None
    found = analyze_layer_norm(graph, pos)
    return list(found.positions) if found else None


def build_layer_norm(graph: RegionGraph, group: Group, ctx: CompileContext) -> Lowered:
    from shapevm.jit.native import entries

    found = analyze_layer_norm(graph, group.positions[0])
    assert found is not None and found.positions == group.positions
    d = _shape(graph, found.x)[-1]
    residual = found.residual is not None

    def make() -> Any:
        kernel = entries.LayerNorm(found.eps, residual)
        kernel.warm(d)
        return kernel

    kernel = shared_kernel(("layer_norm", float(found.eps), residual, d), make)
    ones = np.ones(d, np.float32)
    zeros = np.zeros(d, np.float32)

    def fixed(vid: int | None, default: Array) -> Array | int:
        """A constant operand as an array, else its index in the group's inputs."""
        if vid is None:
            return default
        c = const_array(graph, vid)
        if c is not None:
            return np.ascontiguousarray(c, np.float32)
        return group.ins.index(vid)

    g = fixed(found.gain, ones)
    b = fixed(found.shift, zeros)
    ix = group.ins.index(found.x)
    ir = group.ins.index(found.residual) if found.residual is not None else -1
    label = "layer_norm" + (" +residual" if residual else "")
    if not group.outs:
        return Lowered("out", _nothing, (), "layer_norm", label=label, shape_generic=True)

    def run(args: list[Any], outs: list[Any], frame: Any) -> None:
        gain = args[g] if isinstance(g, int) else g
        shift = args[b] if isinstance(b, int) else b
        kernel(args[ix], gain, shift, outs[0], args[ir] if ir >= 0 else None)

    return Lowered("out", run, (), "layer_norm", label=label, shape_generic=True)


# -- softmax ----------------------------------------------------------------------------------

_SM_X = V("x")
_SM_E = T("exp", (T("sub", (_SM_X, T("max", (_SM_X,), last_axis()))),), name="e")
SOFTMAX = T("div", (_SM_E, T("sum", (V("e"),), last_axis())))
"""``exp(x - max(x)) / sum(exp(x - max(x)))`` over the last axis, as `shapevm.nn.softmax`."""


def _softmax_of(graph: RegionGraph, x: int) -> tuple[int, set[int]] | None:
    """The softmax of ``x`` (its result and the positions of its ops), if one reads ``x``."""
    for p in users(graph, x):
        if not _call(graph.ops[p], "max"):
            continue
        for q in users(graph, graph.ops[p].outs[0]):
            sub = graph.ops[q]
            if not _call(sub, "sub"):
                continue
            exp = only_user(graph, sub.outs[0])
            if exp is None or not _call(exp, "exp"):
                continue
            for r in users(graph, exp.outs[0]):
                div = graph.ops[r]
                if not _call(div, "div"):
                    continue
                m = match_template(graph, div.outs[0], SOFTMAX)
                if m is None or m.values.get("x") != x or not m.closed(graph):
                    continue
                return div.outs[0], m.positions
    return None


@dataclass(frozen=True)
class SoftmaxMatch:
    positions: tuple[int, ...]
    x: int
    scale: float


def analyze_softmax(graph: RegionGraph, pos: int) -> SoftmaxMatch | None:
    op = graph.ops[pos]
    scale = 1.0
    extra: set[int] = set()
    if _call(op, "mul"):
        ops = operands(op)
        lits = [x for k, x in ops if k == "l"]
        tensors = [x for k, x in ops if k == "v"]
        if len(ops) != 2 or len(lits) != 1 or len(tensors) != 1 or isinstance(lits[0], bool):
            return None
        z = int(tensors[0])
        x = op.outs[0]
        scale = float(lits[0])
        extra = {op.pos}
    elif _call(op, "max"):
        x = op.ins[0] if op.ins else -1
        z = x
    else:
        return None
    if x < 0 or not _f32(graph, x, z):
        return None
    shape = _shape(graph, x)
    if len(shape) < 1 or not isinstance(shape[-1], int) or shape[-1] == 0:
        return None
    found = _softmax_of(graph, x)
    if found is None:
        return None
    _, positions = found
    positions = positions | extra
    if extra and (x in graph.live_out or any(u not in positions for u in users(graph, x))):
        return None
    if min(positions) != op.pos:
        return None
    return SoftmaxMatch(tuple(sorted(positions)), z, scale)


def match_softmax(graph: RegionGraph, pos: int) -> list[int] | None:
    if not native_available():
        return None
    found = analyze_softmax(graph, pos)
    return list(found.positions) if found else None


def build_softmax(graph: RegionGraph, group: Group, ctx: CompileContext) -> Lowered:
    from shapevm.jit.native import entries

    found = analyze_softmax(graph, group.positions[0])
    assert found is not None and found.positions == group.positions
    d = _shape(graph, found.x)[-1]

    def make() -> Any:
        kernel = entries.Softmax(found.scale)
        kernel.warm(d)
        return kernel

    kernel = shared_kernel(("softmax", found.scale, d), make)
    ix = group.ins.index(found.x)
    label = "softmax" + (f" *{found.scale:g}" if found.scale != 1.0 else "")
    if not group.outs:
        return Lowered("out", _nothing, (), "softmax", label=label, shape_generic=True)

    def run(args: list[Any], outs: list[Any], frame: Any) -> None:
        kernel(args[ix], outs[0])

    return Lowered("out", run, ((0, ix),), "softmax", label=label, shape_generic=True)


# -- attention --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionMatch:
    positions: tuple[int, ...]
    q: int
    k: int
    v: int
    scale: float
    merged: bool  # the output is [B, S, H * D] (heads merged back), else [B, H, S, D]


def analyze_attention(graph: RegionGraph, pos: int) -> AttentionMatch | None:
    op = graph.ops[pos]
    if not _call(op, "transpose") or tuple(op.attrs.get("perm", ())) != (0, 1, 3, 2):
        return None
    k = op.ins[0]
    kt = op.outs[0]
    mm = only_user(graph, kt)
    if mm is None or not _call(mm, "matmul"):
        return None
    ops = operands(mm)
    if len(ops) != 2 or ops[1] != ("v", kt) or ops[0][0] != "v" or ops[0][1] == kt:
        return None
    q = int(ops[0][1])
    qs, ks = _shape(graph, q), _shape(graph, k)
    if len(qs) != 4 or len(ks) != 4 or not isinstance(qs[3], int) or qs[3] == 0:
        return None
    if ks[3] != qs[3] or ks[:2] != qs[:2]:
        return None
    positions = {op.pos, mm.pos}
    x = mm.outs[0]
    scale = 1.0
    user = only_user(graph, x)
    if _call(user, "mul") and user is not None:
        lits = [v for kind, v in operands(user) if kind == "l"]
        if len(operands(user)) == 2 and len(lits) == 1 and not isinstance(lits[0], bool):
            scale = float(lits[0])
            positions.add(user.pos)
            x = user.outs[0]
    if x in graph.live_out:
        return None
    found = _softmax_of(graph, x)
    if found is None:
        return None
    p, sm = found
    positions |= sm
    if any(u not in positions for u in users(graph, x)):
        return None
    mm2 = only_user(graph, p)
    if mm2 is None or not _call(mm2, "matmul"):
        return None
    ops2 = operands(mm2)
    if len(ops2) != 2 or ops2[0] != ("v", p) or ops2[1][0] != "v" or ops2[1][1] == p:
        return None
    v = int(ops2[1][1])
    if _shape(graph, v) != ks:
        return None
    positions.add(mm2.pos)
    out = mm2.outs[0]
    merged = False
    tr = only_user(graph, out)
    if (
        tr is not None
        and _call(tr, "transpose")
        and tuple(tr.attrs.get("perm", ())) == (0, 2, 1, 3)
    ):
        rs = only_user(graph, tr.outs[0])
        if _call(rs, "reshape") and rs is not None:
            want = (qs[0], qs[2], qs[1] * qs[3]) if isinstance(qs[1], int) else None
            if want is not None and _shape(graph, rs.outs[0]) == want:
                positions |= {tr.pos, rs.pos}
                merged = True
    if not _f32(graph, q, k, v, *(graph.ops[i].outs[0] for i in positions)):
        return None
    return AttentionMatch(tuple(sorted(positions)), q, k, v, scale, merged)


def match_attention(graph: RegionGraph, pos: int) -> list[int] | None:
    if not native_available():
        return None
    found = analyze_attention(graph, pos)
    if found is None:
        return None
    inner = set(found.positions)
    for p in found.positions:
        for o in graph.ops[p].outs:
            if p != found.positions[-1] and (
                o in graph.live_out or any(u not in inner for u in users(graph, o))
            ):
                return None
    return list(found.positions)


def build_attention(graph: RegionGraph, group: Group, ctx: CompileContext) -> Lowered:
    from shapevm.jit.native import entries

    found = analyze_attention(graph, group.positions[0])
    assert found is not None and found.positions == group.positions
    qs = _shape(graph, found.q)
    d = qs[3]

    def make() -> Any:
        kernel = entries.Attention(found.scale)
        kernel.warm(d)
        return kernel

    kernel = shared_kernel(("attention", found.scale, d), make)
    iq, ik, iv = (group.ins.index(v) for v in (found.q, found.k, found.v))
    merged = found.merged
    label = f"attention *{found.scale:g}" + (" heads merged" if merged else "")
    if not group.outs:
        return Lowered("out", _nothing, (), "attention", label=label, shape_generic=True)

    def run(args: list[Any], outs: list[Any], frame: Any) -> None:
        q = args[iq]
        out = outs[0]
        if merged:
            b, h, s, dd = q.shape
            out = out.reshape(b, s, h, dd).transpose(0, 2, 1, 3)
        kernel(q, args[ik], args[iv], out)

    return Lowered("out", run, (), "attention", label=label, shape_generic=True)


# -- convolution and pooling ------------------------------------------------------------------


@dataclass(frozen=True)
class ConvMatch:
    positions: tuple[int, ...]
    x: int
    w: int
    bias: int | None
    stride: int
    epilogue: str


def analyze_conv(graph: RegionGraph, pos: int) -> ConvMatch | None:
    op = graph.ops[pos]
    if not _call(op, "conv2d") or len(op.outs) != 1:
        return None
    a = op.attrs
    stride = tuple(a.get("stride", ()))
    if (
        tuple(a.get("padding", ())) != (1, 1, 1, 1)
        or tuple(a.get("dilation", ())) != (1, 1)
        or a.get("groups") != 1
        or stride not in ((1, 1), (2, 2))
    ):
        return None
    ops = operands(op)
    if len(ops) not in (2, 3) or any(k != "v" for k, _ in ops):
        return None
    x, w = int(ops[0][1]), int(ops[1][1])
    bias = int(ops[2][1]) if len(ops) == 3 else None
    wc = const_array(graph, w)
    if wc is None or wc.dtype != F32 or wc.ndim != 4 or wc.shape[2:] != (3, 3):
        return None
    xs = _shape(graph, x)
    if len(xs) != 4 or xs[1] != wc.shape[1] or not _f32(graph, x, op.outs[0]):
        return None
    if const_array(graph, x) is not None:
        return None
    if bias is not None:
        bc = const_array(graph, bias)
        if bc is None or bc.dtype != F32 or bc.shape != (wc.shape[0],):
            return None
    positions = [pos]
    epilogue = "none"
    out = op.outs[0]
    user = only_user(graph, out)
    if _call(user, "maximum") and user is not None and _literal_operand(user, 0.0) == out:
        positions.append(user.pos)
        epilogue = "relu"
    return ConvMatch(tuple(positions), x, w, bias, stride[0], epilogue)


def match_conv(graph: RegionGraph, pos: int) -> list[int] | None:
    if not native_available():
        return None
    found = analyze_conv(graph, pos)
    return list(found.positions) if found else None


def build_conv(graph: RegionGraph, group: Group, ctx: CompileContext) -> Lowered:
    found = analyze_conv(graph, group.positions[0])
    assert found is not None and found.positions == group.positions
    w = const_array(graph, found.w)
    bias = const_array(graph, found.bias) if found.bias is not None else None
    assert w is not None
    ctx.check()
    kernel = packed_conv(w, bias, found.stride, found.epilogue)
    ix = group.ins.index(found.x)
    label = f"conv3x3 {w.shape[1]}->{w.shape[0]} stride {found.stride}"
    label += f" {found.epilogue}" if found.epilogue != "none" else ""
    if not group.outs:
        return Lowered("out", _nothing, (), "conv2d", label=label, shape_generic=True)

    def run(args: list[Any], outs: list[Any], frame: Any) -> None:
        kernel(args[ix], outs[0])

    return Lowered("out", run, (), "conv2d", label=label, shape_generic=True)


def match_gap(graph: RegionGraph, pos: int) -> list[int] | None:
    if not native_available():
        return None
    op = graph.ops[pos]
    if not _call(op, "mean") or len(op.ins) != 1 or len(op.outs) != 1:
        return None
    axis = op.attrs.get("axis")
    if not isinstance(axis, (tuple, list)) or tuple(axis) not in ((2, 3), (-2, -1)):
        return None
    if len(_shape(graph, op.ins[0])) != 4 or not _f32(graph, op.ins[0], op.outs[0]):
        return None
    return [pos]


def build_gap(graph: RegionGraph, group: Group, ctx: CompileContext) -> Lowered:
    from shapevm.jit.native import entries

    def make() -> Any:
        kernel = entries.GlobalAvgPool()
        kernel.warm()
        return kernel

    kernel = shared_kernel(("global_avg_pool",), make)
    if not group.outs:
        return Lowered(
            "out", _nothing, (), "global_avg_pool", label="global_avg_pool", shape_generic=True
        )

    def run(args: list[Any], outs: list[Any], frame: Any) -> None:
        kernel(args[0], outs[0])

    return Lowered("out", run, (), "global_avg_pool", label="global_avg_pool", shape_generic=True)


NATIVE_LOWERINGS = ("dense", "conv2d", "global_avg_pool", "attention", "layer_norm", "softmax")

register_lowering("dense", match_dense, build_dense)
register_lowering("conv2d", match_conv, build_conv)
register_lowering("global_avg_pool", match_gap, build_gap)
register_lowering("attention", match_attention, build_attention)
register_lowering("layer_norm", match_layer_norm, build_layer_norm)
register_lowering("softmax", match_softmax, build_softmax)
# Tried after the native patterns (registering again moves a pattern to the end).
register_lowering(fusion.PATTERN, fusion.match_chain, fusion.build_chain)

__all__ = [
    "GELU_TANH",
    "LN_CORE",
    "NATIVE_LOWERINGS",
    "PACKED",
    "SOFTMAX",
    "analyze_attention",
    "analyze_conv",
    "analyze_dense",
    "analyze_layer_norm",
    "analyze_softmax",
    "const_array",
    "packed_conv",
    "packed_dense",
]
