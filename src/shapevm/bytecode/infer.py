"""Symbolic type inference for the verifier: every register's dtype and symbolic shape.

Op shape rules come from the op table; the conditions they return are decided here with
the symbolic engine under the function's constraints. A relation the engine cannot decide
is an error that names the constraint that would make it provable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shapevm.bytecode.errors import Reporter, describe
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import (
    BindInputs,
    BranchIf,
    Dim,
    Function,
    Instr,
    LoadConst,
    OpCall,
    Program,
    Return,
    ShapeCompute,
    ShapePropagate,
    SpecDim,
    TensorCreate,
    TensorPhi,
    TensorResize,
    TensorType,
    format_scalar,
)
from shapevm.bytecode.shape_expr import Verdict, decide, evaluate_shape_expr, shape_expr_regs
from shapevm.bytecode.verify_flow import CFG
from shapevm.ops import (
    DYNAMIC,
    AttrKind,
    Condition,
    DType,
    Dynamic,
    RuleAttr,
    ShapeRuleError,
    SymDim,
    get_op,
    suggest_op,
)
from shapevm.shapes import DimExpr, SymbolicScope, symbolic_shape


@dataclass(frozen=True, slots=True)
class VType:
    """A register's type as the verifier knows it: dtype and symbolic dimensions."""

    dtype: DType
    shape: tuple[SymDim, ...]

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"


class BadDim(Exception):
    """A dimension text the symbolic engine rejects."""


