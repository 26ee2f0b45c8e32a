"""Shape rules of contractions and windowed ops: ``einsum``, ``conv2d``, 2-D pooling.

Like `shapevm.ops.shape_rules`, they return the relations they need as `Condition` s and
raise `ShapeRuleError` only for what they see without deciding anything (a rank, a bad
equation, a non-positive stride).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shapevm.ops.core import (
    Condition,
    RuleAttr,
    ShapeResult,
    ShapeRuleError,
    SymDim,
    SymShape,
)
from shapevm.ops.shape_rules import conditions, fmt_shape, int_list
from shapevm.shapes import DYNAMIC, Dynamic

Attrs = Mapping[str, RuleAttr]
_TERM = re.compile(r"[A-Za-z]*(?:\.\.\.)?[A-Za-z]*")


@dataclass(frozen=True, slots=True)
class Einsum:
    """A parsed explicit equation: one term per operand and the output term."""

    inputs: tuple[str, ...]
    output: str


def parse_einsum(equation: str, n_operands: int) -> Einsum:
    """Parse ``"ij,jk->ik"``: letters, at most one ``...`` per term, an explicit ``->``."""
    text = equation.replace(" ", "")
    lhs, arrow, out = text.partition("->")
    terms = tuple(lhs.split(","))
    problem = ""
    if not arrow or "->" in out:
        problem = "the equation needs exactly one '->' and the output after it"
    elif not all(_TERM.fullmatch(t) for t in (*terms, out)):
        problem = "terms are letters with at most one '...'"
    elif len(terms) != n_operands:
        problem = f"the equation has {len(terms)} input terms for {n_operands} operands"
    elif len(set(out.replace("...", ""))) != len(out.replace("...", "")):
        problem = "a letter appears twice in the output"
    elif not set(out) <= set("".join(terms)) | {"."}:
        missing = sorted(set(out) - set("".join(terms)) - {"."})
        problem = f"output letter {missing[0]!r} is in no input"
    if problem:
        raise ShapeRuleError(
            f"bad einsum equation: {problem}",
            expected="an equation like 'bij,bjk->bik' with one term per operand",
            found=f"equation={equation!r}",
            fix="write the output explicitly after '->' (ellipsis as '...')",
        )
    return Einsum(terms, out)


@dataclass
class _Label:
    """The occurrences of one label (a letter, or an ellipsis axis counted from the right)."""

    name: str
    dim: SymDim = 1
    where: tuple[int, int] | None = None

    def meet(self, d: SymDim, operand: int, axis: int, conds: list[Condition]) -> None:
        if isinstance(d, int) and d == 1:
            return
        if self.where is None:
            self.dim, self.where = d, (operand, axis)
            return
        if d == self.dim and not isinstance(d, Dynamic):
            return
        i, a = self.where
        conds.append(
            Condition(
                d,
                "==",
                self.dim,
                f"einsum {self.name} has different sizes",
                f"{{{operand}}}.shape[{axis}] == {{{i}}}.shape[{a}]",
                "make the sizes equal, or 1 to broadcast",
            )
        )
        if isinstance(self.dim, Dynamic):  # keep a known size for the output
            self.dim, self.where = d, (operand, axis)


def einsum(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """``np.einsum`` with an explicit output; equal letters need equal (or 1) sizes."""
    equation = attrs["equation"]
    assert isinstance(equation, str)
    eq = parse_einsum(equation, len(shapes))
    labels: dict[str, _Label] = {}
    ellipsis: list[_Label] = []  # from the right: ellipsis[0] is the last ellipsis axis
    conds: list[Condition] = []
    for i, (term, shape) in enumerate(zip(eq.inputs, shapes, strict=True)):
        head, dots, tail = term.partition("...")
        n_ell = len(shape) - len(head) - len(tail)
        if n_ell < 0 or (not dots and n_ell):
            raise ShapeRuleError(
                f"einsum term {term!r} does not match the rank of operand {i}",
                expected=f"{{{i}}} of rank {len(head) + len(tail)}" + (" or more" if dots else ""),
                found=f"{{{i}}} has rank {len(shape)}",
                fix="one letter per axis, '...' for any leading or middle axes",
            )
        while len(ellipsis) < n_ell:
            ellipsis.append(_Label(f"'...' axis -{len(ellipsis) + 1}"))
        letters = [*head, *(None for _ in range(n_ell)), *tail]
        for axis, (letter, d) in enumerate(zip(letters, shape, strict=True)):
            label = (
                labels.setdefault(letter, _Label(f"label {letter!r}"))
                if letter is not None
                else ellipsis[len(head) + n_ell - 1 - axis]
            )
            label.meet(d, i, axis, conds)
    head, dots, tail = eq.output.partition("...")
    if ellipsis and not dots:
        raise ShapeRuleError(
            "einsum output drops the '...' axes",
            expected="'...' in the output when an input has '...' axes",
            found=f"equation={equation!r}",
            fix="add '...' to the output, or name the axes and sum them explicitly",
        )
    out = [labels[c].dim for c in head]
    out += [lab.dim for lab in reversed(ellipsis)] + [labels[c].dim for c in tail]
    return ShapeResult((tuple(out),), conditions(*conds))


def _mul(a: SymDim, b: SymDim) -> SymDim:
    if isinstance(a, Dynamic) or isinstance(b, Dynamic):
        return DYNAMIC
    out: Any = a * b
    result: SymDim = out
    return result


def _positive(values: tuple[int, ...], name: str, n: int, lowest: int = 1) -> tuple[int, ...]:
    if len(values) != n or any(v < lowest for v in values):
        raise ShapeRuleError(
            f"{name} needs {n} values >= {lowest}",
            expected=f"{name}=[{', '.join(['v'] * n)}] with each v >= {lowest}",
            found=f"{name}={list(values)}",
            fix=f"give {n} values" + (", padding as (top, bottom, left, right)" if n == 4 else ""),
        )
    return values


def _window(
    d: SymDim, k: SymDim, pads: Sequence[int], stride: int, dil: int, axis: int, k_text: str
) -> tuple[SymDim, list[Condition]]:
    """Output size of a sliding window over one axis, and the condition that it fits.

    ``k_text`` names the kernel size in messages (``{1}.shape[2]`` or ``kernel[0]``).
    """
    if isinstance(d, Dynamic) or isinstance(k, Dynamic):
        return DYNAMIC, []
    padded: Any = d + pads[0] + pads[1]
    span: Any = dil * (k - 1) + 1
    pad_text = f" + {pads[0] + pads[1]}" if pads[0] + pads[1] else ""
    cond = Condition(
        padded,
        ">=",
        span,
        f"the window is larger than the padded input along axis {axis}",
        f"{{0}}.shape[{axis}]{pad_text} >= " + (f"{dil}*({k_text} - 1) + 1" if dil > 1 else k_text),
        "pad the input, or use a smaller kernel or dilation",
    )
    out: SymDim = (padded - span) // stride + 1
    return out, [cond]


def conv2d(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """NCHW input, OIHW weight ``[O, C/groups, KH, KW]``, optional bias ``[O]``."""
    x, w = shapes[0], shapes[1]
    if len(x) != 4 or len(w) != 4 or (len(shapes) == 3 and len(shapes[2]) != 1):
        raise ShapeRuleError(
            "conv2d takes an NCHW input, an OIHW weight and an optional bias [O]",
            expected="{0} of rank 4, {1} of rank 4, bias of rank 1",
            found=", ".join(f"{{{i}}}: {fmt_shape(s)}" for i, s in enumerate(shapes)),
            fix="reshape to [N, C, H, W]; a weight is [out, in/groups, kh, kw]",
        )
    stride = _positive(int_list(attrs, "stride"), "stride", 2)
    padding = _positive(int_list(attrs, "padding"), "padding", 4, 0)
    dilation = _positive(int_list(attrs, "dilation"), "dilation", 2)
    groups = attrs.get("groups", 1)
    assert isinstance(groups, int)
    _positive((groups,), "groups", 1)
    n, c, h, wd = x
    o, cg, kh, kw = w
    if isinstance(o, int) and o % groups:
        raise ShapeRuleError(
            f"{o} output channels do not split into {groups} groups",
            expected="{1}.shape[0] divisible by groups",
            found=f"{{1}}: {fmt_shape(w)}, groups={groups}",
            fix="use a number of groups that divides the output channels",
        )
    conds = [
        Condition(
            c,
            "==",
            _mul(cg, groups),
            "input channels differ from what the weight expects",
            "{0}.shape[1] == {1}.shape[1]" + (f" * {groups} (groups)" if groups > 1 else ""),
            "the weight is [out, in/groups, kh, kw]; check groups and the layout (NCHW)",
        )
    ]
    if len(shapes) == 3:
        what = "bias size differs from the output channels"
        conds.append(Condition(shapes[2][0], "==", o, what, "{2}.shape[0] == {1}.shape[0]"))
    oh, c_h = _window(h, kh, padding[:2], stride[0], dilation[0], 2, "{1}.shape[2]")
    ow, c_w = _window(wd, kw, padding[2:], stride[1], dilation[1], 3, "{1}.shape[3]")
    return ShapeResult(((n, o, oh, ow),), conditions(*conds, *c_h, *c_w))


def pool2d(shapes: Sequence[SymShape], attrs: Attrs) -> ShapeResult:
    """Pool the last two axes of a CHW or NCHW input (``kernel``, ``stride``, ``padding``)."""
    (x,) = shapes
    if len(x) not in (3, 4):
        raise ShapeRuleError(
            "pooling takes a CHW or NCHW input",
            expected="{0} of rank 3 or 4",
            found=f"{{0}}: {fmt_shape(x)}",
            fix="reshape to [N, C, H, W]",
        )
    kernel = _positive(int_list(attrs, "kernel"), "kernel", 2)
    stride = kernel if attrs.get("stride") is None else int_list(attrs, "stride")
    _positive(stride, "stride", 2)
    padding = _positive(int_list(attrs, "padding"), "padding", 4, 0)
    for i, p in enumerate(padding):
        if p > kernel[i // 2] // 2:
            raise ShapeRuleError(
                "padding is more than half the kernel",
                expected="each padding <= kernel // 2 on its axis (as PyTorch)",
                found=f"kernel={list(kernel)}, padding={list(padding)}",
                fix="a window must not lie in the padding only; pad explicitly with op pad",
            )
    r = len(x)
    oh, c_h = _window(x[-2], kernel[0], padding[:2], stride[0], 1, r - 2, "kernel[0]")
    ow, c_w = _window(x[-1], kernel[1], padding[2:], stride[1], 1, r - 1, "kernel[1]")
    return ShapeResult(((*x[:-2], oh, ow),), conditions(*c_h, *c_w))
