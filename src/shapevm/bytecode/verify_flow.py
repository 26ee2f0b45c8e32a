"""The control-flow graph and the dataflow checks of the verifier: def-before-use,
dependency cycles, alloc/free pairing."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shapevm.bytecode.errors import Reporter
from shapevm.bytecode.isa import Reg
from shapevm.bytecode.program import (
    Function,
    Instr,
    OpCall,
    Return,
    ShapePropagate,
    TensorAlloc,
    TensorCreate,
    TensorFree,
    TensorPhi,
)

# control-flow graph ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CFG:
    """Blocks are numbered in program order; block 0 is the entry.

    Jumps to unknown labels and missing terminators are left out of the edges (the
    verifier reports them); a block whose last instruction is not a terminator has no
    successors here.
    """

    labels: dict[str, int]
    succs: tuple[tuple[int, ...], ...]
    preds: tuple[tuple[int, ...], ...]
    rpo: tuple[int, ...]  # reachable blocks, reverse postorder from the entry
    first_index: tuple[int, ...]  # instruction number of each block's first instruction

    @property
    def reachable(self) -> frozenset[int]:
        return frozenset(self.rpo)


def build_cfg(fn: Function) -> CFG:
    labels: dict[str, int] = {}
    for i, block in enumerate(fn.blocks):
        labels.setdefault(block.label, i)
    succs: list[tuple[int, ...]] = []
    first: list[int] = []
    index = 0
    for block in fn.blocks:
        first.append(index)
        index += len(block.instrs)
        last = block.instrs[-1] if block.instrs else None
        targets = last.targets() if last is not None else ()
        succs.append(tuple(dict.fromkeys(labels[t] for t in targets if t in labels)))
    preds: list[list[int]] = [[] for _ in fn.blocks]
    for i, out in enumerate(succs):
        for j in out:
            preds[j].append(i)
    return CFG(labels, tuple(succs), tuple(tuple(p) for p in preds), _rpo(succs), tuple(first))


def _rpo(succs: list[tuple[int, ...]]) -> tuple[int, ...]:
    if not succs:
        return ()
    order: list[int] = []
    seen = {0}
    stack: list[tuple[int, int]] = [(0, 0)]
    while stack:  # iterative: untrusted programs may be deep
        node, i = stack.pop()
        if i < len(succs[node]):
            stack.append((node, i + 1))
            nxt = succs[node][i]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, 0))
        else:
            order.append(node)
    return tuple(reversed(order))


def _writes_into(instr: Instr, reg: Reg, created: dict[Reg, int], index: int) -> bool:
    """``OP_CALL`` writing into a ``TENSOR_CREATE``'d register defines nothing new."""
    return isinstance(instr, OpCall) and reg in created and created[reg] != index


# def-before-use --------------------------------------------------------------------------


def check_def_use(fn: Function, cfg: CFG, rep: Reporter, skip: set[Reg]) -> None:
    """Every register read is defined on every path from the entry to the read."""
    params = {p.reg for p in fn.params}
    block_defs = [{r for i in b.instrs for r in i.defs()} for b in fn.blocks]
    everything = params.union(*block_defs)
    def_at = {r: n for n, _, i in fn.instructions() for r in i.defs()}
    out: dict[int, set[Reg]] = {b: set(everything) for b in cfg.rpo}
    changed = True
    while changed:
        changed = False
        for b in cfg.rpo:
            new = _in_set(b, cfg, out, params, everything) | block_defs[b]
            if new != out[b]:
                out[b], changed = new, True
    for b in cfg.rpo:
        current = _in_set(b, cfg, out, params, everything)
        for offset, instr in enumerate(fn.blocks[b].instrs):
            index = cfg.first_index[b] + offset
            if isinstance(instr, TensorPhi):
                for label, reg in instr.incoming:
                    pred = cfg.labels.get(label)
                    if pred is not None and pred in out and reg not in out[pred] | skip:
                        _undefined(rep, index, reg, def_at, f"at the end of {label}")
            else:
                for reg in dict.fromkeys(instr.uses()):
                    if reg not in current and reg not in skip:
                        _undefined(rep, index, reg, def_at, _path_note(b, reg, cfg, out, fn))
            current |= set(instr.defs())


def _in_set(
    b: int, cfg: CFG, out: dict[int, set[Reg]], params: set[Reg], everything: set[Reg]
) -> set[Reg]:
    if b == 0:
        return set(params)
    preds = [out[p] for p in cfg.preds[b] if p in out]
    return set.intersection(*preds) if preds else set(everything)


def _path_note(b: int, reg: Reg, cfg: CFG, out: dict[int, set[Reg]], fn: Function) -> str:
    for p in cfg.preds[b]:
        if p in out and reg not in out[p]:
            return f"on the path from {fn.blocks[p].label} to {fn.blocks[b].label}"
    return "before this instruction"