class Inference:
    """Walks a function in reverse postorder and types every register it can.

    Problems go to the `Reporter`; an instruction whose operands are not typed (because
    of an earlier error) is skipped silently so one mistake gives one message.
    """

    def __init__(
        self,
        fn: Function,
        program: Program,
        scope: SymbolicScope,
        reporter: Reporter,
        cfg: CFG,
        created: dict[Reg, int],
    ) -> None:
        self.fn = fn
        self.program = program
        self.scope = scope
        self.rep = reporter
        self.cfg = cfg
        self.created = created
        self.types: dict[Reg, VType] = {}
        self.values: dict[Reg, SymDim] = {}
        self.var_uses: dict[str, int | None] = {}  # first instruction using each variable
        self._cache: dict[str, SymDim] = {}
        self._index: int | None = None
        self._phis: list[tuple[int, TensorPhi, str]] = []

    # dimensions and types ------------------------------------------------------------

    def dim(self, d: Dim) -> SymDim:
        if not isinstance(d, str):
            return d
        if d == "dynamic":
            return DYNAMIC
        if d not in self._cache:
            try:
                parsed = symbolic_shape(d, scope=self.scope)
            except Exception as exc:
                raise BadDim(f"{d!r}: {exc}") from None
            if len(parsed) != 1:
                raise BadDim(f"{d!r} is not one dimension")
            self._cache[d] = parsed[0]
        value = self._cache[d]
        if isinstance(value, DimExpr):
            for var in value.free_vars():
                self.var_uses.setdefault(var, self._index)
        return value

    def vtype(self, t: TensorType) -> VType:
        return VType(t.dtype, tuple(self.dim(d) for d in t.shape))

    def _declared(self, index: int, t: TensorType | None) -> VType | None:
        if t is None:
            return None
        try:
            return self.vtype(t)
        except BadDim as exc:
            self.rep.at(index, "type", f"bad dimension {exc}", found=str(t))
            return None

    # driver --------------------------------------------------------------------------

    def run(self, order: Sequence[int]) -> None:
        for block_no in order:
            block = self.fn.blocks[block_no]
            for offset, instr in enumerate(block.instrs):
                self._index = index = self.cfg.first_index[block_no] + offset
                handler = _HANDLERS.get(type(instr))
                if handler is not None:
                    handler(self, index, instr, block.label)
        for index, phi, label in self._phis:
            self._index = index
            self._check_phi(index, phi, label)

    def names(self, instr: Instr, operands: Sequence[Any]) -> list[str]:
        return [str(x) if isinstance(x, Reg) else format_scalar(x) for x in operands]

    def found(self, regs: Sequence[Any]) -> str:
        parts = [f"{r}: {self.types[r]}" for r in regs if isinstance(r, Reg) and r in self.types]
        return ", ".join(dict.fromkeys(parts))

    def check_condition(
        self, index: int, cond: Condition, names: Sequence[str], operands: Sequence[Any]
    ) -> None:
        verdict = decide(cond.lhs, cond.rel, cond.rhs)
        if verdict in (Verdict.HOLDS, Verdict.DEFERRED):
            return
        found = self.found(operands)
        expected = cond.expected.format(*names) + f"  ({cond.rhs})"
        if verdict is Verdict.FAILS:
            self.rep.at(index, "shape", cond.what, expected=expected, found=found, fix=cond.fix)
            return
        wanted = f"{cond.lhs} {cond.rel} {cond.rhs}"
        self.rep.at(
            index,
            "shape",
            f"cannot prove {cond.expected.format(*names)}: {cond.what}",
            expected=expected,
            found=found + f"; {wanted} is not provable under {self._constraints()}",
            fix=f"add the constraint '{wanted}' to @{self.fn.name} (where {wanted}), or "
            + (cond.fix or "use equal dimensions"),
        )

    def _constraints(self) -> str:
        if not self.fn.constraints:
            return "no constraints"
        return "the constraints " + ", ".join(self.fn.constraints)

    def mismatch(self, computed: VType, declared: VType) -> str | None:
        """Why ``computed`` may not have type ``declared`` (``dynamic`` declares anything).

        ``None`` when it fits; ``""`` when it provably does not; the relation that would
        need a constraint when the engine cannot decide; a note for data-dependent dims.
        """
        if computed.dtype != declared.dtype or len(computed.shape) != len(declared.shape):
            return ""
        for axis, (c, d) in enumerate(zip(computed.shape, declared.shape, strict=True)):
            if isinstance(d, Dynamic):
                continue
            if isinstance(c, Dynamic):
                return f"dimension {axis} is data-dependent; declare it dynamic"
            verdict = decide(c, "==", d)
            if verdict is Verdict.FAILS:
                return ""
            if verdict is Verdict.UNKNOWN:
                return f"{c} == {d}"
        return None

    def match(self, index: int, reg: Reg, computed: VType, declared: VType, source: str) -> None:
        """Report when ``computed`` does not fit the ``declared`` type of ``reg``."""
        note = self.mismatch(computed, declared)
        if note is None:
            return
        if "==" in note:
            what = f"cannot prove that {reg} has its declared type"
            fix = f"add the constraint '{note}' to @{self.fn.name}, or fix the declared type"
        else:
            what = f"declared type of {reg} differs from what {source} computes"
            fix = note or "fix the declared type or the operands"
        self.rep.at(
            index,
            "type",
            what,
            expected=f"{reg}: {computed}",
            found=f"{reg}: {declared}",
            fix=fix,
        )

    def set_type(self, index: int, reg: Reg, computed: VType, declared: TensorType | None) -> None:
        decl = self._declared(index, declared)
        source = describe(self.rep.instrs[index])
        if decl is not None:
            self.match(index, reg, computed, decl, source)
            self.types[reg] = decl
        else:
            self.types[reg] = computed

    def spec_shape(self, index: int, spec: Sequence[SpecDim]) -> tuple[SymDim, ...] | None:
        out: list[SymDim] = []
        for d in spec:
            if isinstance(d, Reg):
                if d not in self.values:
                    return None
                out.append(self.values[d])
            elif isinstance(d, int) and d < 0:
                self.rep.at(
                    index,
                    "shape",
                    f"negative dimension {d} in the shape spec",
                    expected="dimensions >= 0, shape registers or dynamic",
                    found=str(d),
                )
                return None
            else:
                out.append(d)
        return tuple(out)

    # handlers ------------------------------------------------------------------------

    def bind(self, index: int, instr: BindInputs, label: str) -> None:
        for reg, name in zip(instr.outs, instr.names, strict=False):
            try:
                self.values[reg] = self.dim(name)
            except BadDim as exc:
                self.rep.at(index, "signature", f"bad dimension variable {exc}")

    def propagate(self, index: int, instr: ShapePropagate, label: str) -> None:
        typ = self.types.get(instr.src)
        if typ is None:
            return
        if not 0 <= instr.axis < len(typ.shape):
            self.rep.at(
                index,
                "shape",
                f"axis {instr.axis} is out of range for {instr.src}",
                expected=f"0 <= axis < {len(typ.shape)}",
                found=f"{instr.src}: {typ}",
                fix="count axes from 0",
            )
            return
        self.values[instr.out] = typ.shape[instr.axis]

    def compute(self, index: int, instr: ShapeCompute, label: str) -> None:
        regs = list(shape_expr_regs(instr.expr))
        if any(r not in self.values for r in regs):
            return
        if any(isinstance(self.values[r], Dynamic) for r in regs):
            self.values[instr.out] = DYNAMIC
            return
        try:
            value: Any = evaluate_shape_expr(instr.expr, self.values)
        except ZeroDivisionError:
            self.rep.at(index, "shape", "division by zero", found=self._reg_values(regs))
            return
        except Exception as exc:
            self.rep.at(index, "shape", f"cannot compute: {exc}", found=self._reg_values(regs))
            return
        self.values[instr.out] = value

    def _reg_values(self, regs: Sequence[Reg]) -> str:
        return ", ".join(dict.fromkeys(f"{r} = {self.values[r]}" for r in regs))

    def create(self, index: int, instr: TensorCreate, label: str) -> None:
        shape = self.spec_shape(index, instr.spec)
        if shape is not None:
            self.types[instr.out] = VType(instr.dtype, shape)

    def load(self, index: int, instr: LoadConst, label: str) -> None:
        n = len(self.program.constants)
        if not 0 <= instr.const < n:
            self.rep.at(
                index,
                "const",
                f"constant k{instr.const} does not exist",
                expected=f"k0 to k{n - 1}" if n else "no LOAD_CONST: the pool is empty",
                found=f"k{instr.const}",
            )
            return
        const = self.program.constants[instr.const]
        computed = VType(const.dtype, tuple(int(d) for d in const.array.shape))
        self.set_type(index, instr.out, computed, instr.type)

    def call(self, index: int, instr: OpCall, label: str) -> None:
        info = get_op(instr.op)
        if info is None:
            close = suggest_op(instr.op)
            self.rep.at(
                index,
                "op",
                f"unknown op {instr.op!r}",
                expected="an op of the op table",
                found=instr.op,
                fix=f"did you mean {close!r}?" if close else "see shapevm.ops.all_ops()",
            )
            return
        if not info.accepts_arity(len(instr.ins)) or len(instr.outs) != info.num_outputs:
            self.rep.at(
                index,
                "arity",
                f"{info.name} takes {info.arity_text()} inputs and gives "
                f"{info.num_outputs} outputs",
                expected=f"{info.arity_text()} inputs, {info.num_outputs} outputs",
                found=f"{len(instr.ins)} inputs, {len(instr.outs)} outputs",
            )
            return
        names = [k for k, _ in instr.attrs]
        if len(set(names)) != len(names):
            twice = sorted({k for k in names if names.count(k) > 1})
            self.rep.at(
                index,
                "attribute",
                f"attribute {twice[0]!r} is given twice",
                expected="each attribute once",
                found=", ".join(names),
            )
            return
        problems = info.attr_problems(instr.attr_dict())
        for what, expected, found in problems:
            self.rep.at(index, "attribute", what, expected=expected, found=found)
        if problems:
            return
        tensors = [x for x in instr.ins if isinstance(x, Reg)]
        if any(r not in self.types for r in tensors):
            return
        shapes = [self.types[x].shape if isinstance(x, Reg) else () for x in instr.ins]
        dtypes = [self.types[x].dtype if isinstance(x, Reg) else None for x in instr.ins]
        names = self.names(instr, instr.ins)
        try:
            attrs = self._rule_attrs(info.filled_attrs(instr.attr_dict()), info.attrs)
            result = info.shape_rule(shapes, attrs)
            out_dtypes = info.dtype_rule(dtypes, attrs)
        except BadDim as exc:
            self.rep.at(index, "attribute", f"bad dimension {exc}")
            return
        except ShapeRuleError as exc:
            self.rep.at(
                index,
                "shape",
                exc.what.format(*names),
                expected=exc.expected.format(*names),
                found=exc.found.format(*names) or self.found(instr.ins),
                fix=exc.fix,
            )
            return
        for cond in result.conditions:
            self.check_condition(index, cond, names, instr.ins)
        for reg, shape, dtype, declared in zip(
            instr.outs, result.shapes, out_dtypes, instr.types, strict=False
        ):
            computed = VType(dtype, shape)
            if reg in self.created and self.created[reg] != index:
                target = self.types.get(reg)
                if target is not None:
                    self.match(index, reg, computed, target, f"OP_CALL {info.name}")
            else:
                self.set_type(index, reg, computed, declared)

    def _rule_attrs(self, attrs: dict[str, Any], specs: Sequence[Any]) -> dict[str, RuleAttr]:
        out: dict[str, RuleAttr] = dict(attrs)
        for spec in specs:
            value = attrs.get(spec.name)
            if spec.kind is AttrKind.DIMS and isinstance(value, tuple):
                out[spec.name] = tuple(self.dim(d) for d in value)
        return out

    def resize(self, index: int, instr: TensorResize, label: str) -> None:
        src = self.types.get(instr.src)
        shape = self.spec_shape(index, instr.spec)
        if src is None or shape is None:
            return
        new = _product(shape)
        old = _product(src.shape)
        cond = Condition(
            new,
            "==",
            old,
            "TENSOR_RESIZE changes the number of elements",
            f"product of {_fmt(shape)} == product of {{0}}.shape",
            "the new shape must hold exactly the elements of the tensor",
        )
        self.check_condition(index, cond, [str(instr.src)], [instr.src])
        self.set_type(index, instr.out, VType(src.dtype, shape), instr.type)

    def branch(self, index: int, instr: BranchIf, label: str) -> None:
        if not isinstance(instr.cond, Reg):
            return
        typ = self.types.get(instr.cond)
        if typ is not None and (typ.shape != () or typ.dtype is not DType.BOOL):
            self.rep.at(
                index,
                "type",
                f"BRANCH_IF needs a scalar bool tensor, {instr.cond} is not one",
                expected=f"{instr.cond}: bool[]",
                found=f"{instr.cond}: {typ}",
                fix="reduce or compare to a scalar bool first",
            )

    def phi(self, index: int, instr: TensorPhi, label: str) -> None:
        self._phis.append((index, instr, label))
        declared = self._declared(index, instr.type)
        incoming = [self.types[r] for _, r in instr.incoming if r in self.types]
        if declared is not None:
            self.types[instr.out] = declared
        elif incoming:
            self.types[instr.out] = _join(incoming) or incoming[0]

    def _check_phi(self, index: int, instr: TensorPhi, label: str) -> None:
        block = self.cfg.labels[label]
        preds = [self.fn.blocks[p].label for p in self.cfg.preds[block]]
        given = [lab for lab, _ in instr.incoming]
        if sorted(given) != sorted(preds):
            self.rep.at(
                index,
                "phi",
                f"TENSOR_PHI names other blocks than the predecessors of {label}",
                expected="one value from each of " + (", ".join(preds) or "no block"),
                found=", ".join(given) or "no incoming values",
                fix="list exactly the blocks that jump or branch to this one",
            )
        known = [(lab, r, self.types[r]) for lab, r in instr.incoming if r in self.types]
        if not known:
            return
        found = ", ".join(f"{r}: {t} from {lab}" for lab, r, t in known)
        first = known[0][2]
        if any(t.dtype != first.dtype or len(t.shape) != len(first.shape) for _, _, t in known):
            self.rep.at(
                index,
                "phi",
                "incoming values of TENSOR_PHI have different dtypes or ranks",
                expected="one dtype and rank for every incoming value",
                found=found,
                fix="cast or reshape in the predecessor blocks",
            )
            return
        declared = self._declared(index, instr.type)
        if declared is None:
            return
        if first.dtype != declared.dtype or len(first.shape) != len(declared.shape):
            self.rep.at(
                index,
                "phi",
                f"incoming values of TENSOR_PHI do not have the dtype and rank of {instr.out}",
                expected=f"{instr.out}: {declared}",
                found=found,
                fix="fix the declared type of the TENSOR_PHI",
            )
            return
        for axis, want in enumerate(declared.shape):
            if isinstance(want, Dynamic):
                continue
            for lab, r, t in known:
                verdict = decide(t.shape[axis], "==", want)
                if verdict is not Verdict.HOLDS:
                    self.rep.at(
                        index,
                        "phi",
                        f"incoming value {r} from {lab} does not fit dimension {axis} of "
                        f"{instr.out}",
                        expected=f"{instr.out}: {declared}",
                        found=found,
                        fix=f"declare dimension {axis} of {instr.out} dynamic, or make the "
                        "incoming shapes agree",
                    )
                    return

    def ret(self, index: int, instr: Return, label: str) -> None:
        want = self.fn.results
        if len(instr.values) != len(want):
            self.rep.at(
                index,
                "result",
                f"@{self.fn.name} returns {len(want)} values, RETURN gives {len(instr.values)}",
                expected=", ".join(str(t) for t in want) or "nothing",
                found=", ".join(str(r) for r in instr.values) or "nothing",
                fix="return exactly the results of the signature",
            )
            return
        for i, (reg, result) in enumerate(zip(instr.values, want, strict=True)):
            typ = self.types.get(reg)
            if typ is None:
                continue
            try:
                expected = self.vtype(result)
            except BadDim:
                continue  # reported with the signature
            note = self.mismatch(typ, expected)
            if note is None:
                continue
            fix = "return a tensor of the result type, or change the signature"
            if "==" in note:
                fix = f"add the constraint '{note}' to @{self.fn.name}, or " + fix
            elif note:
                fix = note
            self.rep.at(
                index,
                "result",
                f"result {i} does not match the signature",
                expected=f"result {i}: {result}",
                found=f"{reg}: {typ}",
                fix=fix,
            )


def _product(dims: Sequence[SymDim]) -> SymDim:
    out: Any = 1
    for d in dims:
        if isinstance(d, Dynamic):
            return DYNAMIC
        out = out * d
    result: SymDim = out
    return result


def _fmt(shape: Sequence[SymDim]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _join(types: Sequence[VType]) -> VType | None:
    first = types[0]
    if any(t.dtype != first.dtype or len(t.shape) != len(first.shape) for t in types):
        return None
    dims = tuple(
        first.shape[i] if all(t.shape[i] == first.shape[i] for t in types) else DYNAMIC
        for i in range(len(first.shape))
    )
    return VType(first.dtype, dims)


_HANDLERS: dict[type[Instr], Callable[[Inference, int, Any, str], None]] = {
    BindInputs: Inference.bind,
    ShapePropagate: Inference.propagate,
    ShapeCompute: Inference.compute,
    TensorCreate: Inference.create,
    LoadConst: Inference.load,
    OpCall: Inference.call,
    TensorResize: Inference.resize,
    BranchIf: Inference.branch,
    TensorPhi: Inference.phi,
    Return: Inference.ret,
}
