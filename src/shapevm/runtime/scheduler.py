"""The op scheduler: which kernel variant runs an op, chosen per call from shapes, dtype, device.

Every op of the op table has the variant ``reference`` (the table's NumPy kernel) for each
dtype its dtype rule accepts; some ops have faster variants for some shapes (``conv2d``:
``im2col_gemm``, ``pointwise_1x1``, ``depthwise``, ``direct``). The *capability db* says
which variants each device has and for which dtypes. It prints (`dump_capability_db`) and
takes JSON patches (`load_capability_patch`), e.g. to switch off a variant that misbehaves on
some machine. `choose_kernel` picks the cheapest variant in the db that applies.

>>> from shapevm.ops import DType
>>> attrs = {"stride": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1}
>>> choose_kernel("conv2d", DType.F32, [(8, 64, 56, 56), (32, 64, 1, 1)], attrs).name
'pointwise_1x1'
>>> choose_kernel("add", DType.I32, [(3,), (3,)], {}).name
'reference'

The dtype that keys the choice is `kernel_dtype`: the first non-bool operand dtype (so
``where`` and ``mask_select`` are keyed by their values, not their bool condition), bool for
all-bool operands, and the result dtype for ops without operands (``full``, ``iota``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TextIO, TypeAlias

from shapevm.bytecode.program import DEVICES
from shapevm.ops import (
    AttrKind,
    DType,
    OpFlag,
    OpInfo,
    ShapeRuleError,
    all_ops,
    get_op,
    suggest_op,
)
from shapevm.ops.core import Kernel
from shapevm.runtime import kernels_cpu as cpu
from shapevm.runtime.errors import UnsupportedKernelError

Shapes: TypeAlias = "tuple[tuple[int, ...], ...]"
Attrs: TypeAlias = "Mapping[str, Any]"
Applies: TypeAlias = "Callable[[Shapes, Attrs], bool]"
Cost: TypeAlias = "Callable[[Shapes, Attrs], float]"
Db: TypeAlias = "dict[str, dict[str, dict[str, frozenset[DType]]]]"

REFERENCE: Final = "reference"
REFERENCE_COST: Final = 1e6  # "seconds": the reference runs when nothing faster applies


def always(shapes: Shapes, attrs: Attrs) -> bool:
    """The ``applies`` of a variant that handles every shape."""
    return True


@dataclass(frozen=True, slots=True)
class KernelVariant:
    """One implementation of an op.

    ``fn(args, attrs)`` takes and returns what the op table's kernel does; ``applies(shapes,
    attrs)`` says whether it handles these concrete operand shapes; ``cost`` estimates the
    seconds a call takes (a constant acts as a fixed priority, lower first).
    """

    op: str
    name: str
    fn: Kernel
    dtypes: frozenset[DType]
    applies: Applies = always
    cost: Cost | float = REFERENCE_COST
    doc: str = ""

    def estimate(self, shapes: Shapes, attrs: Attrs) -> float:
        return float(self.cost) if isinstance(self.cost, (int, float)) else self.cost(shapes, attrs)


_lock = threading.RLock()
_variants: dict[str, dict[str, KernelVariant]] = {}  # op -> variant name -> variant
_defaults: Db = {}  # what registration gave each device; reset_capability_db returns to it
_db: Db = {}  # replaced whole on every change, so readers need no lock
_synced = 0  # leading ops of the op table that have their reference variant
_generation = [0]  # bumped by every change of the db: compiled code checks it per call


def generation() -> int:
    """A number that changes whenever the capability db does (patch, reset, new variant)."""
    return _generation[0]


def _never(shapes: Shapes, attrs: Attrs) -> bool:
    return False


NATIVE_DOCS: Final = {
    "native_dense": "the native tier: a matrix product against a constant, weights packed once",
    "native_matmul": "the native tier: a batched product of two computed tensors (float32; "
    "int32 and int64 exactly)",
    "native_chain": "the native tier: fused elementwise chains and trailing reductions",
    "native_rowop": "the native tier: norms and softmax over the last axis, one pass",
    "native_view": "the native tier: layout ops as views and copies",
    "native_conv": "the native tier: convolution on the packed micro-kernel",
    "native_pool": "the native tier: pooling",
    "native_index": "the native tier: argmax, argmin, argsort and cumsum along an axis",
}
"""The native tier's kernels, as variants of the ops they run (on ``cpu``). The interpreter
never picks them (they apply to no call of its own); the JIT's lowerings use one only while
the capability db lists it for the op and dtype (`native_enabled`), so a patch that removes
one takes effect at the next call of every function, compiled or not."""


def native_names(info: OpInfo) -> list[str]:
    """The native tier's kernels of ``info``'s op (names of `NATIVE_DOCS`), listed or not."""
    if info.name == "matmul":
        return ["native_dense", "native_matmul"]
    if info.name == "conv2d":
        return ["native_conv"]
    if info.name in ("max_pool2d", "avg_pool2d"):
        return ["native_pool"]
    if info.name in ("argmax", "argmin", "cumsum", "argsort"):
        return ["native_index"]
    if OpFlag.FUSIBLE in info.flags:
        return (
            ["native_chain", "native_rowop"] if OpFlag.REDUCTION in info.flags else ["native_chain"]
        )
    if info.name in (
        "transpose",
        "reshape",
        "slice",
        "flip",
        "broadcast_to",
        "concatenate",
        "pad",
        "full",
        "iota",
        "take",
        "take_along_axis",
        "dim_value",
    ):
        return ["native_view"]
    return []


def native_enabled(op: str, name: str, dtype: DType = DType.F32, device: str = "cpu") -> bool:
    """Whether the capability db lists the native kernel ``name`` of ``op`` for ``dtype``."""
    _sync_op(op)
    return dtype in _db.get(device, {}).get(op, {}).get(name, frozenset())


def native_registered(op: str, name: str, dtype: DType = DType.F32, device: str = "cpu") -> bool:
    """Whether the native kernel ``name`` of ``op`` exists for ``dtype`` as registered,
    whatever a capability patch has removed since (`native_enabled` says what is listed
    now)."""
    _sync_op(op)
    return dtype in _defaults.get(device, {}).get(op, {}).get(name, frozenset())


def kernel_dtype(operands: Sequence[DType | None], results: Sequence[DType] = ()) -> DType:
    """The dtype that keys a kernel choice (see the module doc)."""
    typed = [d for d in operands if d is not None]
    for d in typed:
        if d is not DType.BOOL:
            return d
    if typed:
        return typed[0]
    if results:
        return results[0]
    raise ValueError("a kernel dtype needs a typed operand or a result dtype")


_SUPPORTED: dict[Any, frozenset[DType]] = {}


def supported_dtypes(info: OpInfo) -> frozenset[DType]:
    """The kernel dtypes the op's dtype rule accepts (probing operand patterns per dtype);
    ops sharing a dtype rule, arity and attributes share the answer."""
    try:
        key: Any = (info.dtype_rule, info.min_arity, tuple(sorted(info.filled_attrs({}).items())))
        hash(key)
    except TypeError:
        key = None
    if key is not None and key in _SUPPORTED:
        return _SUPPORTED[key]
    out = _probe_dtypes(info)
    if key is not None:
        _SUPPORTED[key] = out
    return out


def _probe_dtypes(info: OpInfo) -> frozenset[DType]:
    out: set[DType] = set()
    n = info.min_arity
    for d in DType:
        attrs = _probe_attrs(info, d)
        patterns = [[d] * n]
        if n > 1:  # a bool condition or mask beside the values (where, mask_select)
            patterns += [[DType.BOOL] + [d] * (n - 1), [d] + [DType.BOOL] * (n - 1)]
            # integer indices after the values (take, gather_nd, scatter_nd)
            patterns.append([d, DType.I64] + [d] * (n - 2))
        for operands in patterns:
            try:
                info.dtype_rule(operands, attrs)
            except ShapeRuleError:
                continue
            out.add(d)
            break
    return frozenset(out)


_DUMMY: dict[AttrKind, Any] = {
    AttrKind.INT: 0,
    AttrKind.FLOAT: 0.0,
    AttrKind.BOOL: False,
    AttrKind.STR: "",
    AttrKind.INTS: (),
    AttrKind.DIMS: (),
}


def _probe_attrs(info: OpInfo, dtype: DType) -> dict[str, Any]:
    attrs: dict[str, Any] = dict(info.filled_attrs({}))
    for spec in info.attrs:
        if spec.kind is AttrKind.DTYPE:
            attrs[spec.name] = dtype.value
        elif spec.name not in attrs:
            attrs[spec.name] = _DUMMY[spec.kind]
    return attrs


def _copy(db: Db) -> Db:
    """A copy to change and then swap in; the frozensets of dtypes are shared."""
    return {device: {op: dict(v) for op, v in ops.items()} for device, ops in db.items()}


def _add(db: Db, variants: Sequence[KernelVariant], devices: Sequence[str]) -> Db:
    new = _copy(db)
    for variant in variants:
        for device in devices:
            new.setdefault(device, {}).setdefault(variant.op, {})[variant.name] = variant.dtypes
    return new


_REFERENCE_DOC = "the op table's NumPy kernel"


def int_comparison(info: OpInfo) -> bool:
    """A comparison of two operands (the op table's ``COMPARISON`` and ``BINARY`` flags):
    with `cast`, what a fused chain runs on int32/int64 operands too, since the tile
    interpreter reads those as float32 lanes, exact for a cast and for comparisons with a
    scalar below 2**24 (the chain lowering takes no other use)."""
    return OpFlag.COMPARISON in info.flags and OpFlag.BINARY in info.flags


INT_ARITHMETIC: Final = (
    "add", "sub", "mul", "maximum", "minimum", "cast", "floordiv", "mod", "where", "abs", "neg",
)  # fmt: skip
"""Ops the native tier computes exactly on int32/int64 tensors (`lower.lower_int_arith`);
a fused chain never takes them on integers (`chains.ints_stay_exact`)."""
INT_REDUCTIONS: Final = ("sum", "max", "min", "prod")
"""Reductions the native tier computes exactly on int32/int64 tensors
(`lower.lower_int_reduce`)."""
_INT_READERS = frozenset((DType.F32, DType.BOOL, DType.I32, DType.I64))
_SCANNED = frozenset((DType.F32, DType.F64, DType.I32, DType.I64))  # the scan kernel's
_SORTED = _SCANNED | {DType.I16, DType.I8, DType.U8, DType.BOOL}  # argsort's, argmax's
_CAST_FROM = _INT_READERS | {DType.F64, DType.F16, DType.U8, DType.I8, DType.I16}  # cast kernel's
_referenced: set[str] = set()  # ops that have their reference variant


def _reference_variants(infos: Sequence[OpInfo]) -> None:
    """Give ``infos`` their reference variant (those that have none yet); under `_lock`."""
    global _db, _defaults
    refs = [
        KernelVariant(info.name, REFERENCE, info.kernel, supported_dtypes(info), doc=_REFERENCE_DOC)
        for info in infos
        if info.name not in _referenced
    ]
    natives = []
    for ref in refs:
        _variants.setdefault(ref.op, {})[REFERENCE] = ref
        _referenced.add(ref.op)
        info = get_op(ref.op)
        assert info is not None
        for name in native_names(info):
            dtypes = (
                ref.dtypes
                if name == "native_view"
                else ref.dtypes & _CAST_FROM
                if ref.op == "cast"
                else ref.dtypes & _INT_READERS
                if name == "native_chain"
                and (ref.op in INT_ARITHMETIC or ref.op in INT_REDUCTIONS or int_comparison(info))
                else ref.dtypes & _SCANNED
                if ref.op == "cumsum"
                else ref.dtypes & _SORTED
                if ref.op in ("argsort", "argmax", "argmin")
                else ref.dtypes & {DType.F32, DType.BOOL, DType.I32, DType.I64}
                if ref.op == "matmul" and name == "native_matmul"
                else ref.dtypes & {DType.F32, DType.BOOL}
            )
            variant = KernelVariant(ref.op, name, ref.fn, dtypes, _never, doc=NATIVE_DOCS[name])
            _variants[ref.op][name] = variant
            natives.append(variant)
    if refs:
        _defaults = _add(_add(_defaults, refs, DEVICES), natives, ("cpu",))
        _db = _add(_add(_db, refs, DEVICES), natives, ("cpu",))


def _sync() -> None:
    """Give ops registered since the last call their reference variant (on first use, not at
    import, so that importing the runtime stays cheap)."""
    global _synced
    if len(all_ops()) == _synced:
        return
    with _lock:
        ops = all_ops()
        _reference_variants(ops[_synced:])
        _synced = len(ops)


def _sync_op(op: str) -> None:
    """The reference variant of ``op`` alone: choosing its kernel needs no other op's (a
    process that runs a few ops does not work out the dtypes of the whole table)."""
    if op in _referenced:
        return
    info = get_op(op)
    if info is None:
        return
    with _lock:
        _reference_variants([info])


def shape_independent(op: str, dtype: DType, device: str = "cpu") -> KernelVariant | None:
    """The variant `choose_kernel` picks for ``op`` whatever the shapes, if there is one:
    exactly one variant has this dtype on the device and it applies to every shape. Plans
    for new shapes then skip the choice."""
    _sync_op(op)
    found = [
        _variants[op][name]
        for name, dtypes in _db.get(device, {}).get(op, {}).items()
        if dtype in dtypes
    ]
    if len(found) == 1 and found[0].applies is always:
        return found[0]
    return None


def register_variant(variant: KernelVariant, devices: Sequence[str] = DEVICES) -> KernelVariant:
    """Add a variant of an op of the op table, present on ``devices`` for its dtypes."""
    global _db, _defaults
    if get_op(variant.op) is None:
        close = suggest_op(variant.op)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise ValueError(f"cannot register a variant of {variant.op!r}: no such op{hint}")
    if variant.name == REFERENCE:
        raise ValueError(f"the variant name {REFERENCE!r} is the op table's kernel; pick another")
    with _lock:
        if variant.name in _variants.get(variant.op, {}):
            raise ValueError(f"variant {variant.name!r} of {variant.op} is already registered")
        _variants.setdefault(variant.op, {})[variant.name] = variant
        _defaults = _add(_defaults, [variant], devices)
        _db = _add(_db, [variant], devices)
    return variant


def choose_kernel(
    op: str,
    dtype: DType | str,
    shapes: Sequence[Sequence[int]],
    attrs: Attrs,
    device: str = "cpu",
) -> KernelVariant:
    """The cheapest variant in the capability db that runs ``op`` here.

    ``shapes`` are the concrete operand shapes (``()`` for scalars), ``attrs`` the filled
    attributes with ``DIMS`` evaluated, ``dtype`` the `kernel_dtype`. Raises
    `UnsupportedKernelError` when no variant has the dtype or applies to the shapes.
    """
    _sync_op(op)
    dt = dtype if isinstance(dtype, DType) else DType.parse(dtype)
    concrete: Shapes = tuple(tuple(int(d) for d in s) for s in shapes)
    listed = _db.get(device, {}).get(op, {})
    best: KernelVariant | None = None
    best_cost = 0.0
    for name, dtypes in listed.items():
        variant = _variants[op][name]
        if dt in dtypes and variant.applies(concrete, attrs):
            cost = variant.estimate(concrete, attrs)
            if best is None or cost < best_cost:
                best, best_cost = variant, cost
    if best is None:
        _sync()  # the message lists what every device has
        raise _unsupported(op, dt, device, concrete)
    return best


def _names(dtypes: frozenset[DType]) -> list[str]:
    return [d.value for d in DType if d in dtypes]


def _unsupported(op: str, dt: DType, device: str, shapes: Shapes) -> UnsupportedKernelError:
    listed = _db.get(device, {}).get(op, {})
    available = {name: _names(listed[name]) for name in sorted(listed)}

    def error(what: str, expected: str, found: str, fix: str) -> UnsupportedKernelError:
        return UnsupportedKernelError(
            op, dt.value, device, available, what=what, expected=expected, found=found, fix=fix
        )

    if device not in _db:
        return error(
            f"no kernels for device {device!r}",
            "one of the devices " + ", ".join(sorted(_db)),
            device,
            "run on cpu, or register variants for the device (register_variant(..., devices=))",
        )
    if get_op(op) is None:
        close = suggest_op(op)
        return error(
            f"no op {op!r} in the op table",
            "an op of shapevm.ops.all_ops()",
            op,
            f"did you mean {close!r}?" if close else "check the op name",
        )
    text = "; ".join(f"{n} [{', '.join(d) or 'no dtypes'}]" for n, d in available.items())
    found = f"{dt}; variants of {op} on {device}: {text or 'none'}"
    if not listed:
        return error(
            f"no variant of {op} on {device}: the capability db lists none",
            f"at least the variant {REFERENCE!r}",
            found,
            "reset_capability_db(), or a patch that lists dtypes for a variant: "
            + json.dumps({device: {op: {REFERENCE: [dt.value]}}}),
        )
    # the native tier's variants never run a call of the interpreter (`_never`)
    runnable = [dts for name, dts in listed.items() if name not in NATIVE_DOCS]
    if not any(dt in dts for dts in runnable):
        return error(
            f"no variant of {op} on {device} takes {dt}",
            "one of " + ", ".join(_names(frozenset().union(*runnable))),
            found,
            _dtype_fix(op, dt, device),
        )
    return error(
        f"no variant of {op} on {device} applies to these shapes",
        "a variant for " + ", ".join(str(list(s)) for s in shapes),
        found,
        "enable a variant for all shapes (reference) with reset_capability_db() or a patch",
    )


def _dtype_fix(op: str, dt: DType, device: str) -> str:
    """Cast to a listed dtype, or, if a variant implements ``dt`` but the db disables it,
    the patch that turns it on."""
    listed = {n: d for n, d in _db[device][op].items() if n not in NATIVE_DOCS}
    fixable = [
        n
        for n, v in _variants[op].items()
        if n not in NATIVE_DOCS and dt in v.dtypes and dt not in listed.get(n, ())
    ]
    targets = _names(frozenset().union(*listed.values()))
    target = next((t for t in ("f32", "i64") if t in targets), targets[0] if targets else None)
    fix = f"cast the operands to {target or 'another dtype'} (op cast)"
    if fixable:
        name = fixable[0]
        dtypes = _names(listed.get(name, frozenset()) | {dt})
        fix += ", or enable it: load_capability_patch with " + json.dumps(
            {device: {op: {name: dtypes}}}
        )
    return fix


def _as_json(db: Db) -> dict[str, dict[str, dict[str, list[str]]]]:
    return {
        device: {
            op: {name: _names(db[device][op][name]) for name in sorted(db[device][op])}
            for op in sorted(db[device])
        }
        for device in sorted(db)
    }


def dump_capability_db(file: TextIO | None = None) -> dict[str, dict[str, dict[str, list[str]]]]:
    """Print the capability db (device, op, variant, dtypes) and return it as plain JSON data."""
    _sync()
    table = _as_json(_db)
    out = sys.stdout if file is None else file
    everything = [d.value for d in DType]
    print("capability db: device / op / variant: dtypes", file=out)
    for device, ops in table.items():
        print(f"{device}:", file=out)
        width = max((len(op) for op in ops), default=0)
        vwidth = max((len(n) for variants in ops.values() for n in variants), default=0)
        for op, variants in ops.items():
            for i, (name, dtypes) in enumerate(variants.items()):
                text = "all dtypes" if dtypes == everything else ", ".join(dtypes) or "none"
                print(f"  {op if i == 0 else '':<{width}}  {name:<{vwidth}}  {text}", file=out)
    return table


def load_capability_patch(
    patch: str | os.PathLike[str] | Mapping[str, Any],
) -> dict[str, dict[str, dict[str, list[str]]]]:
    """Apply a JSON patch (a file, or the parsed object) to the capability db; return the db.

    ``{"cpu": {"conv2d": {"im2col_gemm": null, "direct": ["f32"]}, "sin": null}}`` removes
    ``im2col_gemm``, sets the dtypes of ``direct`` and removes every variant of ``sin``.
    Unknown devices, ops, variants or dtypes raise ``ValueError`` naming them; a patch
    applies whole or not at all.
    """
    global _db
    if isinstance(patch, Mapping):
        source, data = "capability patch", patch
    else:
        source = str(patch)
        try:
            with open(patch, encoding="utf-8") as f:
                data = json.loads(f.read())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{source}: not JSON: {exc}") from None
    with _lock:
        _sync()
        _db = _patched(_copy(_db), data, source)
        _generation[0] += 1
    return _as_json(_db)


def _patched(db: Db, data: Any, source: str) -> Db:
    if not isinstance(data, Mapping):
        raise ValueError(f"{source}: a patch is a JSON object of devices, found {data!r}")
    for device, ops in data.items():
        if device not in _defaults:
            known = ", ".join(sorted(_defaults))
            raise ValueError(f"{source}: unknown device {device!r}; known devices: {known}")
        if not isinstance(ops, Mapping):
            raise ValueError(f"{source}: {device}: expected an object of ops, found {ops!r}")
        for op, variants in ops.items():
            _patch_op(db.setdefault(device, {}), device, op, variants, f"{source}: {device}.{op}")
    return db


def _patch_op(
    db: dict[str, dict[str, frozenset[DType]]], device: str, op: str, variants: Any, where: str
) -> None:
    if get_op(op) is None:
        close = suggest_op(op)
        raise ValueError(
            f"{where}: unknown op {op!r}" + (f" (did you mean {close!r}?)" if close else "")
        )
    if variants is None:
        db.pop(op, None)
        return
    if not isinstance(variants, Mapping):
        raise ValueError(f"{where}: expected an object of variants or null, found {variants!r}")
    for name, dtypes in variants.items():
        variant = _variants.get(op, {}).get(name)
        if variant is None or name not in _defaults[device].get(op, {}):
            known = ", ".join(sorted(_defaults[device].get(op, {})))
            raise ValueError(f"{where}: unknown variant {name!r}; variants on {device}: {known}")
        if dtypes is None:
            db.get(op, {}).pop(name, None)
            continue
        if not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes):
            raise ValueError(f"{where}.{name}: expected a list of dtype names or null")
        parsed = set()
        for text in dtypes:
            try:
                parsed.add(DType.parse(text))
            except ValueError as exc:
                raise ValueError(f"{where}.{name}: {exc}") from None
        extra = ", ".join(_names(frozenset(parsed - variant.dtypes)))
        if extra:
            has = ", ".join(_names(variant.dtypes))
            raise ValueError(
                f"{where}.{name}: the variant does not implement {extra}; it has {has}"
            )
        db.setdefault(op, {})[name] = frozenset(parsed)


def reset_capability_db() -> None:
    """Forget every patch: each device has again the variants registered for it."""
    global _db
    with _lock:
        _sync()
        _db = _copy(_defaults)
        _generation[0] += 1


_FLOATS: Final = frozenset({DType.F16, DType.F32, DType.F64})
_CONV2D: Final = (
    ("im2col_gemm", cpu.conv2d_im2col_gemm, always, cpu.im2col_gemm_cost,
     "windows as matrix columns, one GEMM per chunk of images"),
    ("pointwise_1x1", cpu.conv2d_pointwise, cpu.pointwise_applies, cpu.pointwise_cost,
     "1x1 kernel, stride 1, no padding, one group: one matmul"),
    ("depthwise", cpu.conv2d_depthwise, cpu.depthwise_applies, cpu.depthwise_cost,
     "groups == channels: a multiply-add per kernel tap on cached blocks"),
    ("direct", cpu.conv2d_direct, always, cpu.direct_cost,
     "a GEMM per kernel tap, accumulated: one tap of workspace"),
)  # fmt: skip
for _name, _fn, _applies, _cost, _doc in _CONV2D:
    register_variant(KernelVariant("conv2d", _name, _fn, _FLOATS, _applies, _cost, _doc))