def _undefined(rep: Reporter, index: int, reg: Reg, def_at: dict[Reg, int], note: str) -> None:
    if reg not in def_at:
        found = f"{reg} is never defined"
    elif def_at[reg] >= index:
        found = f"{reg} is defined later, at instruction {def_at[reg]}"
    else:
        found = f"{reg} is defined at instruction {def_at[reg]} but not {note}"
    rep.at(
        index,
        "def-use",
        f"{reg} is used before it is defined",
        expected=f"{reg} defined on every path to instruction {index}",
        found=found,
        fix="define it earlier, or merge per-path values with TENSOR_PHI",
    )


# cycles ----------------------------------------------------------------------------------


def check_cycles(fn: Function, rep: Reporter) -> set[Reg]:
    """Shape-propagation chains must be acyclic: no register computed from itself.

    Edges run from a defined register to the registers its definition reads (``TENSOR_PHI``
    merges loop values and is left out). Returns the registers on cycles.
    """
    created = {i.out: n for n, _, i in fn.instructions() if isinstance(i, TensorCreate)}
    params = {p.reg for p in fn.params}
    deps: dict[Reg, list[Reg]] = {}
    def_at: dict[Reg, tuple[int, Instr]] = {}
    for index, _, instr in fn.instructions():
        if isinstance(instr, TensorPhi):
            continue
        for reg in instr.defs():
            # a second definition is reported on its own; only the first one counts here
            if reg in params or reg in def_at or _writes_into(instr, reg, created, index):
                continue
            deps[reg] = list(instr.uses())
            def_at[reg] = (index, instr)
    on_cycles: set[Reg] = set()
    if all(def_at.get(d, (-1,))[0] < def_at[r][0] for r, ds in deps.items() for d in ds):
        return on_cycles  # every edge points backwards in program order: no cycle
    for scc in _cycles(deps):
        on_cycles |= set(scc)
        chain = sorted(scc, key=lambda r: def_at[r][0])
        index = def_at[chain[0]][0]
        steps = ", ".join(f"{r} at instruction {def_at[r][0]}" for r in chain)
        arrow = " <- ".join(str(r) for r in [*chain, chain[0]])
        rep.at(
            index,
            "cycle",
            f"shape dependency cycle: {arrow}",
            expected="every register computed from values defined before it",
            found=f"each depends on the next: {steps}",
            fix="compute the shape from an input or an earlier register",
        )
    return on_cycles


