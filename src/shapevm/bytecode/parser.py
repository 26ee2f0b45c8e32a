"""Reads the text form written by `shapevm.bytecode.printer` back into a `Program`.

Symbolic dimensions are parsed with the symbolic engine under the function's scope and
stored in canonical spelling, so ``2*b+1`` and ``1 + 2*b`` read as the same program. Nothing
is evaluated: literals are read with ``int``/``float``/``json``, never ``eval``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from shapevm.bytecode.errors import BytecodeSyntaxError
from shapevm.bytecode.isa import Opcode, Reg
from shapevm.bytecode.program import (
    DEVICE,
    NAME,
    BindInputs,
    Block,
    BranchIf,
    Constant,
    Dim,
    Function,
    Instr,
    Jump,
    LoadConst,
    OpCall,
    Operand,
    Param,
    Program,
    Return,
    ShapeCompute,
    ShapePropagate,
    SpecDim,
    TensorAlloc,
    TensorCreate,
    TensorFree,
    TensorPhi,
    TensorResize,
    TensorType,
)
from shapevm.bytecode.shape_expr import ShapeExprSyntaxError, parse_shape_cmp, parse_shape_expr
from shapevm.ops import DYNAMIC, AttrValue, DType
from shapevm.shapes import SymbolicScope, symbolic_shape

_TYPE = re.compile(r"([a-z0-9]+)\[(.*)\]")
_INSTR = re.compile(r"(?:(?P<lhs>.*?)\s+=\s+)?(?P<opcode>[A-Z][A-Z_]*)(?:\s+(?P<rest>.*))?")
_LOC = re.compile(r'\s+loc\(("(?:[^"\\]|\\.)*")\)$')
_META = re.compile(r'meta ("(?:[^"\\]|\\.)*") = ("(?:[^"\\]|\\.)*")')
_CONST = re.compile(r'const k(\d+) ("(?:[^"\\]|\\.)*"): (.*) = b64"([A-Za-z0-9+/=]*)"')
_FUNC = re.compile(r"func @(\S+?)\((.*)\) -> (.*)")
_REG_TOKEN = re.compile(r"[ts]\d+")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*(e[-+]?\d+)?|\d+e[-+]?\d+|inf|nan)")


class _LineError(Exception):
    """Raised while reading one line; the caller adds the line number and text."""

    def __init__(self, what: str, expected: str = "", near: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.expected = expected
        self.near = near


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets, parentheses and double quotes; strip the items."""
    items: list[str] = []
    depth = 0
    quoted = False
    start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                raise _LineError(f"unbalanced {c!r}", near=c)
        elif c == sep and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
        i += 1
    if depth or quoted:
        raise _LineError("unbalanced brackets or quotes", near=text)
    last = text[start:].strip()
    if last or items:
        items.append(last)
    return items


def parse_dim(text: str, scope: SymbolicScope | None) -> Dim:
    """``64``, ``dynamic`` or a symbolic dimension in canonical spelling."""
    text = text.strip()
    if text == "dynamic":
        return DYNAMIC
    if re.fullmatch(r"\d+", text):
        return int(text)
    try:
        value = symbolic_shape(text, scope=scope or SymbolicScope())
    except Exception as exc:  # the engine's own message says what is wrong
        raise _LineError(f"bad dimension {text!r}: {exc}", "a dimension", text) from None
    if len(value) != 1:
        raise _LineError(f"expected one dimension, found {text!r}", "a dimension", text)
    dim = value[0]
    return dim if isinstance(dim, int) else str(dim)


def parse_type(text: str, scope: SymbolicScope | None = None) -> TensorType:
    """``f32[b, 64]`` as a `TensorType`; raises ``ValueError``.

    >>> str(parse_type("f32[ 1+2*b, 64]"))
    'f32[2*b + 1, 64]'
    """
    try:
        return _type(text, scope)
    except _LineError as exc:
        raise ValueError(exc.what) from None


