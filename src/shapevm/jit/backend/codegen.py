"""Tier 3: C source for a fused elementwise chain, from one table keyed by op-table names.

`chain_source(chain, isa, inner)` writes one C function, the executor's kernel calling
convention (``svx_kernel_fn`` of ``svnative.h``), that runs the whole `Chain` in one pass:
the innermost axis in vectors of the instruction set's width (`vmath.h`'s functions, the
same as the kernel library's), each value in a register, inputs broadcast by zero
strides, an optional trailing reduction. ``inner`` bakes the innermost extent in as a
constant when the specialization key fixes it (``exact`` keys), so the compiler unrolls
and drops the tail; ``None`` keeps it a run-time value (``bucket`` keys).

`EXPR` is the one list of how each fusible op computes; `missing_ops` names the fusible
ops of the op table it lacks (a test keeps it empty). Booleans live in registers as 0.0 /
1.0; inputs and outputs may be float32 or bool.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

from shapevm.jit.backend.chains import Chain, Ref
from shapevm.ops import OpFlag, all_ops

VECTOR_FLOATS = {"generic": 4, "avx2": 8, "avx512": 16}  # of each level, as in isa_<level>.c

SHORT_ROW = 64
"""Rows shorter than this are tier 2's, whose tiles span rows: a generated kernel works a
row at a time, and a chain over rows of 3 took 25x tier 2's time (tanh(x * 2 + b) * x on
[80000, 3]: 3.3 ms against 0.13), over rows of 8 7x, no less until rows of 64 (measured at
avx512). A generated kernel declines such rows at run time (``SVG_SHORT_ROW``, written
into its source), and `tier3` does not generate a chain whose last axis is a shorter
constant."""

EXPR: dict[str, str] = {
    "identity": "{0}",
    "neg": "(-({0}))",
    "abs": "vabs({0})",
    "exp": "vexp({0})",
    "log": "vlog({0})",
    "sqrt": "vsqrt({0})",
    "tanh": "vtanh({0})",
    "sin": "vsin({0})",
    "cos": "vcos({0})",
    "atan": "vatan({0})",
    "asin": "vasin({0})",
    "acos": "vacos({0})",
    "atan2": "vatan2({0}, {1})",
    "hypot": "vhypot({0}, {1})",
    "erf": "verf({0})",
    "sigmoid": "vsigmoid({0})",
    "softplus": "vsoftplus({0})",
    "expm1": "vexpm1({0})",
    "log1p": "vlog1p({0})",
    "log2": "vlog2({0})",
    "log10": "vlog10({0})",
    "floor": "vfloor({0})",
    "ceil": "(-vfloor(-({0})))",
    "round": "vrint({0})",
    "sign": "svg_sign({0})",
    "logical_not": "svg_b({0} == vsplat(0.0f))",
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "maximum": "svg_max({0}, {1})",
    "minimum": "svg_min({0}, {1})",
    "pow": "vpow({0}, {1})",
    "floordiv": "svg_map2(svg_floordiv, {0}, {1})",
    "mod": "svg_map2(svg_mod, {0}, {1})",
    "logical_and": "svg_b(({0} != vsplat(0.0f)) & ({1} != vsplat(0.0f)))",
    "logical_or": "svg_b(({0} != vsplat(0.0f)) | ({1} != vsplat(0.0f)))",
    "logical_xor": "svg_b(({0} != vsplat(0.0f)) ^ ({1} != vsplat(0.0f)))",
    "less": "svg_b({0} < {1})",
    "greater": "svg_b({0} > {1})",
    "equal": "svg_b({0} == {1})",
    "less_equal": "svg_b({0} <= {1})",
    "greater_equal": "svg_b({0} >= {1})",
    "not_equal": "svg_b({0} != {1})",
    "where": "vsel({0} != vsplat(0.0f), {1}, {2})",
    "cast": "{0}",  # to float32 (bool registers are 0/1 already); to bool: see _node_expr
}

REDUCE: dict[str, tuple[str, str]] = {  # the identity, the step on vectors
    "sum": ("0.0f", "{a} + {x}"),
    "mean": ("0.0f", "{a} + {x}"),
    "prod": ("1.0f", "{a} * {x}"),
    "max": ("-__builtin_inff()", "svg_max({a}, {x})"),
    "min": ("__builtin_inff()", "svg_min({a}, {x})"),
}

DTYPES = {np.dtype(np.float32): "float", np.dtype(np.bool_): "bool"}


class CannotGenerate(Exception):
    """The chain has an op or a dtype the generator does not handle (it stays in tier 2)."""


def missing_ops() -> list[str]:
    """Fusible ops of the op table that `EXPR` or `REDUCE` does not cover."""
    out = []
    for info in all_ops():
        if OpFlag.FUSIBLE not in info.flags:
            continue
        table = REDUCE if OpFlag.REDUCTION in info.flags else EXPR
        if info.name not in table:
            out.append(info.name)
    return out


def _lit(v: Any) -> str:
    x = float(v)
    if math.isnan(x):
        return 'vsplat(__builtin_nanf(""))'
    if math.isinf(x):
        return "vsplat(__builtin_inff())" if x > 0 else "vsplat(-__builtin_inff())"
    return f"vsplat({float(np.float32(x))!r}f)"


def _node_expr(chain: Chain, i: int, ref: Any) -> str:
    node = chain.nodes[i]
    template = EXPR.get(node.op)
    if template is None:
        raise CannotGenerate(f"no C form for op {node.op!r}")
    args = [ref(a) for a in node.args]
    if node.op == "pow" and node.args[1] == ("lit", 2.0):  # as the tile interpreter's plan:
        return f"({args[0]} * {args[0]})"  # powf(x, 2) is x * x, both correctly rounded
    if node.op == "cast":
        target = np.dtype(node.dtype)
        if target == np.dtype(np.bool_):
            return f"svg_b({args[0]} != vsplat(0.0f))"
        if target != np.dtype(np.float32):
            raise CannotGenerate(f"cast to {target}")
    return template.format(*args)


def chain_source(chain: Chain, isa: str, inner: int | None = None) -> tuple[str, str]:
    """(symbol, C source) of the chain for instruction-set level ``isa``."""
    vw = VECTOR_FLOATS[isa]
    rank = len(chain.shape)
    for n in chain.nodes:
        if np.dtype(n.dtype) not in DTYPES:
            raise CannotGenerate(f"dtype {n.dtype} of op {n.op}")
    if rank == 0 or rank > 8:
        raise CannotGenerate(f"rank {rank}")
    nin = len(chain.inputs)
    nout = len(chain.outputs)

    def ref(r: Ref) -> str:
        kind, v = r
        if kind == "in":
            return f"x{v}"
        if kind == "node":
            return f"n{v}"
        return _lit(v)

    body = "\n".join(f"    vf n{i} = {_node_expr(chain, i, ref)};" for i in range(len(chain.nodes)))
    text = chain.text() + f"|{isa}|{inner}"
    symbol = "svg_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    red_axes = chain.reduce_axes if chain.reduce else 0
    lines = [
        "/* generated by shapevm.jit.backend.codegen from the chain:",
        f" *   {chain.text().replace('*/', '* /')}",  # program text stays inside the comment
        f" * for {isa}, inner extent {inner if inner is not None else 'any'} */",
        '#include "svnative.h"',
    ]
    lines += [
        f"#define SV_VW {vw}",
        '#include "svgen.h"',
        f"#define NIN {nin}",
        f"#define NOUT {nout}",
        f"#define RANK {rank}",
        f"#define RED_AXES {red_axes}",
        f"#define INNER_CONST {inner if inner is not None else -1}",
        f"#define SVG_SHORT_ROW {SHORT_ROW}",
        f"static const int in_bool[NIN + 1] = {{{_bools(chain, 'in')}}};",
        f"static const int out_bool[NOUT + 1] = {{{_bools(chain, 'out')}}};",
        "",
        "/* the chain on vector v of a segment (svgen_body.h): outputs to ys[] */",
        "SV_INLINE void chain_eval(const char *const *p, const int64_t *st, int64_t v, vf *ys) {",
        *[f"    vf x{k} = {_load(chain.input_dtypes[k], k)};" for k in range(nin)],
        body,
        *[f"    ys[{o}] = n{i};" for o, (i, _) in enumerate(chain.outputs)],
        *[f"    (void)x{k};" for k in range(nin)],
        "}",
        "SV_INLINE void chain_store(char *const *q, int64_t v, const vf *ys) {",
        *[f"    {_store(chain.nodes[i].dtype, o)};" for o, (i, _) in enumerate(chain.outputs)],
        "}",
    ]
    if chain.reduce:
        init, vstep = REDUCE[chain.reduce]
        lines += [
            f"#define RED_INIT ({init})",
            f"#define RED_V(a, x) ({vstep.format(a='(a)', x='(x)')})",
            f"#define RED_MEAN {1 if chain.reduce == 'mean' else 0}",
        ]
    lines += [
        '#include "svgen_body.h"',
        f"SVG_DEFINE({symbol})",
    ]
    return symbol, "\n".join(lines) + "\n"


def _load(dtype: Any, k: int) -> str:
    if np.dtype(dtype) == np.dtype(np.bool_):
        return f"svg_vload_b(p[{k}] + v * st[{k}])"
    return f"vload((const float *)p[{k}] + v * st[{k}])"


def _store(dtype: Any, o: int) -> str:
    if np.dtype(dtype) == np.dtype(np.bool_):
        return f"svg_vstore_b(q[{o}] + v * SV_VW, ys[{o}])"
    return f"vstore((float *)q[{o}] + v * SV_VW, ys[{o}])"


def _bools(chain: Chain, which: str) -> str:
    """1 for each input (or output) that is a bool tensor, 0 for float32, then a 0."""
    if which == "in":
        dtypes = [np.dtype(d) for d in chain.input_dtypes]
    else:
        dtypes = [np.dtype(chain.nodes[i].dtype) for i, _ in chain.outputs]
    for d in dtypes:
        if d not in DTYPES:
            raise CannotGenerate(f"an {which}put of dtype {d}")
    return ", ".join(str(int(d == np.dtype(np.bool_))) for d in (*dtypes, np.dtype(np.float32)))