def _cycles(deps: dict[Reg, list[Reg]]) -> list[list[Reg]]:
    """Strongly connected components with a cycle (Tarjan's, iterative)."""
    index: dict[Reg, int] = {}
    low: dict[Reg, int] = {}
    stack: list[Reg] = []
    on_stack: set[Reg] = set()
    result: list[list[Reg]] = []
    for root in deps:
        if root in index:
            continue
        work: list[tuple[Reg, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            succ = deps.get(node, [])
            if i < len(succ):
                work.append((node, i + 1))
                nxt = succ[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work and work[-1][0] != node:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                scc: list[Reg] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    scc.append(top)
                    if top == node:
                        break
                if len(scc) > 1 or node in deps.get(node, []):
                    result.append(scc)
    return result


# allocation ------------------------------------------------------------------------------

UNALLOC, LIVE, FREED, PARAM, CONFLICT = "unallocated", "allocated", "freed", "parameter", "?"
State = dict[Reg, tuple[str, int]]  # register -> (state, instruction that set it)


def check_allocations(fn: Function, cfg: CFG, rep: Reporter, created: dict[Reg, int]) -> None:
    """Pair ``TENSOR_ALLOC`` with ``TENSOR_FREE`` along every path."""
    kinds = (TensorCreate, TensorAlloc, TensorFree)
    if not any(isinstance(i, kinds) for _, _, i in fn.instructions()):
        return  # nothing is allocated or freed explicitly
    flow = _AllocFlow(fn, cfg, rep, created)
    out: dict[int, State] = {}
    for _ in range(len(fn.blocks) + 2):  # states only move forward; this reaches a fixpoint
        before = dict(out)
        for b in cfg.rpo:
            out[b] = flow.block(b, flow.entry(b, out, report=False), report=False)
        if out == before:
            break
    for b in cfg.rpo:
        flow.block(b, flow.entry(b, out, report=True), report=True)


class _AllocFlow:
    def __init__(self, fn: Function, cfg: CFG, rep: Reporter, created: dict[Reg, int]) -> None:
        self.fn = fn
        self.cfg = cfg
        self.rep = rep
        self.created = created

    def entry(self, b: int, out: dict[int, State], report: bool) -> State:
        if b == 0:
            return {p.reg: (PARAM, -1) for p in self.fn.params}
        merged: State = {}
        origin: dict[Reg, int] = {}
        for p in self.cfg.preds[b]:
            for reg, (state, at) in out.get(p, {}).items():
                if reg not in merged:
                    merged[reg], origin[reg] = (state, at), p
                elif merged[reg][0] != state and merged[reg][0] != CONFLICT:
                    if report:
                        self._conflict(b, reg, origin[reg], merged[reg][0], p, state)
                    merged[reg] = (CONFLICT, at)
        return merged

    def _conflict(self, b: int, reg: Reg, p1: int, s1: str, p2: int, s2: str) -> None:
        label = self.fn.blocks[b].label
        l1, l2 = self.fn.blocks[p1].label, self.fn.blocks[p2].label
        self.rep.at(
            self.cfg.first_index[b],
            "alloc",
            f"{reg} is {s1} on the path from {l1} but {s2} on the path from {l2}",
            expected=f"one allocation state of {reg} at {label}",
            found=f"{s1} from {l1}, {s2} from {l2}",
            fix="allocate and free on both paths alike",
        )

    def block(self, b: int, state: State, report: bool) -> State:
        state = dict(state)
        for offset, instr in enumerate(self.fn.blocks[b].instrs):
            index = self.cfg.first_index[b] + offset
            self.step(index, instr, state, report)
        return state

    def _say(
        self, report: bool, index: int, what: str, expected: str, found: str, fix: str
    ) -> None:
        if report:
            self.rep.at(index, "alloc", what, expected=expected, found=found, fix=fix)

    def step(self, index: int, instr: Instr, state: State, report: bool) -> None:
        if isinstance(instr, TensorCreate):
            state[instr.out] = (UNALLOC, index)
        elif isinstance(instr, TensorAlloc):
            self._alloc(index, instr.reg, state, report)
        elif isinstance(instr, TensorFree):
            self._free(index, instr.reg, state, report)
        elif not isinstance(instr, (ShapePropagate, TensorPhi)):
            self._uses(index, instr.uses(), state, report)
            for reg in instr.defs():
                if _writes_into(instr, reg, self.created, index):
                    self._uses(index, [reg], state, report, writing=True)
                else:
                    state[reg] = (LIVE, index)
        elif isinstance(instr, TensorPhi):
            state[instr.out] = (LIVE, index)
        if isinstance(instr, Return):
            self._leaks(index, instr, state, report)

    def _alloc(self, index: int, reg: Reg, state: State, report: bool) -> None:
        if reg not in self.created:
            self._say(
                report,
                index,
                f"TENSOR_ALLOC needs a tensor declared by TENSOR_CREATE; {reg} is not one",
                f"{reg} = TENSOR_CREATE ... before TENSOR_ALLOC {reg}",
                f"{reg} has storage from its definition" if reg in state else f"{reg}",
                "only declared tensors are allocated",
            )
            return
        cur, at = state.get(reg, (UNALLOC, -1))
        if cur == LIVE:
            self._say(
                report,
                index,
                f"{reg} is allocated twice",
                f"{reg} unallocated or freed",
                f"{reg} is already allocated at instruction {at}",
                f"remove this TENSOR_ALLOC or free {reg} first",
            )
        state[reg] = (LIVE, index)

    def _free(self, index: int, reg: Reg, state: State, report: bool) -> None:
        cur, at = state.get(reg, (LIVE, -1))
        problem = {
            FREED: (f"{reg} is freed twice", f"{reg} is already freed at instruction {at}"),
            UNALLOC: (f"{reg} is freed but never allocated", f"{reg} is not allocated"),
            PARAM: (f"parameter {reg} is freed", f"{reg} belongs to the caller"),
        }.get(cur)
        if problem is not None:
            what, found = problem
            self._say(report, index, what, f"{reg} allocated", found, "remove this TENSOR_FREE")
        if cur != PARAM:
            state[reg] = (FREED, index)

    def _uses(
        self, index: int, regs: Iterable[Reg], state: State, report: bool, writing: bool = False
    ) -> None:
        verb = "written" if writing else "used"
        for reg in dict.fromkeys(regs):
            cur, at = state.get(reg, (LIVE, -1))
            if cur == FREED:
                self._say(
                    report,
                    index,
                    f"{reg} is {verb} after it is freed",
                    f"{reg} allocated here",
                    f"{reg} is freed at instruction {at}",
                    f"move the TENSOR_FREE of {reg} after its last use",
                )
            elif cur == UNALLOC:
                self._say(
                    report,
                    index,
                    f"{reg} is {verb} before TENSOR_ALLOC",
                    f"TENSOR_ALLOC {reg} before its first use",
                    f"{reg} is declared at instruction {at} but not allocated",
                    f"add TENSOR_ALLOC {reg}",
                )

    def _leaks(self, index: int, instr: Return, state: State, report: bool) -> None:
        for reg, (cur, at) in sorted(state.items()):
            if cur == LIVE and reg in self.created and reg not in instr.values:
                self._say(
                    report,
                    index,
                    f"{reg} leaks: it is still allocated at RETURN",
                    f"TENSOR_FREE {reg} before RETURN, or return it",
                    f"{reg} is allocated at instruction {at} and never freed",
                    f"add TENSOR_FREE {reg} after its last use",
                )