def _type(text: str, scope: SymbolicScope | None) -> TensorType:
    m = _TYPE.fullmatch(text.strip())
    if m is None:
        raise _LineError(f"expected a type like f32[b, 64], found {text.strip()!r}", near=text)
    try:
        dtype = DType.parse(m.group(1))
    except ValueError as exc:
        raise _LineError(str(exc), near=m.group(1)) from None
    return TensorType(dtype, tuple(parse_dim(d, scope) for d in split_top(m.group(2))))


def _reg(text: str) -> Reg:
    try:
        return Reg.parse(text)
    except ValueError as exc:
        raise _LineError(str(exc), "a register", text.strip()) from None


def _int(text: str) -> int:
    if not re.fullmatch(r"-?\d{1,19}", text.strip()):
        raise _LineError(f"expected an integer, found {text.strip()!r}", near=text.strip())
    return int(text)


def _name(text: str, what: str) -> str:
    if not NAME.fullmatch(text.strip()):
        raise _LineError(f"expected {what}, found {text.strip()!r}", near=text.strip())
    return text.strip()


def _scalar(text: str) -> bool | int | float:
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d{1,19}", text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    raise _LineError(
        f"expected a register or a literal, found {text!r}",
        "a tensor register such as t0, or a literal such as 1, 0.5, true",
        text,
    )


