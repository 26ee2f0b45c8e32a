"""What a debug session runs: the launch arguments, the program loaded and verified, its
inputs bound, the plan it steps through, and its text form with a line per instruction.

Every problem with the launch arguments raises `LaunchError` with the loader's, verifier's
or binder's own message, which the adapter returns as the ``launch`` request's error.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shapevm.bytecode.errors import (
    BytecodeFormatError,
    BytecodeSyntaxError,
    VerifyError,
    format_message,
)
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.printer import function_lines
from shapevm.bytecode.program import Instr, LoadConst, TensorType
from shapevm.bytecode.verify import verify
from shapevm.frontend.export import Exported
from shapevm.runtime.binding import InputCountError, InputDTypeError
from shapevm.runtime.interpreter import Plan
from shapevm.shapes import ShapeError
from shapevm.tools.run import random_array


class LaunchError(ValueError):
    """The launch arguments cannot start a session; the message says why and how to fix."""


@dataclass
class LaunchArgs:
    """The ``launch`` request's arguments (``docs/debugger.md``)."""

    program: str
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dims: dict[str, int] = field(default_factory=dict)
    inputs: str | None = None
    seed: int = 0
    stop_on_entry: bool = True
    jit: bool = False

    @classmethod
    def parse(cls, args: Mapping[str, Any]) -> LaunchArgs:
        program = args.get("program")
        if not isinstance(program, str) or not program:
            raise _bad(
                "program", "the path of a .svbc file (or a text-form bytecode file)", program
            )
        shapes = _mapping(args, "shapes", _shape, '{"x": [3, 256]}')
        dims = _mapping(args, "dims", _int, '{"n": 8}')
        inputs = args.get("inputs")
        if inputs is not None and not isinstance(inputs, str):
            raise _bad("inputs", "the path of an .npz file", inputs)
        seed = args.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise _bad("seed", "an integer >= 0", seed)
        flags = {}
        for name, default in (("stopOnEntry", True), ("jit", False)):
            value = args.get(name, default)
            if not isinstance(value, bool):
                raise _bad(name, "true or false", value)
            flags[name] = value
        base = os.path.dirname(os.path.abspath(program))
        if inputs is not None and not os.path.isabs(inputs):
            inputs = os.path.join(base, inputs)
        return cls(program, shapes, dims, inputs, seed, flags["stopOnEntry"], flags["jit"])


def _bad(name: str, expected: str, found: Any) -> LaunchError:
    return LaunchError(
        format_message(
            f"bad launch argument {name!r}",
            expected=expected,
            found="nothing" if found is None else repr(found),
            fix=f"set {name!r} in the launch configuration",
        )
    )


def _mapping(args: Mapping[str, Any], name: str, conv: Any, example: str) -> dict[str, Any]:
    value = args.get(name) or {}
    if not isinstance(value, dict):
        raise _bad(name, f"an object such as {example}", value)
    try:
        return {str(k): conv(v) for k, v in value.items()}
    except (TypeError, ValueError):
        raise _bad(name, f"an object such as {example}", value) from None


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(v)
    return v


def _shape(v: Any) -> tuple[int, ...]:
    if isinstance(v, str):
        v = [int(d) for d in v.replace("x", ",").split(",") if d.strip()]
    if not isinstance(v, list):
        raise ValueError(v)
    return tuple(_int(d) for d in v)


def load_program(path: str) -> Exported:
    """The program at ``path``, verified: a binary ``.svbc`` file, a text-form file, or an
    ``.onnx`` model when `shapevm.onnx` is available."""
    if not os.path.isfile(path):
        raise LaunchError(
            format_message(
                f"no program file {path!r}",
                expected="the path of a .svbc file, absolute or relative to the workspace",
                fix="set 'program' in the launch configuration",
            )
        )
    if path.lower().endswith(".onnx"):
        return _load_onnx(path)
    from shapevm.tools.dis import read_any

    try:
        program, _ = read_any(path)
        verify(program)
        return Exported.from_program(program)
    except OSError as exc:
        raise LaunchError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (BytecodeFormatError, BytecodeSyntaxError, VerifyError) as exc:
        raise LaunchError(f"{path}: {type(exc).__name__}: {exc}") from None


def _load_onnx(path: str) -> Exported:
    if importlib.util.find_spec("shapevm.onnx") is None:
        raise LaunchError(
            format_message(
                f"cannot debug {path}: this shapevm has no ONNX importer (shapevm.onnx)",
                expected="a .svbc file",
                fix="upgrade shapevm to a version with shapevm.onnx, or export the model "
                "to a .svbc file first",
            )
        )
    try:
        import shapevm.onnx as sonnx  # type: ignore[import-not-found,unused-ignore]

        exported: Exported = sonnx.load(path)
    except ImportError as exc:  # the importer's own dependency (the onnx package) is missing
        raise LaunchError(f"cannot debug {path}: {exc}") from None
    except (OSError, ValueError) as exc:  # unreadable, corrupt or unsupported model
        raise LaunchError(f"{path}: {type(exc).__name__}: {exc}") from None
    return exported


