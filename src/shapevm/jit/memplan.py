"""The static memory plan of a compiled region, and the per-thread arena it runs in.

Planning (once per variant, at compile time):

1. liveness over the region's steps: a value lives from the step that writes it to the
   last step that reads it; values that may alias (the results of steps that allocate,
   such as ``reshape``, may be views of their operands) share one lifetime;
2. values written through ``out=`` whose lifetime ends inside the region get a buffer;
   values that leave the region (results, values read later) never do: they are
   allocated per call, since the caller keeps them;
3. buffers are reused greedily in program order: an elementwise step may write into an
   operand that dies there (same dtype and shape); otherwise the smallest free buffer of
   the same dtype that is large enough at the reference dimension values is taken, or a
   new one is opened.

At run time a buffer's size is the largest of its tensors' sizes for the call's dimension
values, so one plan serves every shape of a bucket; all buffers are views into one
``uint8`` arena, laid out per dimension assignment (64-byte aligned) and cached.

The arena belongs to the thread and is shared by every compiled region of every variant
(`thread_arena`): a region's buffers are dead when it returns and regions never nest, so
they cannot overlap in time on one thread. It grows when a plan needs more than it has,
and every plan's cached layouts into the old one are then rebuilt (a generation number).
Sharing it matters on a stream of shapes: a new variant runs in memory that earlier calls
already touched, where an arena of its own paid a page fault per 4 KiB (2-6 us each here)
on its first call. In a one-off measurement on W2, the first call of a key's own variant,
once compiled, took 18-36 ms at 2x128x128 and 1x224x224 with an arena per variant and
8-10 ms shared; W2's whole stream did not change measurably
(`benchmarks/warmup_bench.py --workload W2`, three fresh processes each way).

``planned_bytes`` (arena plus the per-call allocations that remain) and ``naive_bytes``
(every tensor the region makes, as the interpreter allocates them) are computed at the
reference dimension values of the variant.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shapevm.jit.graph import RegionGraph
from shapevm.jit.lowering import Lowered, reference_attrs

ALIGN = 64
_FRAMES_PER_THREAD = 64


@dataclass
class Slot:
    dtype: np.dtype[Any]
    ref_bytes: int
    busy_until: int
    members: list[int] = field(default_factory=list)


class Frame:
    """Everything a compiled region needs for one dimension assignment on one thread."""

    __slots__ = ("attrs", "bufs", "env", "shapes")

    def __init__(
        self,
        bufs: list[Any],
        shapes: list[Any],
        attrs: dict[int, dict[str, Any]],
        env: Mapping[str, int],
    ) -> None:
        self.bufs = bufs
        self.shapes = shapes
        self.attrs = attrs
        self.env = env


class MemoryPlan:
    """Which values share which buffer; builds `Frame` s at run time."""

    def __init__(
        self,
        graph: RegionGraph,
        steps: Sequence[Lowered],
        ref_env: Mapping[str, int],
        optimize: bool,
    ) -> None:
        self.graph = graph
        self.slot_of: dict[int, int] = {}
        self.slots: list[Slot] = []
        self.inplace: list[tuple[int, int]] = []  # (output value, input value) sharing a buffer
        self._shaped = [v for s in steps if s.kind == "out" and s.group for v in s.group.outs]
        self._dims_ops = [op for s in steps for op in s.ops if op.dims_attrs]
        self._plan(steps, ref_env, optimize)
        self.naive_bytes = sum(
            v.nbytes(ref_env)
            for v in graph.values
            if v.kind == "temp" and graph.ops[v.producer].kind != "resize"
        )
        arena = sum(_align(s.ref_bytes) for s in self.slots)
        fresh = sum(
            graph.value(v).nbytes(ref_env)
            for s in steps
            if s.kind in ("out", "alloc") and s.group
            for v in s.group.outs
            if v not in self.slot_of
        )
        self.arena_bytes = arena
        self.planned_bytes = arena + fresh
        self.growths = 0
        """How often a call of this plan had to enlarge its thread's arena."""
        self._local = threading.local()

    # -- planning ---------------------------------------------------------------------------
    def _plan(self, steps: Sequence[Lowered], ref_env: Mapping[str, int], optimize: bool) -> None:
        graph = self.graph
        n = len(graph.values)
        parent = list(range(n))

        def find(v: int) -> int:
            while parent[v] != v:
                parent[v] = parent[parent[v]]
                v = parent[v]
            return v

        defined: dict[int, int] = {}
        last: dict[int, int] = {}
        for i, step in enumerate(steps):
            assert step.group is not None
            for v in step.group.ins:
                last[v] = i
            for v in step.group.outs:
                defined[v] = i
            if step.kind in ("alloc", "resize"):
                for o in step.group.outs:
                    for v in step.group.ins:
                        parent[find(o)] = find(v)
        end: dict[int, int] = {}
        external: set[int] = set()
        for v in range(n):
            root = find(v)
            t = max(last.get(v, -1), defined.get(v, -1))
            end[root] = max(end.get(root, -1), t)
            value = graph.values[v]
            if v in graph.live_out or value.kind in ("input", "const"):
                external.add(root)
        if not optimize:
            return
        planned = {
            v for v in self._shaped if find(v) not in external and graph.values[v].kind == "temp"
        }
        for i, step in enumerate(steps):
            assert step.group is not None
            taken: set[int] = set()
            for oi, v in enumerate(step.group.outs):
                if v not in planned:
                    continue
                value = graph.values[v]
                size = value.nbytes(ref_env)
                chosen = None
                for out_index, in_index in step.inplace:
                    if out_index != oi or in_index >= len(step.group.ins):
                        continue
                    u = step.group.ins[in_index]
                    s = self.slot_of.get(u)
                    if (
                        s is not None
                        and s not in taken
                        and end[find(u)] == i
                        and self.slots[s].dtype == value.dtype
                        and graph.values[u].shape == value.shape
                    ):
                        chosen = s
                        self.inplace.append((v, u))
                        break
                if chosen is None:
                    free = [
                        (slot.ref_bytes, s)
                        for s, slot in enumerate(self.slots)
                        if slot.busy_until < i
                        and s not in taken
                        and slot.dtype == value.dtype
                        and slot.ref_bytes >= size
                    ]
                    chosen = min(free)[1] if free else None
                if chosen is None:
                    chosen = len(self.slots)
                    self.slots.append(Slot(value.dtype, size, -1))
                slot = self.slots[chosen]
                slot.busy_until = end[find(v)]
                slot.ref_bytes = max(slot.ref_bytes, size)
                slot.members.append(v)
                self.slot_of[v] = chosen
                taken.add(chosen)

    # -- run time -----------------------------------------------------------------------------
    def frame(self, key: tuple[int, ...], env: Mapping[str, int]) -> Frame:
        local = self._local
        frames: dict[tuple[int, ...], Frame] | None = getattr(local, "frames", None)
        if frames is None:
            frames = local.frames = {}
            local.generation = -1
        if local.generation != _THREAD.generation:  # the arena was replaced
            frames.clear()
            local.generation = _THREAD.generation
        frame = frames.get(key)
        if frame is None:
            frame = self._build_frame(env, frames)
            if len(frames) >= _FRAMES_PER_THREAD:
                frames.clear()
            frames[key] = frame
        return frame

    def _build_frame(self, env: Mapping[str, int], frames: dict[Any, Frame]) -> Frame:
        graph = self.graph
        shapes: list[Any] = [None] * len(graph.values)
        for v in self._shaped:
            shapes[v] = graph.values[v].concrete_shape(env)
        sizes = []
        for slot in self.slots:
            sizes.append(
                max(
                    int(np.prod(shapes[m], dtype=np.int64)) * graph.values[m].dtype.itemsize
                    for m in slot.members
                )
            )
        total = sum(_align(s) for s in sizes)
        arena = thread_arena()
        need = max(total, self.arena_bytes)  # the reference values first, so a bucket fits
        if arena.nbytes < need:
            arena = _grow(need)
            self.growths += 1
            frames.clear()  # frames of other shapes point into the old arena; rebuild them
            self._local.generation = _THREAD.generation
        _note_use(total)
        bufs: list[Any] = [None] * len(graph.values)
        offset = 0
        for slot, size in zip(self.slots, sizes, strict=True):
            for m in slot.members:
                value = graph.values[m]
                nbytes = int(np.prod(shapes[m], dtype=np.int64)) * value.dtype.itemsize
                view = arena[offset : offset + nbytes].view(value.dtype)
                bufs[m] = view.reshape(shapes[m])
            offset += _align(size)
        attrs = {op.pos: reference_attrs(op, env) for op in self._dims_ops}
        return Frame(bufs, shapes, attrs, env)

    def arena(self) -> np.ndarray[Any, Any] | None:
        """The arena this plan's calls on this thread use (``None`` before the first)."""
        return thread_arena() if hasattr(self._local, "frames") else None

    def describe(self) -> list[str]:
        """One line per buffer: its tensors and its size at the reference values."""
        lines = []
        for s, slot in enumerate(self.slots):
            names = ", ".join(str(self.graph.values[m].reg) for m in slot.members)
            lines.append(f"buffer {s}: {slot.dtype} {slot.ref_bytes} bytes <- {names}")
        return lines


