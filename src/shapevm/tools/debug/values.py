"""What a stopped session shows: its scopes (tensor registers, shape registers, dimension
variables), each tensor's details, and the expressions ``evaluate`` accepts.

A tensor register reads ``f32[3, 256]``; expanded: shape, dtype, strides, device, memory,
how it was made (input, constant, interpreted by which instruction, or compiled by which
region), min/max/mean and its first values. ``evaluate`` takes a register (``t3``,
``s0``), an index into a tensor register (``t3[0, :4]``), a dimension variable (``b``) or
an expression of them (``2*b + 1``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from shapevm.bytecode.errors import format_message
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.printer import format_instr
from shapevm.ops import DType
from shapevm.shapes import ShapeError, symbolic_shape
from shapevm.tools.debug.session import Session

TENSORS, SHAPES, DIMS = 1, 2, 3
FIRST_VALUES = 8
ELEMENTS = 100  # elements listed under "values"
_INDEX = re.compile(r"^\s*([ts]\d+)\s*(?:\[(.*)\])?\s*$")


class EvaluateError(ValueError):
    """An expression ``evaluate`` cannot read."""


def summary(value: Any) -> str:
    """``f32[3, 256]``; a scalar with its value: ``f32[] = 1.5``.

    >>> summary(np.zeros((3, 256), np.float32)), summary(np.float64(1.5)), summary(3)
    ('f32[3, 256]', 'f64[] = 1.5', '3')
    """
    if isinstance(value, (int, float, bool)) and not isinstance(value, np.generic):
        return str(value)
    arr = np.asarray(value)
    try:
        dtype = str(DType.from_numpy(arr.dtype))
    except (TypeError, ValueError):
        dtype = str(arr.dtype)
    text = f"{dtype}[{', '.join(str(d) for d in arr.shape)}]"
    return text + f" = {_scalar(arr.item())}" if arr.ndim == 0 else text


def describe(value: Any) -> str:
    """`summary` with the statistics of the values: ``f32[2, 4] min 0 max 1.5 mean 0.7``."""
    stats = _stats(np.asarray(value)) if np.ndim(value) else []
    return " ".join([summary(value), *(f"{k} {v}" for k, v in stats)])


def _scalar(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


class Values:
    """Variables of the stopped session, with handles valid until it runs again."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._handles: dict[int, tuple[str, Any]] = {}

    def reset(self) -> None:
        self._handles.clear()

    def _handle(self, kind: str, payload: Any) -> int:
        ref = 1000 + len(self._handles)
        self._handles[ref] = (kind, payload)
        return ref

    @property
    def target(self) -> Any:
        return self.session.target

    # -- scopes ------------------------------------------------------------------------------
    def scopes(self) -> list[dict[str, Any]]:
        n_t = len(self._tensor_slots())
        n_s = len(self._shape_slots())
        return [
            _scope("Tensor registers", TENSORS, n_t, "registers"),
            _scope("Shape registers", SHAPES, n_s, "registers"),
            _scope("Dimension variables", DIMS, len(self.target.env), "locals"),
        ]

    def _tensor_slots(self) -> list[int]:
        n_t = self.target.executable.n_tensor
        return [i for i, v in enumerate(self.session.regs[:n_t]) if v is not None]

    def _shape_slots(self) -> list[int]:
        ex = self.target.executable
        regs = self.session.regs[ex.n_tensor : ex.n_regs]
        return [ex.n_tensor + j for j, v in enumerate(regs) if v is not None]

    def variables(self, ref: int) -> list[dict[str, Any]]:
        if ref == TENSORS:
            return [self._tensor(f"t{i}", i) for i in self._tensor_slots()]
        if ref == SHAPES:
            n_t = self.target.executable.n_tensor
            return [self._shape(f"s{i - n_t}", i) for i in self._shape_slots()]
        if ref == DIMS:
            return [_var(k, str(v), "dimension variable") for k, v in self.target.env.items()]
        kind, payload = self._handles.get(ref, ("", None))
        if kind == "tensor":
            return self._details(*payload)
        if kind == "elements":
            return _elements(payload)
        raise EvaluateError(
            f"no variables under reference {ref}: they expire when the program runs"
        )

    def _tensor(self, name: str, slot: int) -> dict[str, Any]:
        value = self.session.regs[slot]
        declared = self.target.types.get(Reg.tensor(slot))
        how = self.session.origin.get(slot, "")
        ref = self._handle("tensor", (value, declared, how))
        var = _var(name, summary(value), str(declared) if declared else "tensor", ref)
        var["evaluateName"] = name
        return var

    def _shape(self, name: str, slot: int) -> dict[str, Any]:
        reg = Reg.shape(slot - self.target.executable.n_tensor)
        made = next((i for i in self.target.instrs if reg in i.defs()), None)
        what = format_instr(made).strip() if made is not None else "shape register"
        var = _var(name, str(self.session.regs[slot]), what)
        var["evaluateName"] = name
        return var

    def _details(self, value: Any, declared: Any, how: str) -> list[dict[str, Any]]:
        arr = np.asarray(value)
        items = [
            _var("shape", str(tuple(arr.shape))),
            _var("dtype", str(arr.dtype)),
            _var("strides", _strides(arr)),
            _var("device", self.target.executable.device),
            _var("execution", how or "not known"),
        ]
        if declared is not None:
            items.append(_var("declared type", str(declared)))
        items.append(_var("memory", _memory(arr)))
        items += [_var(k, v) for k, v in _stats(arr)]
        if arr.size:
            flat = arr.reshape(-1)[:FIRST_VALUES]
            more = ", ..." if arr.size > FIRST_VALUES else ""
            text = "[" + ", ".join(_scalar(x.item()) for x in flat) + more + "]"
            items.append(_var("values", text, "", self._handle("elements", arr)))
        return items

    # -- evaluate ----------------------------------------------------------------------------
    def evaluate(self, expression: str) -> dict[str, Any]:
        text = expression.strip()
        match = _INDEX.match(text)
        if match:
            return self._register(match.group(1), match.group(2), text)
        env = self.target.env
        if text in env:
            return {"result": str(env[text]), "type": "dimension variable", "variablesReference": 0}
        try:
            (dim,) = symbolic_shape(text)  # a scope of its own: the program's is left alone
            value = dim if isinstance(dim, int) else dim.evaluate(env)
        except (ShapeError, ValueError, TypeError, KeyError) as exc:
            why = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
            raise EvaluateError(self._cannot(text, why.splitlines()[0])) from None
        return {"result": str(value), "type": "dimension expression", "variablesReference": 0}

    def _register(self, name: str, index: str | None, text: str) -> dict[str, Any]:
        ex = self.target.executable
        reg = Reg.parse(name)
        slot = reg.index if reg.is_tensor else ex.n_tensor + reg.index
        limit = ex.n_tensor if reg.is_tensor else ex.n_regs
        value = self.session.regs[slot] if slot < min(limit, len(self.session.regs)) else None
        if value is None:
            raise EvaluateError(self._cannot(text, f"{name} holds no value here"))
        if not reg.is_tensor:
            if index is not None:
                raise EvaluateError(self._cannot(text, f"{name} is an integer: it has no index"))
            return {"result": str(value), "type": "shape register", "variablesReference": 0}
        declared = self.target.types.get(reg)
        how = self.session.origin.get(slot, "")
        if index is not None:
            try:
                value = np.asarray(value)[_parse_index(index)]
            except (IndexError, ValueError) as exc:
                raise EvaluateError(self._cannot(text, str(exc))) from None
            declared = None
        ref = self._handle("tensor", (value, declared, how))
        return {
            "result": summary(value),
            "type": str(declared or "tensor"),
            "variablesReference": ref,
        }

    def _cannot(self, text: str, why: str) -> str:
        dims = ", ".join(self.target.env) or "none"
        return format_message(
            f"cannot evaluate {text!r}: {why}",
            expected="a register (t3, s0), an index into a tensor register (t3[0, :4]), a "
            f"dimension variable ({dims}) or an expression of them (2*b + 1)",
        )