@dataclass
class _FunctionText:
    """A function being read: the header waits for the ``where`` lines (the scope)."""

    name: str
    params: str
    results: str
    header_line: int
    constraints: list[str] = field(default_factory=list)
    dim_args: tuple[str, ...] = ()
    scope: SymbolicScope | None = None
    blocks: list[tuple[str, list[Instr]]] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.constants: list[Constant] = []
        self.metadata: list[tuple[str, str]] = []
        self.functions: list[Function] = []
        self.current: _FunctionText | None = None
        self.lineno = 0

    def parse(self) -> Program:
        for lineno, line in enumerate(self.lines, start=1):
            self.lineno = lineno
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            try:
                self._line(line, stripped)
            except _LineError as exc:
                raise self._error(exc, line) from None
        self._finish()
        return Program(tuple(self.functions), tuple(self.constants), tuple(self.metadata))

    def _error(self, exc: _LineError, line: str) -> BytecodeSyntaxError:
        col = (
            line.find(exc.near) + 1
            if exc.near and exc.near in line
            else len(line) - len(line.lstrip()) + 1
        )
        return BytecodeSyntaxError(
            exc.what, line=self.lineno, column=col, text=line, expected=exc.expected
        )

    def _line(self, line: str, stripped: str) -> None:
        if stripped.startswith("const "):
            self._const(stripped)
        elif stripped.startswith("meta ") and self.current is None and not self.functions:
            m = _META.fullmatch(stripped)
            if m is None:
                raise _LineError("bad metadata line", 'meta "key" = "value"')
            self.metadata.append((json.loads(m.group(1)), json.loads(m.group(2))))
        elif stripped.startswith("func "):
            self._finish()
            m = _FUNC.fullmatch(stripped)
            if m is None:
                raise _LineError("bad function header", "func @name(t0: f32[b]) -> f32[b]")
            name = _name(m.group(1), "a function name")
            self.current = _FunctionText(name, m.group(2), m.group(3), self.lineno)
        elif self.current is None:
            raise _LineError("instruction outside a function", "func @name(...) -> ...")
        elif stripped.startswith("where ") and not self.current.blocks:
            self.current.constraints.append(stripped[len("where ") :].strip())
        elif stripped.startswith("dim_args ") and not self.current.blocks:
            names = split_top(stripped[len("dim_args ") :])
            self.current.dim_args = tuple(_name(n, "a dimension variable") for n in names)
        elif stripped.endswith(":") and NAME.fullmatch(stripped[:-1]):
            self._scope()
            self.current.blocks.append((stripped[:-1], []))
        else:
            if not self.current.blocks:
                raise _LineError("instruction before the first label", "a label such as L0:")
            self.current.blocks[-1][1].append(self._instr(stripped))

    def _scope(self) -> SymbolicScope:
        fn = self.current
        assert fn is not None
        if fn.scope is None:
            try:
                fn.scope = SymbolicScope(fn.constraints)
            except Exception as exc:
                raise _LineError(f"bad constraint: {exc}", near="where") from None
        return fn.scope

    def _finish(self) -> None:
        fn = self.current
        if fn is None:
            return
        self.current = None
        line = self.lines[fn.header_line - 1]
        self.lineno = fn.header_line
        try:
            scope = self._scope_of(fn)
            params = []
            for item in split_top(fn.params):
                reg, _, typ = item.partition(":")
                params.append(Param(_reg(reg), _type(typ, scope)))
            results = fn.results.strip()
            types = () if results == "()" else tuple(_type(t, scope) for t in split_top(results))
        except _LineError as exc:
            raise self._error(exc, line) from None
        blocks = tuple(Block(label, tuple(instrs)) for label, instrs in fn.blocks)
        self.functions.append(
            Function(fn.name, tuple(params), types, blocks, tuple(fn.constraints), fn.dim_args)
        )

    def _scope_of(self, fn: _FunctionText) -> SymbolicScope:
        self.current = fn
        try:
            return self._scope()
        finally:
            self.current = None

    def _const(self, text: str) -> None:
        m = _CONST.fullmatch(text)
        if m is None:
            raise _LineError("bad constant", 'const k0 "name": f32[2, 2] = b64"..."')
        if int(m.group(1)) != len(self.constants):
            raise _LineError(f"expected constant k{len(self.constants)}", near=f"k{m.group(1)}")
        typ = _type(m.group(3), None)
        if any(not isinstance(d, int) for d in typ.shape):
            raise _LineError("a constant needs a concrete shape", near=m.group(3))
        try:
            data = base64.b64decode(m.group(4), validate=True)
        except binascii.Error as exc:
            raise _LineError(f"bad base64 data: {exc}", near="b64") from None
        count = int(np.prod([int(d) for d in typ.shape if isinstance(d, int)], dtype=np.int64))
        if len(data) != count * typ.dtype.itemsize:
            raise _LineError(
                f"constant data has {len(data)} bytes",
                f"{count * typ.dtype.itemsize} bytes for {typ}",
                near="b64",
            )
        shape = tuple(d for d in typ.shape if isinstance(d, int))
        array = np.frombuffer(data, dtype=typ.dtype.numpy).reshape(shape)
        self.constants.append(Constant(json.loads(m.group(2)), array))

    def _instr(self, text: str) -> Instr:
        loc = None
        m = _LOC.search(text)
        if m is not None:
            loc = json.loads(m.group(1))
            text = text[: m.start()]
        text = _strip_meaning(text)
        m = _INSTR.fullmatch(text)
        if m is None or m.group("opcode") not in Opcode.__members__:
            raise _LineError("expected an instruction", "an opcode such as OP_CALL")
        opcode = Opcode[m.group("opcode")]
        outs, types = self._lhs(m.group("lhs") or "")
        rest = (m.group("rest") or "").strip()
        try:
            instr = _READERS[opcode](self, outs, types, rest)
        except ShapeExprSyntaxError as exc:
            raise _LineError(str(exc), "a shape expression", rest) from None
        return _with_loc(instr, loc)

    def _lhs(self, text: str) -> tuple[tuple[Reg, ...], tuple[TensorType | None, ...]]:
        outs: list[Reg] = []
        types: list[TensorType | None] = []
        for item in split_top(text) if text.strip() else []:
            reg, colon, typ = item.partition(":")
            outs.append(_reg(reg))
            types.append(_type(typ, self._scope()) if colon else None)
        return tuple(outs), tuple(types)

    def _spec(self, text: str) -> tuple[SpecDim, ...]:
        text = text.strip()
        if not (text.startswith("[") and text.endswith("]")):
            raise _LineError("expected a shape spec like [s0, 64, dynamic]", near=text)
        out: list[SpecDim] = []
        for item in split_top(text[1:-1]):
            if item == "dynamic":
                out.append(DYNAMIC)
            elif _REG_TOKEN.fullmatch(item):
                out.append(_reg(item))
            else:
                out.append(_int(item))
        return tuple(out)

    def _attr(self, text: str) -> AttrValue:
        text = text.strip()
        if text.startswith('"'):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                raise _LineError(f"bad string {text}", near=text) from None
            if not isinstance(value, str):
                raise _LineError(f"bad string {text}", near=text)
            return value
        if text.startswith("["):
            if not text.endswith("]"):
                raise _LineError("unclosed '['", near=text)
            items: list[int | str] = []
            for item in split_top(text[1:-1]):
                dim = parse_dim(item, self._scope())
                if not isinstance(dim, (int, str)):
                    raise _LineError("dynamic is not allowed in an attribute", near=item)
                items.append(dim)
            return tuple(items)
        return _scalar(text)


