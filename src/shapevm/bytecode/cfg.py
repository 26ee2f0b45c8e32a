"""The control-flow graph of a function: successors, predecessors, reverse postorder."""

from __future__ import annotations

from dataclasses import dataclass

from shapevm.bytecode.program import Function


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