class Target:
    """The loaded program, its bound inputs and the plan a session steps through."""

    def __init__(self, args: LaunchArgs) -> None:
        self.args = args
        self.exp = load_program(args.program)
        self.executable = self.exp.executable
        self.fn = self.executable.fn
        self.arrays = self._inputs()
        try:
            converted = self.executable.binder.convert(self.arrays)
            self.env = dict(self.executable.binder.bind(converted, args.dims or None))
        except (ShapeError, InputDTypeError, InputCountError, TypeError, ValueError) as exc:
            raise LaunchError(f"the inputs do not fit @{self.fn.name}: {exc}") from None
        self.arrays = list(converted)
        self.lines = function_lines(self.fn, self.exp.program)
        self.text = "\n".join(text for _, text in self.lines) + "\n"
        self.instrs: list[Instr] = [instr for _, _, instr in self.fn.instructions()]
        self.pc_of = {id(instr): pc for pc, instr in enumerate(self.instrs)}
        self.line_of = {pc: n + 1 for n, (pc, _) in enumerate(self.lines) if pc is not None}
        self.types = self._types()
        self.plan, self.compiled_note = self._plan()
        self.stops = sorted({self.pc_of[id(i)] for i in self.plan.stops() if id(i) in self.pc_of})

    # -- inputs -------------------------------------------------------------------------------
    def _inputs(self) -> list[Any]:
        exp, args = self.exp, self.args
        names = [n for n, k in zip(exp._arg_names, exp.leaf_kinds, strict=True) if k.is_array]
        given = _npz(args.inputs, names) if args.inputs else {}
        unknown = sorted(set(args.shapes) - set(names))
        if unknown:
            raise LaunchError(
                format_message(
                    f"'shapes' names {', '.join(map(repr, unknown))}, not an argument",
                    expected=f"shapes of: {', '.join(names)}",
                    found=", ".join(args.shapes),
                )
            )
        rng = np.random.default_rng(args.seed)
        arrays = []
        for name, aval in zip(names, exp.in_avals, strict=True):
            if name in given:
                arrays.append(given[name])
                continue
            shape = args.shapes.get(name)
            if shape is None:
                if not all(isinstance(d, int) for d in aval.shape):
                    dims = ", ".join(str(d) for d in aval.shape)
                    raise LaunchError(
                        format_message(
                            f"argument {name!r} has the symbolic shape ({dims})",
                            expected=f'its shape in "shapes", e.g. {{"{name}": [...]}}, or '
                            'its value in "inputs" (an .npz file)',
                        )
                    )
                shape = tuple(d for d in aval.shape if isinstance(d, int))
            arrays.append(random_array(rng, shape, aval.dtype))
        return arrays

    # -- the plan -----------------------------------------------------------------------------
    def _plan(self) -> tuple[Plan, str]:
        if not self.args.jit:
            return self.executable.plan_for(self.env), "interpreted"
        from shapevm.tools.debug.compiled import compiled_plan

        return compiled_plan(self.executable, self.arrays, self.env)

    def _types(self) -> dict[Reg, TensorType]:
        types: dict[Reg, TensorType] = {p.reg: p.type for p in self.fn.params}
        for instr in self.instrs:
            for reg, t in zip(instr.defs(), instr.declared_types(), strict=False):
                if t is not None:
                    types[reg] = t
            if isinstance(instr, LoadConst) and instr.type is None:
                types[instr.out] = self.exp.program.constants[instr.const].type
        return types

    # -- the text form ------------------------------------------------------------------------
    def stop_at_or_after(self, pc: int) -> int | None:
        """The first instruction at or after ``pc`` that the session can stop at."""
        return next((s for s in self.stops if s >= pc), None)

    def pc_at_line(self, line: int) -> int | None:
        """The instruction on ``line`` (1-based) or, for a line of no instruction, the
        next one."""
        for n in range(max(line, 1) - 1, len(self.lines)):
            pc = self.lines[n][0]
            if pc is not None:
                return pc
        return None


def _npz(path: str, names: list[str]) -> dict[str, Any]:
    try:
        with np.load(path, allow_pickle=False) as data:  # loading never runs code
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except (OSError, ValueError) as exc:
        raise LaunchError(
            format_message(
                f"cannot read the inputs {path!r}: {exc}",
                expected="an .npz file (numpy.savez) with one array per argument",
            )
        ) from None
    unknown = sorted(set(arrays) - set(names))
    if unknown:
        raise LaunchError(
            format_message(
                f"the inputs {path!r} hold arrays the program does not take",
                expected=f"arrays named {', '.join(names)}",
                found=", ".join(sorted(arrays)),
            )
        )
    return arrays