def _strip_meaning(text: str) -> str:
    """Drop a trailing ``  (meaning)`` column: two spaces, then one balanced group."""
    text = text.rstrip()
    pos = text.rfind("  (") if text.endswith(")") else -1
    while pos >= 0:
        if _closes_at_end(text[pos + 2 :]):
            return text[:pos].rstrip()
        pos = text.rfind("  (", 0, pos)
    return text


def _closes_at_end(text: str) -> bool:
    """Whether ``text`` starts a parenthesized group that ends at its last character;
    parentheses inside JSON strings (escapes included) do not count."""
    depth = 0
    quoted = False
    escaped = False
    for i, c in enumerate(text):
        if quoted:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            else:
                quoted = c != '"'
        elif c == '"':
            quoted = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i == len(text) - 1
    return False


def _with_loc(instr: Instr, loc: str | None) -> Instr:
    return instr if loc is None else dataclasses.replace(instr, loc=loc)


Outs = tuple[Reg, ...]
Types = tuple[TensorType | None, ...]


def _one(outs: Outs, opcode: Opcode) -> Reg:
    if len(outs) != 1:
        raise _LineError(f"{opcode.name} defines one register, found {len(outs)}")
    return outs[0]


def _untyped(types: Types, opcode: Opcode) -> None:
    if any(t is not None for t in types):
        raise _LineError(f"{opcode.name} takes no declared type; its operands give it")


def _n_items(rest: str, n: int, opcode: Opcode) -> list[str]:
    items = split_top(rest)
    if len(items) != n:
        raise _LineError(f"{opcode.name} takes {n} operands, found {len(items)}", near=rest)
    return items


def _bind(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    _untyped(types, Opcode.BIND_INPUTS)
    names = tuple(_name(n, "a dimension variable") for n in split_top(rest))
    if len(names) != len(outs):
        raise _LineError(f"{len(outs)} registers for {len(names)} dimension variables")
    return BindInputs(outs, names)


def _propagate(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    _untyped(types, Opcode.SHAPE_PROPAGATE)
    src, axis = _n_items(rest, 2, Opcode.SHAPE_PROPAGATE)
    return ShapePropagate(_one(outs, Opcode.SHAPE_PROPAGATE), _reg(src), _int(axis))


def _compute(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    _untyped(types, Opcode.SHAPE_COMPUTE)
    return ShapeCompute(_one(outs, Opcode.SHAPE_COMPUTE), parse_shape_expr(rest))


def _create(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    _untyped(types, Opcode.TENSOR_CREATE)
    spec, dtype, device = _n_items(rest, 3, Opcode.TENSOR_CREATE)
    try:
        dt = DType.parse(dtype)
    except ValueError as exc:
        raise _LineError(str(exc), near=dtype) from None
    if not DEVICE.fullmatch(device):
        raise _LineError(f"expected a device such as cpu or cuda:0, found {device!r}", near=device)
    return TensorCreate(_one(outs, Opcode.TENSOR_CREATE), p._spec(spec), dt, device)


def _alloc(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    if outs:
        raise _LineError("TENSOR_ALLOC defines no register")
    return TensorAlloc(_reg(rest))


def _free(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    if outs:
        raise _LineError("TENSOR_FREE defines no register")
    return TensorFree(_reg(rest))


def _load(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    if not re.fullmatch(r"k\d{1,9}", rest):
        raise _LineError(f"expected a constant like k0, found {rest!r}", near=rest)
    return LoadConst(_one(outs, Opcode.LOAD_CONST), int(rest[1:]), types[0] if types else None)


def _call(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_.]*)\((.*)\)", rest)
    if m is None:
        raise _LineError("expected an op call like matmul(t0, t1)", near=rest)
    ins: list[Operand] = []
    attrs: list[tuple[str, AttrValue]] = []
    for item in split_top(m.group(2)):
        key, eq, value = item.partition("=")
        if eq and NAME.fullmatch(key.strip()):
            attrs.append((key.strip(), p._attr(value)))
        elif attrs:
            raise _LineError("operand after an attribute", near=item)
        elif _REG_TOKEN.fullmatch(item):
            ins.append(_reg(item))
        else:
            ins.append(_scalar(item))
    names = [k for k, _ in attrs]
    if len(set(names)) != len(names):
        raise _LineError("an attribute is given twice", near=rest)
    return OpCall(outs, m.group(1), tuple(ins), tuple(attrs), types)


def _resize(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    src, spec = _n_items(rest, 2, Opcode.TENSOR_RESIZE)
    typ = types[0] if types else None
    return TensorResize(_one(outs, Opcode.TENSOR_RESIZE), _reg(src), p._spec(spec), typ)


def _jump(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    return Jump(_name(rest, "a label"))


def _branch(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    cond, if_true, if_false = _n_items(rest, 3, Opcode.BRANCH_IF)
    pred = _reg(cond) if _REG_TOKEN.fullmatch(cond) else parse_shape_cmp(cond)
    return BranchIf(pred, _name(if_true, "a label"), _name(if_false, "a label"))


def _phi(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    incoming = []
    for item in split_top(rest):
        if not (item.startswith("(") and item.endswith(")")):
            raise _LineError("expected (label, register)", near=item)
        label, reg = _n_items(item[1:-1], 2, Opcode.TENSOR_PHI)
        incoming.append((_name(label, "a label"), _reg(reg)))
    typ = types[0] if types else None
    return TensorPhi(_one(outs, Opcode.TENSOR_PHI), tuple(incoming), typ)


def _return(p: _Parser, outs: Outs, types: Types, rest: str) -> Instr:
    if outs:
        raise _LineError("RETURN defines no register")
    return Return(tuple(_reg(r) for r in split_top(rest)) if rest else ())


_READERS: dict[Opcode, Callable[[_Parser, Outs, Types, str], Instr]] = {
    Opcode.BIND_INPUTS: _bind,
    Opcode.SHAPE_PROPAGATE: _propagate,
    Opcode.SHAPE_COMPUTE: _compute,
    Opcode.TENSOR_CREATE: _create,
    Opcode.TENSOR_ALLOC: _alloc,
    Opcode.TENSOR_FREE: _free,
    Opcode.LOAD_CONST: _load,
    Opcode.OP_CALL: _call,
    Opcode.TENSOR_RESIZE: _resize,
    Opcode.JUMP: _jump,
    Opcode.BRANCH_IF: _branch,
    Opcode.TENSOR_PHI: _phi,
    Opcode.RETURN: _return,
}


def parse_program(text: str) -> Program:
    """Read a program from its text form; raises `BytecodeSyntaxError` with line and column."""
    return _Parser(text).parse()