class _ThreadArena(threading.local):
    arena: np.ndarray[Any, Any] = np.empty(0, np.uint8)
    generation = 0


_THREAD = _ThreadArena()


def thread_arena() -> np.ndarray[Any, Any]:
    """The calling thread's arena, shared by every compiled region that runs on it."""
    return _THREAD.arena


def _grow(nbytes: int) -> np.ndarray[Any, Any]:
    _THREAD.arena = _aligned(nbytes)
    _THREAD.generation += 1
    with _POOLS_LOCK:
        pool = _POOLS.setdefault(threading.get_ident(), [threading.current_thread().name, 0, 0, 0])
        pool[1] = nbytes
        pool[3] += 1
    return _THREAD.arena


# Thread id -> [thread name, arena bytes, largest layout in it, times grown]: what
# `arena_pools` reports. Written when an arena grows or a layout is built, never per call.
_POOLS: dict[int, list[Any]] = {}
_POOLS_LOCK = threading.Lock()


def _note_use(nbytes: int) -> None:
    with _POOLS_LOCK:
        pool = _POOLS.get(threading.get_ident())
        if pool is not None:
            pool[2] = max(pool[2], nbytes)


def arena_pools() -> list[dict[str, Any]]:
    """One dict per live thread that has an arena: ``thread``, ``capacity_bytes`` (its
    size), ``used_bytes`` (the largest layout built in it: the most its compiled regions
    have used at once) and ``grows``."""
    alive = {t.ident for t in threading.enumerate()}
    with _POOLS_LOCK:
        for ident in [i for i in _POOLS if i not in alive]:
            del _POOLS[ident]
        rows = list(_POOLS.values())
    return [
        {"thread": name, "capacity_bytes": cap, "used_bytes": used, "grows": grows}
        for name, cap, used, grows in rows
    ]


def _aligned(nbytes: int) -> np.ndarray[Any, Any]:
    """``nbytes`` of uninitialized memory starting on an `ALIGN`-byte boundary."""
    raw = np.empty(nbytes + ALIGN, np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip : skip + nbytes]


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN
