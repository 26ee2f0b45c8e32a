"""`export` and `Exported`: a function traced once with symbolic shapes, serializable.

An `Exported` carries everything needed to run without the Python source: the bytecode,
its constants, the symbolic signature with the scope's constraints (enforced on every
call, also after loading), and the argument and result trees.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from shapevm import _pytree
from shapevm.bytecode.errors import format_message
from shapevm.bytecode.program import Program
from shapevm.bytecode.serialize import deserialize as _from_bytes
from shapevm.bytecode.serialize import load as _from_file
from shapevm.bytecode.serialize import save as _to_file
from shapevm.bytecode.serialize import serialize as _to_bytes
from shapevm.bytecode.verify import verify
from shapevm.frontend.trace import LeafKind, Traced, trace
from shapevm.runtime.binding import sym_dim
from shapevm.runtime.interpreter import Executable
from shapevm.shapes import DimExpr, ShapeDtypeStruct

if TYPE_CHECKING:
    from shapevm.frontend.jit import Jitted

FORMAT_KEY = "shapevm.exported"


class Exported:
    """A function exported with symbolic shapes.

    ``in_avals``/``out_avals`` hold a `ShapeDtypeStruct` per array argument and result
    (``.shape`` has ints and symbolic dimensions, and `shapevm.shapes.DYNAMIC` for a result
    size known only from the data); ``in_tree``/``out_tree`` the argument and result
    structures. `call` runs any concrete shape of the family.

    The program is verified here, whichever way it came (traced, deserialized, loaded or
    built by hand); ``verified=True`` skips that only for a program the caller has just
    verified itself.
    """

    def __init__(
        self,
        program: Program,
        in_tree: _pytree.TreeDef,
        out_tree: _pytree.TreeDef,
        leaf_kinds: Sequence[LeafKind],
        arg_names: Sequence[str] | None = None,
        *,
        verified: bool = False,
    ) -> None:
        if not verified:
            verify(program)
        self.program = program
        self.in_tree = in_tree
        self.out_tree = out_tree
        self.leaf_kinds = tuple(leaf_kinds)
        fn = program.functions[0]
        self.fun_name = fn.name
        self.constraints = tuple(fn.constraints)
        names = list(arg_names or _leaf_names(in_tree, self.leaf_kinds))
        self._arg_names = names
        array_names = [n for n, k in zip(names, self.leaf_kinds, strict=True) if k.is_array]

        self.executable = Executable(program, arg_names=array_names, verified=True)
        scope = self.executable.scope
        self.in_avals = tuple(
            ShapeDtypeStruct(
                tuple(sym_dim(d, scope) for d in p.type.shape),
                p.type.dtype.numpy.newbyteorder("="),
            )
            for p in fn.params
        )
        self.out_avals = tuple(
            ShapeDtypeStruct(
                tuple(sym_dim(d, scope) for d in t.shape), t.dtype.numpy.newbyteorder("=")
            )
            for t in fn.results
        )
        self.dim_args = tuple(k.dim for k in self.leaf_kinds if k.dim is not None)
        self._flat_arrays = not self.dim_args and in_tree == _pytree.TreeDef(
            "tuple", tuple(_pytree.TreeDef("leaf") for _ in self.leaf_kinds)
        )

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The name of each argument leaf in call order (``x``, ``params['w']``...), the
        dimension arguments included (`leaf_kinds` says which leaf is which).

        >>> import numpy as np, shapevm as sv
        >>> b, = sv.symbolic_shape("b")
        >>> def f(x, scale):
        ...     return x * scale
        >>> exp = sv.export(sv.jit(f))(sv.ShapeDtypeStruct((b, 4), np.float32),
        ...                            sv.ShapeDtypeStruct((4,), np.float32))
        >>> exp.arg_names
        ('x', 'scale')
        """
        return tuple(self._arg_names)

    @classmethod
    def _from_traced(cls, traced: Traced, arg_names: Sequence[str] | None) -> Exported:
        meta = {
            "in_tree": _tree_to_json(traced.in_tree),
            "out_tree": _tree_to_json(traced.out_tree),
            "leaf_kinds": [k.encode() for k in traced.leaf_kinds],
            "arg_names": list(arg_names) if arg_names else None,
        }
        program = Program(
            traced.program.functions,
            traced.program.constants,
            ((FORMAT_KEY, json.dumps(meta, sort_keys=True)),),
        )
        return cls(
            program,
            traced.in_tree,
            traced.out_tree,
            traced.leaf_kinds,
            arg_names,
            verified=True,  # trace() verified the same functions and constants
        )

    @classmethod
    def from_program(cls, program: Program) -> Exported:
        """The `Exported` stored in ``program`` (its metadata holds the trees), verified.

        >>> import shapevm as sv
        >>> from shapevm.bytecode import parse_program
        >>> sv.Exported.from_program(parse_program('''
        ... func @f(t0: f32[b]) -> f32[b, 2]
        ...   L0:
        ...     RETURN t0
        ... '''))
        Traceback (most recent call last):
        ...
        shapevm.bytecode.errors.VerifyError: instruction 0 (RETURN) in @f: result 0 does not ...
        """
        text = program.meta(FORMAT_KEY)
        if text is None:
            fn = program.functions[0]
            n = len(fn.params)
            tree = _pytree.TreeDef("tuple", tuple(_pytree.TreeDef("leaf") for _ in range(n)))
            out = _pytree.TreeDef("tuple", tuple(_pytree.TreeDef("leaf") for _ in fn.results))
            return cls(program, tree, out, [LeafKind()] * n)
        try:
            meta = json.loads(text)
            in_tree = _tree_from_json(meta["in_tree"])
            out_tree = _tree_from_json(meta["out_tree"])
            kinds = [LeafKind.decode(k) for k in meta["leaf_kinds"]]
            names = meta.get("arg_names")
        except (ValueError, KeyError, TypeError) as exc:
            from shapevm.bytecode.errors import BytecodeFormatError

            raise BytecodeFormatError(f"bad exported-function metadata: {exc}", offset=0) from None
        return cls(program, in_tree, out_tree, kinds, names)

    # -- running --------------------------------------------------------------------------
    def call(self, *args: Any) -> Any:
        """Run on concrete arguments of any shape in the family (non-static arguments only).

        Always in the interpreter; `jit` gives a version that compiles hot shapes."""
        arrays, dims = self._split(args)
        outs = self.executable(*arrays, dims=dims)
        return _pytree.unflatten(self.out_tree, outs)

    def _split(self, args: Sequence[Any]) -> tuple[Sequence[Any], dict[str, int]]:
        """The array arguments and the dimension arguments of a call."""
        if self._flat_arrays and len(args) == len(self.leaf_kinds):
            if all(type(a) is np.ndarray for a in args):
                return args, {}  # the common case: positional arrays, nothing to flatten
        leaves, tree = _pytree.flatten(tuple(args))
        if tree != self.in_tree:
            raise TypeError(self._structure_message(args, tree))
        arrays: list[Any] = []
        dims: dict[str, int] = {}
        for leaf, kind in zip(leaves, self.leaf_kinds, strict=True):
            if kind.dim is None:
                arrays.append(leaf)
            else:
                dims[kind.dim] = leaf
        return arrays, dims

    __call__ = call

    def _structure_message(self, args: Sequence[Any], tree: _pytree.TreeDef) -> str:
        """What is wrong with arguments whose structure is not the exported one: a nested
        list where an array belongs is named as such (its structure would be one ``*``
        per number)."""
        if self._flat_arrays and len(args) == 1 and isinstance(args[0], dict):
            params = ", ".join(
                f"{n}: {_aval(a)}" for n, a in zip(self._arg_names, self.in_avals, strict=True)
            )
            return format_message(
                f"{self.fun_name!r} takes its inputs in order, not as a dict of feeds",
                expected=f"({params})",
                found=f"a dict with keys {_shorten(str(sorted(map(str, args[0]))))}",
                fix="call it with *(feeds[name] for name in exported.arg_names)",
            )
        if self._flat_arrays and len(args) == len(self.leaf_kinds):
            for name, arg, aval in zip(self._arg_names, args, self.in_avals, strict=True):
                if isinstance(arg, (list, tuple)):
                    kind = type(arg).__name__
                    return format_message(
                        f"argument {name!r} of {self.fun_name!r} is a {kind}, not an array",
                        expected=f"an array {_aval(aval)}",
                        found=f"a {kind} of length {len(arg)}",
                        fix=f"pass np.asarray({name}, np.{aval.dtype})",
                    )
        return (
            f"exported function {self.fun_name!r} called with arguments structured as "
            f"{_shorten(str(tree))}, but it was exported for {_shorten(str(self.in_tree))}\n"
            "  fix: pass the same arguments as at export time, except static ones"
        )

    def jit(self, **options: Any) -> JittedExported:
        """This function with a JIT: lowered to native code now, for every shape; C for hot
        shapes is compiled in the background.

        `call` itself always interprets; the returned object is called the same way and
        takes the options of `shapevm.jit` (``hot_threshold``, ``cache_mode``...).

        >>> import numpy as np, shapevm as sv
        >>> b, = sv.symbolic_shape("b")
        >>> exp = sv.export(sv.jit(lambda x: x * 2.0))(sv.ShapeDtypeStruct((b, 4), np.float32))
        >>> fast = exp.jit(background=False, hot_threshold=1)
        >>> fast(np.ones((2, 4), np.float32)).shape, fast.jit_info()[0]["status"]
        ((2, 4), 'ready')
        """
        return JittedExported(self, **options)

    # -- bytes ------------------------------------------------------------------------------
    def serialize(self) -> bytes:
        """The binary form: bytecode, constants, signature, constraints and trees."""
        return _to_bytes(self.program)

    def save(self, path: str | os.PathLike[str]) -> None:
        _to_file(self.program, path)

    def text(self) -> str:
        """The bytecode as text (the disassembler's view)."""
        from shapevm.bytecode.printer import format_program

        return format_program(self.program)

    def __repr__(self) -> str:
        ins = ", ".join(_aval(a) for a in self.in_avals)
        outs = ", ".join(_aval(a) for a in self.out_avals)
        where = f" where {', '.join(self.constraints)}" if self.constraints else ""
        return f"Exported({self.fun_name}: ({ins}) -> ({outs}){where})"