def _scope(name: str, ref: int, n: int, hint: str) -> dict[str, Any]:
    return {
        "name": name,
        "variablesReference": ref,
        "namedVariables": n,
        "presentationHint": hint,
        "expensive": False,
    }


def _var(name: str, value: str, type_: str = "", ref: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "value": value, "variablesReference": ref}
    if type_:
        out["type"] = type_
    return out


def _strides(arr: np.ndarray[Any, Any]) -> str:
    size = arr.itemsize or 1
    elems = tuple(s // size for s in arr.strides)
    return f"{tuple(arr.strides)} bytes = {elems} elements"


def _memory(arr: np.ndarray[Any, Any]) -> str:
    n = arr.nbytes
    size = f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"
    layout = "C-contiguous" if arr.flags.c_contiguous else "strided"
    owner = "a view" if arr.base is not None else "owns its memory"
    return f"{size}, {layout}, {owner}"


def _stats(arr: np.ndarray[Any, Any]) -> list[tuple[str, str]]:
    if not arr.size or arr.dtype.kind not in "fiub":
        return []
    if arr.dtype.kind == "b":
        return [("true", f"{int(arr.sum())} of {arr.size}")]
    data = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
    out = []
    bad = int(np.count_nonzero(~np.isfinite(data))) if arr.dtype.kind == "f" else 0
    if bad:
        out.append(("non-finite", f"{bad} of {arr.size}"))
        data = data[np.isfinite(data)]
        if not data.size:
            return out
    out += [(k, _scalar(f(data).item())) for k, f in (("min", np.min), ("max", np.max))]
    out.append(("mean", _scalar(float(np.mean(data)))))
    return out


def _elements(arr: np.ndarray[Any, Any]) -> list[dict[str, Any]]:
    flat = arr.reshape(-1)
    out = []
    for i in range(min(arr.size, ELEMENTS)):
        idx = np.unravel_index(i, arr.shape) if arr.ndim else ()
        out.append(_var(f"[{', '.join(str(int(j)) for j in idx)}]", _scalar(flat[i].item())))
    if arr.size > ELEMENTS:
        out.append(_var("...", f"{arr.size - ELEMENTS} more (evaluate t[...] for others)"))
    return out


def _parse_index(text: str) -> tuple[Any, ...]:
    """``0, :4, ...`` as a NumPy index: integers, slices and ``...`` only (no code runs).

    >>> _parse_index("0, 1:4:2, ..., -1")
    (0, slice(1, 4, 2), Ellipsis, -1)
    """
    parts: list[Any] = []
    for part in text.split(","):
        p = part.strip()
        if p == "...":
            parts.append(Ellipsis)
        elif ":" in p:
            bits = [b.strip() for b in p.split(":")]
            if len(bits) > 3:
                raise ValueError(f"bad slice {p!r}")
            parts.append(slice(*(int(b) if b else None for b in bits)))
        else:
            parts.append(int(p))
    return tuple(parts)