class JittedExported:
    """An `Exported` whose calls go through a `shapevm.jit.JitEngine` (see `Exported.jit`)."""

    def __init__(self, exported: Exported, **options: Any) -> None:
        from shapevm.jit.engine import JitEngine
        from shapevm.jit.options import JitOptions

        compiler = options.pop("compiler", None)
        self.exported = exported
        self.engine = JitEngine(
            exported.executable,
            JitOptions.from_kwargs(options),
            compiler=compiler,
            name=exported.fun_name,
        )

    def __call__(self, *args: Any) -> Any:
        arrays, dims = self.exported._split(args)
        outs = self.engine(*arrays, dims=dims or None)
        tree = self.exported.out_tree
        return outs[0] if tree.kind == "leaf" else _pytree.unflatten(tree, outs)

    @property
    def engines(self) -> list[Any]:
        """The one `shapevm.jit.JitEngine` that runs the calls (as `Jitted.engines`)."""
        return [self.engine]

    def jit_info(self) -> list[dict[str, Any]]:
        return self.engine.info()

    def jit_stats(self) -> dict[str, Any]:
        """This function's counters (as `shapevm.Jitted.jit_stats`): calls, compiled_calls,
        compiles, failures, evictions...

        >>> import numpy as np, shapevm as sv
        >>> b, = sv.symbolic_shape("b")
        >>> exp = sv.export(sv.jit(lambda x: x + 1.0))(sv.ShapeDtypeStruct((b, 4), np.float32))
        >>> fast = exp.jit(background=False, hot_threshold=1)
        >>> for _ in range(3):
        ...     y = fast(np.ones((2, 4), np.float32))
        >>> fast.jit_stats()["calls"], fast.jit_stats()["compiled_calls"]
        (3, 3)
        """
        return self.engine.counters.as_dict()

    def wait(self, timeout: float | None = None) -> bool:
        return self.engine.wait(timeout)

    def __repr__(self) -> str:
        return f"<jit of {self.exported!r}>"


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _aval(a: ShapeDtypeStruct) -> str:
    from shapevm.ops import DType

    return f"{DType.from_numpy(a.dtype)}[{', '.join(str(d) for d in a.shape)}]"


def _leaf_names(tree: _pytree.TreeDef, kinds: Sequence[LeafKind]) -> list[str]:
    return [f"args{p}" for p in _paths(tree, "")]


def _paths(td: _pytree.TreeDef, prefix: str) -> list[str]:
    if td.kind == "leaf":
        return [prefix]
    if td.kind == "none":
        return []
    out: list[str] = []
    keys = td.keys if td.kind == "dict" else range(len(td.children))
    for k, child in zip(keys, td.children, strict=True):
        out += _paths(child, f"{prefix}[{k!r}]")
    return out


def _tree_to_json(td: _pytree.TreeDef) -> Any:
    if td.kind in ("leaf", "none"):
        return td.kind
    out: dict[str, Any] = {"kind": td.kind, "children": [_tree_to_json(c) for c in td.children]}
    if td.kind == "dict":
        if not all(isinstance(k, str) for k in td.keys):
            raise TypeError("exported functions need dict arguments with string keys")
        out["keys"] = list(td.keys)
    return out


def _tree_from_json(obj: Any, depth: int = 0) -> _pytree.TreeDef:
    if depth > 64:
        raise ValueError("tree is nested too deeply")
    if obj in ("leaf", "none"):
        return _pytree.TreeDef(obj)
    if not isinstance(obj, dict) or obj.get("kind") not in ("tuple", "list", "dict"):
        raise ValueError(f"bad tree node {obj!r:.60}")
    children = tuple(_tree_from_json(c, depth + 1) for c in obj["children"])
    keys = tuple(obj.get("keys", ()))
    if obj["kind"] == "dict" and (
        len(keys) != len(children) or not all(isinstance(k, str) for k in keys)
    ):
        raise ValueError("bad dict node")
    return _pytree.TreeDef(obj["kind"], children, keys)


def export(jitted: Jitted | Callable[..., Any]) -> Callable[..., Exported]:
    """``export(jit(f))(*arg_specs)``: trace ``f`` once for the specifications.

    Each argument is a pytree of `ShapeDtypeStruct` (symbolic dimensions allowed), concrete
    arrays (their shapes become static), or a symbolic dimension: a dimension variable the
    caller passes as an integer. Arguments at ``static_argnums`` are baked in.
    """
    from shapevm.frontend.jit import Jitted

    jit_obj = jitted if isinstance(jitted, Jitted) else Jitted(jitted)

    def do_export(*args: Any) -> Exported:
        static: dict[int, Any] = {}
        dynamic: list[Any] = []
        for i, a in enumerate(args):
            if i in jit_obj.static_argnums and not isinstance(a, DimExpr):
                static[i] = a
            else:
                dynamic.append(a)
        names = jit_obj.leaf_names(args)
        traced = trace(jit_obj.fun, dynamic, static, jit_obj.name, names)
        return Exported._from_traced(traced, names)

    return do_export


def deserialize(data: bytes | bytearray | memoryview) -> Exported:
    """The `Exported` of ``Exported.serialize()`` bytes (verified before use)."""
    return Exported.from_program(_from_bytes(data, verify=False))


def load(path: str | os.PathLike[str]) -> Exported:
    """The `Exported` saved at ``path`` (memory-mapped, verified before use)."""
    return Exported.from_program(_from_file(path, verify=False))
