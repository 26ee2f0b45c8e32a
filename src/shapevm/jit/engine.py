"""The JIT engine of one traced function: counters, trigger, variants, compile jobs.

With the option ``ahead`` (the default) the engine lowers the function when it is made
(`_lower_ahead`): its first call makes the first key's variant from that code and runs
native; generated C for a key waits for ``hot_threshold`` calls of it (`_Tier3Job`). The
flow below is the rest, and all of it with ``ahead=False``.

How a call flows (`JitEngine.__call__`; a shape seen before whose key's variant is one
executor call goes straight to it, `fast_call`, and so does an ``exact`` key with no record
yet while a shape-generic variant serves it, `_borrow_fast`):

1. **bind**: the arguments are checked and the dimension variables solved (cached per
   tuple of shapes by the executable's binder);
2. **key**: the cache policy maps the variables' values to a specialization key
   (``None`` in bucket mode below the first boundary: interpreted and counted);
3. **variant or interpreter**: under one lock, a ready variant for the key is taken (its
   hits and last use updated); otherwise the key's call count goes up, and when it reaches
   ``hot_threshold`` (and the function's SCD reaches ``scd_threshold``, and the budget has
   room, evicting the least recently used variant if needed) the key gets its variant:
   in this call when a ready variant is shape-generic (`_share_now`: its code, no
   compile), else a record is queued;
4. the call runs: in the variant if there was one, else in the interpreter (in adaptive
   mode, a key waiting for its own variant uses its power-of-two bucket's variant). A key
   whose variant is not ready yet (not yet hot, or compiling) *borrows* the most recently
   used ready variant whose code is shape-generic (`Variant.generic`: every step is right
   for any dimension values), so once a function has one variant, no new shape waits in
   the interpreter (counted as ``borrowed_calls``). Failed keys and bucket values below
   the first boundary stay interpreted;
5. **compile queue**: the queued job runs in the background worker (`worker.py`); the
   finished variant is installed by one dict assignment under the lock and serves the
   next call. A failure or timeout is recorded with its reason and the key is never
   retried; with ``fallback=False`` the key's calls then raise `JitCompileError` (with
   ``background=False``, the call that compiled it too).

A background compile is queued when the call that made its key hot returns (so that call
runs alone), except the function's first one, queued before that call runs (`_Job.first`).
With ``background=False`` the compile runs in the triggering call, after it
is decided and before that call runs (still interpreted), so the next call finds the
variant ready.

Threads: bookkeeping happens under `stats.LOCK`; compiled regions use their thread's arena;
variants are immutable once installed, and an evicted variant stays valid for calls that
already hold it.

The GIL: lowering a function (tier 2) is Python and holds the GIL for its milliseconds;
generated C (tier 3) is compiled by a subprocess, during which the worker thread waits
without the GIL, and loading the library is one short call. The executor releases the GIL
for the whole of a region.
"""

from __future__ import annotations

import importlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shapevm.jit import stats
from shapevm.jit.blas import one_blas_thread
from shapevm.jit.errors import CompileCancelled, JitCompileError, format_key
from shapevm.jit.options import JitOptions
from shapevm.jit.policy import AdaptivePolicy, ExactPolicy, Key, make_policy, pow2
from shapevm.jit.regions import RegionReport, find_regions
from shapevm.jit.worker import WORKER, native_tier, prefetch_blas_libraries, run_with_timeout
from shapevm.runtime import bctrace, scheduler
from shapevm.runtime.interpreter import Executable, Plan, RuntimeOpError

if TYPE_CHECKING:  # the native tier loads with the package, after this module
    from shapevm.jit.backend import Compiler, Variant, tier3


class _NoExecutorYet(Exception):
    """Stands for the executor's `ExecMismatch` and `ExecFailure` until a variant exists
    (never raised)."""


QUEUED, COMPILING, READY, FAILED, EVICTED = "queued", "compiling", "ready", "failed", "evicted"
_HISTORY = 256
_COUNTED_KEYS = 4096


class VariantRecord:
    """What the engine knows about one key's variant, as `shapevm.vm.jit_info` shows it."""

    def __init__(self, engine: JitEngine, key: Key, values: tuple[int, ...]) -> None:
        self.engine = engine
        self.key = key
        self.values = values
        self.status = QUEUED
        self.compile_ms = 0.0
        self.hits = 0
        self.last_use = 0.0
        self._memory: tuple[int, int] | None = None  # (planned, naive), once asked
        self._memory_later: Callable[[], tuple[int, int]] | None = None  # see drop_variant
        self.reason = ""
        self.patterns: tuple[str, ...] = ()
        self.variant: Variant | None = None
        self.shares_code_with: Key | None = None
        self.cancelled = False
        self.stage = ""  # what a compiling record is doing, for the monitor page
        self.compile_started = 0.0  # time.monotonic() when its compile began
        self.tier = 2
        self.tier3 = ""  # tier 3's state: compiling, ready, skipped/failed with the reason
        self.tier3_ms = 0.0
        self.tier3_started = 0.0  # time.monotonic() when its generated C began
        self.tier3_build_ms: tuple[float, ...] = ()  # each library its tier 3 compiled
        self.patches: tier3.Patches | None = None
        self.fast_shapes: list[tuple[Any, ...]] = []  # its entries in the engine's _fast
        self.tier3_when_hot = False
        """Made at its key's first call from code lowered ahead: its generated C is queued
        once the key has had ``hot_threshold`` calls (`JitEngine._tier3_job`)."""

    def memory(self) -> tuple[int, int]:
        """(planned, naive) bytes of its variant at the key's values; (0, 0) without one."""
        if self._memory is None:
            if self._memory_later is not None:
                self._memory = self._memory_later()
                self._memory_later = None
            elif self.variant is None:
                return (0, 0)
            else:
                self._memory = self.variant.memory_bytes
        return self._memory

    def drop_variant(self, now: bool = False) -> None:
        """Forget the variant (evicted), keeping what `memory` says of it. A variant that
        runs another key's code leaves the means to work it out when asked: that code is,
        unless a key's own compile has replaced it, the code every later key of the
        function shares too (`_share_now` lends the most recent ready variant's), so
        keeping it here keeps nothing alive that the live variants do not; working it out
        took 0.14 ms of W1's call that evicted it, under the engine's lock (a stream of
        more shapes than ``max_variants`` evicts at every new key). ``now``: worked out
        before the code goes (the capability table changed)."""
        variant = self.variant
        if variant is not None and self._memory is None:
            if now or variant.shares_code_with is None:
                self.memory()
            else:
                self._memory_later = variant.memory_later()
        self.variant = None

    @property
    def planned_bytes(self) -> int:
        return self.memory()[0]

    @property
    def naive_bytes(self) -> int:
        return self.memory()[1]

    def check(self) -> None:
        """Raise `CompileCancelled` once the compile has been abandoned."""
        if self.cancelled:
            raise CompileCancelled(self.reason)

    def as_dict(self) -> dict[str, Any]:
        return {
            "function": self.engine.name,
            "key": self.key,
            "key_text": format_key(self.key),
            "variables": self.engine.variables,
            "mode": self.engine.options.cache_mode,
            "status": self.status,
            "compile_ms": round(self.compile_ms, 3),
            "hits": self.hits,
            "last_use": self.last_use,
            "planned_bytes": self.planned_bytes,
            "naive_bytes": self.naive_bytes,
            "patterns": self.patterns,
            "reason": self.reason,
            "stage": self.stage,
            "compile_started": self.compile_started,
            "shares_code_with": (
                None if self.shares_code_with is None else format_key(self.shares_code_with)
            ),
            "tier": self.tier if self.status == READY else 1,
            "tier3": self.tier3,
            "tier3_ms": round(self.tier3_ms, 3),
            "tier3_started": self.tier3_started,
            "tier3_build_ms": [round(ms, 3) for ms in self.tier3_build_ms],
        }


class _Job:
    """Compiling one record; `execute` runs in a compile thread."""

    def __init__(self, engine: JitEngine, record: VariantRecord, first: bool = False) -> None:
        self.engine = engine
        self.record = record
        self.first = first
        """The function's first variant. It is queued before the call that made it hot runs,
        not after: every later key borrows it (W1-W3 are shape-generic), so each
        millisecond it is ready sooner takes the next calls out of the interpreter, which
        is worth sharing the cores with that one call (W1's first compile, 11-15 ms, was
        ready by the third call instead of the tenth)."""
        self.timeout_s = engine.options.compile_timeout_s

    def execute(self) -> None:
        self.engine._compile(self.record)

    def abandon(self) -> None:
        if self.record.status == READY:  # lowered in time; its generated C ran past it
            _Tier3Job(self.engine, self.record).abandon()
            return
        self.engine._abandon(self.record, f"timeout: compile exceeded {self.timeout_s} s")


class _Tier3Job:
    """Generating and compiling C for the chains of a ready variant (tier 3)."""

    first = False

    def __init__(self, engine: JitEngine, record: VariantRecord) -> None:
        self.engine = engine
        self.record = record
        self.timeout_s = engine.options.compile_timeout_s

    def execute(self) -> None:
        rec = self.record
        variant = rec.variant
        if variant is not None and rec.status == READY:
            self.engine._tier3(rec, variant, variant.ref_env)

    def abandon(self) -> None:
        rec = self.record
        rec.cancelled = True
        with stats.LOCK:
            rec.stage = ""
            rec.tier3 = f"failed: timeout: compile exceeded {self.timeout_s} s"
            for c in (self.engine.counters, stats.COUNTERS):
                c.tier3_failures += 1


class JitEngine:
    """Runs calls of one executable, in compiled variants once they are hot."""

    def __init__(
        self,
        executable: Executable,
        options: JitOptions | None = None,
        *,
        compiler: Compiler | None = None,
        name: str | None = None,
    ) -> None:
        self.executable = executable
        self.options = options or JitOptions()
        self._compiler = compiler
        if self.options.enabled and not self.options.ahead:
            prefetch_blas_libraries()  # its first calls are interpreted (see _lower_ahead)
        self._mismatch: type[Exception] = _NoExecutorYet  # the executor's, once compiled
        self._failure: type[Exception] = _NoExecutorYet
        self.name = name or executable.fn.name
        self.variables = executable.binder.variables
        self.policy = make_policy(
            self.options.cache_mode,
            self.options.bucket_boundaries,
            self.options.adaptive_exact_after,
            self.variables,
        )
        self._policy_exact = type(self.policy) is ExactPolicy
        self._report: RegionReport | None = None
        self.skip_reason: str | None = None  # why no key of this function is compiled
        self._records: OrderedDict[Key, VariantRecord] = OrderedDict()  # LRU order
        self._failed_records = 0  # of _records (a failed record stays there, never evicted)
        self._history: deque[VariantRecord] = deque(maxlen=_HISTORY)
        self._counts: dict[Key, int] = {}
        self._function_calls = 0  # calls before the first variant, of any key
        self.counters = stats.Counters()
        self._fast: dict[tuple[Any, ...], tuple[VariantRecord, Any, Any]] = {}
        """Shapes of calls whose key's own variant is ready and one executor call: the
        record, the executor and the dimension values it needs (None: it binds them)."""
        self._bind: Any = None
        """Once a variant is one executor call that binds the arrays itself: its `bind`."""
        self._generation = scheduler.generation()
        self._ahead: Any = None
        """The function's native code when it was lowered ahead (`_lower_ahead`)."""
        self.ahead_ms = 0.0
        with stats.LOCK:
            stats.ENGINES.add(self)
        if self.options.enabled and self.options.ahead:
            self._lower_ahead()

    def _lower_ahead(self) -> None:
        """Tier 2 before the first call (option ``ahead``): lowering needs no shapes and no
        compiler, so the function is lowered as it is wrapped, as ONNX Runtime prepares
        its session, and its first call runs native. A function whose SCD is too low, or
        that does not lower, stays on the ``hot_threshold`` path (whose compile records
        why it failed)."""
        report = self.report
        if self.skip_reason is not None:
            return
        t0 = time.perf_counter()
        timeout = self.options.compile_timeout_s
        deadline = None if timeout is None else time.monotonic() + timeout

        def check() -> None:
            if deadline is not None and time.monotonic() > deadline:
                raise CompileCancelled(f"timeout: lowering exceeded {timeout} s")

        try:
            self._ahead = self.compiler.native_function(self.executable, report, check)
        except Exception:  # met again, and recorded with its reason, by the compile when hot
            self._ahead = None
        finally:
            if self._ahead is None or not self._ahead.whole:
                # Interpreted steps will run beside native ones (`blas.one_blas_thread`):
                # find NumPy's BLAS libraries in the background. A function that is one
                # native call never needs them; scanning beside its build took 5 of W3's
                # 16 ms (the scan holds the GIL).
                prefetch_blas_libraries()
        if self._ahead is not None:
            self.ahead_ms = (time.perf_counter() - t0) * 1e3

    @property
    def compiler(self) -> Compiler:
        """The native tier's compiler, made when first needed."""
        if self._compiler is None:
            compiler = native_tier().Compiler
            self._compiler = compiler(self.options.lowerings, self.options.mem_optimize)
        return self._compiler

    # -- calls ------------------------------------------------------------------------------
    def __call__(self, *args: Any, dims: Mapping[str, int] | None = None) -> list[Any]:
        if dims is None:
            if self._fast or self._bind is not None:
                outs = self.fast_call(args)
                if outs is not None:
                    return outs
            bind = self._bind
            if bind is not None:  # the executor checks and binds a new shape in C
                try:
                    values = bind(*args)
                except self._mismatch:
                    pass  # the binder below explains it (or converts lists and scalars)
                else:
                    return self.run(args, dict(zip(self.variables, values, strict=True)))
        ex = self.executable
        arrays = ex.binder.convert(args)
        env = ex.binder.bind(arrays, dims)
        return self.run(arrays, env)

    def fast_call(self, arrays: Sequence[Any]) -> list[Any] | None:
        """A call of shapes seen before whose key's own variant is one executor call: the
        executor checks and binds the arrays itself (None: take the full path, which also
        explains a mismatch)."""
        try:
            found = self._fast.get(tuple(a.shape for a in arrays))
        except AttributeError:  # not arrays: the full path converts them
            return None
        if bctrace.ACTIVE is not None or scheduler.generation() != self._generation:
            return None
        if found is None:
            return self._borrow_fast(arrays)
        rec, direct, dims = found
        now = time.monotonic()
        with stats.LOCK:
            if rec.status != READY:
                return None
            rec.hits += 1  # (written out: the call path of every known shape)
            rec.last_use = now
            self._records.move_to_end(rec.key)
            self.counters.calls += 1
            self.counters.compiled_calls += 1
            stats.COUNTERS.calls += 1
            stats.COUNTERS.compiled_calls += 1
            job = self._tier3_job(rec)
        try:
            return list(direct(*arrays) if dims is None else direct(dims, *arrays))
        except self._failure as exc:  # an instruction failed (an index out of range)
            variant = rec.variant
            if variant is None:
                raise RuntimeOpError(f"@{self.name}: {exc}") from exc
            raise variant.function.failure(exc) from exc
        except self._mismatch:
            if job is not None:
                rec.tier3_when_hot = True
                job = None
            self._uncount(rec)  # counted again by the full path
            return None
        finally:
            if job is not None:
                self._submit(job)

    def _borrow_fast(self, arrays: Sequence[Any]) -> list[Any] | None:
        """A call of a shape whose key has no record yet, while the function has a
        shape-generic variant that is one executor call (exact keys only): it borrows that
        variant as `_decide` would (counted towards its key's ``hot_threshold`` and as a
        borrowed call) with no more Python than that on the way. The full path around the
        same executor call made a new shape's first call at W1's b=3 (about 50 us) 20-30 us
        longer, most of it Python's objects gone cold from the cache under the previous
        calls' kernels. None: the full path (a key with a record, the call that makes the
        key hot, any other policy)."""
        bind = self._bind
        if bind is None or not self._policy_exact:
            return None
        try:
            key = ("exact", bind(*arrays))
        except self._mismatch:
            return None  # the full path explains it
        now = time.monotonic()
        with stats.LOCK:
            if key in self._records:  # failed, queued or compiling: the full path decides
                return None
            n = self._counts.get(key, 0) + 1
            if n >= self.options.hot_threshold:
                return None  # the full path gives the key its variant
            lender = self._lender()
            if lender is None or lender.variant is None or not lender.variant.whole:
                return None
            fn = lender.variant.function
            direct = fn.direct
            if direct is None or fn.direct_needs_dims:
                return None
            self._note_count(key, n)
            self._count_call(borrowed=True)
            self._hit(lender, now)
        try:
            return list(direct(*arrays))
        except self._failure as exc:  # an instruction failed (an index out of range)
            raise fn.failure(exc) from exc
        except self._mismatch:  # refused after all: the full path counts it and explains
            self._uncount(lender, borrowed=True, key=key, n=n)
            return None

    def _count_call(self, borrowed: bool = False, by: int = 1) -> None:
        """Count a call in the function's and the process's counters (under the lock)."""
        for c in (self.counters, stats.COUNTERS):
            c.calls += by
            if borrowed:
                c.borrowed_calls += by

    def _uncount(
        self, rec: VariantRecord, borrowed: bool = False, key: Key | None = None, n: int = 0
    ) -> None:
        """Take back a fast call that the executor refused (the full path counts it): its
        counts, the hit on ``rec``, and the key's count ``n`` when it still stands."""
        with stats.LOCK:
            self._count_call(borrowed, by=-1)
            for c in (self.counters, stats.COUNTERS):
                c.compiled_calls -= 1
            rec.hits -= 1
            if key is not None and self._counts.get(key) == n:
                self._counts[key] = n - 1

    def _note_count(self, key: Key, n: int) -> None:
        """Record ``n`` calls of ``key``, not yet hot (the counts kept are bounded)."""
        if len(self._counts) >= _COUNTED_KEYS:
            self._counts.clear()
        self._counts[key] = n

    def _remember_fast(
        self, arrays: Sequence[Any], values: tuple[int, ...], variant: Variant
    ) -> None:
        rec = self._records.get(variant.key)
        fn = variant.function
        if rec is None or rec.variant is not variant or fn.direct is None:
            return
        if len(self._fast) >= _COUNTED_KEYS:
            self._fast.clear()
            for r in self._records.values():
                r.fast_shapes.clear()
        dims = None if not fn.direct_needs_dims else values
        shapes = tuple(a.shape for a in arrays)
        if self._fast.get(shapes, (None,))[0] is not rec:  # (a call the executor refused
            rec.fast_shapes.append(shapes)  # comes here again with the same shapes)
        self._fast[shapes] = (rec, fn.direct, dims)

    def run(self, arrays: Sequence[Any], env: Mapping[str, int]) -> list[Any]:
        """Run bound arrays: compiled if a variant is ready, interpreted otherwise."""
        if not self.options.enabled:
            plan = self.executable.plan_for(env)
            return self._traced(plan).run(arrays)
        if self._report is None:
            self.report  # noqa: B018  (outside the lock: type inference takes milliseconds)
        values = tuple(env[v] for v in self.variables)
        variant, job, failed, own = self._decide(values)
        if job is not None and (not self.options.background or job.first):
            # Without background: compiled now, so that the next call finds the variant.
            # The function's first variant: queued before this call runs (see _Job.first).
            self._submit(job)
            if not self.options.fallback and job.record.status == FAILED:
                failed = job.record  # compiled in this call and failed: it raises too
            job = None
        try:
            if failed is not None:
                raise JitCompileError(self.name, failed.key, failed.reason)
            if variant is not None and variant.whole and bctrace.ACTIVE is None:
                if own and (
                    not isinstance(self.policy, AdaptivePolicy) or variant.key[0] == "exact"
                ):
                    # the key's own variant, not a borrowed one; in adaptive mode not a shared
                    # power-of-two one either, whose shapes must keep counting towards their own
                    self._remember_fast(arrays, values, variant)
                return variant.run(arrays, env)
            plan = variant.plan_for(env) if variant is not None else self.executable.plan_for(env)
            if (variant is None or not variant.whole) and self._native_beside():
                with one_blas_thread():  # interpreted steps beside native kernels: see blas
                    return self._traced(plan).run(arrays)
            return self._traced(plan).run(arrays)
        finally:
            # A background compile starts once the call that made its key hot has returned:
            # that call does not share the cores and the GIL with it.
            if job is not None:
                self._submit(job)

    def _native_beside(self) -> bool:
        """Whether the function has native code compiled or compiling (a record not failed),
        whose kernels its interpreted steps' BLAS threads would compete with (see `blas`);
        a function that nothing lowers keeps NumPy's threads, and saves the 5 us."""
        return len(self._records) > self._failed_records  # (the call path: no walk)

    def _traced(self, plan: Plan) -> Plan:
        rec = bctrace.ACTIVE
        if rec is None:
            return plan
        return rec.traced(plan, self.executable.fn, self.executable.slot)

    def _decide(
        self, values: tuple[int, ...]
    ) -> tuple[Variant | None, _Job | _Tier3Job | None, VariantRecord | None, bool]:
        """The variant to run (None: interpret), a job to submit, a failed record whose calls
        raise, and whether the variant is the key's own (the policy's key is asked once:
        the adaptive policy counts each question)."""
        now = time.monotonic()
        g = stats.COUNTERS
        c = self.counters
        if scheduler.generation() != self._generation:
            self._capabilities_changed()
        with stats.LOCK:
            c.calls += 1
            g.calls += 1
            key = self.policy.key(values)
            if key is None:
                c.out_of_range += 1
                g.out_of_range += 1
                return None, None, None, False
            rec = self._records.get(key)
            if rec is not None and rec.status == READY:
                return self._hit(rec, now), self._tier3_job(rec), None, True
            if rec is None and not self._records and self._ahead is not None:
                rec = self._ready_now(key, values)
                if rec is not None:
                    return self._hit(rec, now), self._tier3_job(rec), None, True
            job = None
            if rec is None:
                job = self._count(key, values)
                if isinstance(job, _Job) and not job.first:
                    shared = self._share_now(job.record)
                    if shared is not None:
                        return self._hit(shared, now), self._tier3_job(shared), None, True
            elif rec.status == FAILED and not self.options.fallback:
                return None, None, rec, False
            if isinstance(self.policy, AdaptivePolicy) and key[0] == "exact":
                shared = self._records.get(("pow2", tuple(pow2(v) for v in values)))
                if shared is not None and shared.status == READY:
                    return self._hit(shared, now), job, None, False
            if rec is None or rec.status in (QUEUED, COMPILING):
                lender = self._lender()
                if lender is not None:
                    c.borrowed_calls += 1
                    g.borrowed_calls += 1
                    return self._hit(lender, now), job, None, False
            return None, job, None, False

    def _ready_now(self, key: Key, values: tuple[int, ...]) -> VariantRecord | None:
        """The first key's variant over the code lowered ahead, made in this call (under
        the lock: it is a `Variant` over code that exists, well under a millisecond)."""
        t0 = time.perf_counter()
        rec = VariantRecord(self, key, values)
        ref = self.policy.reference_values(key, values)
        try:
            variant = native_tier().Variant(
                self.executable, key, self._ahead, dict(zip(self.variables, ref, strict=True))
            )
        except Exception:  # the hot_threshold path compiles it and records why
            self._ahead = None
            return None
        rec.status = COMPILING
        rec.tier3_when_hot = True
        self._records[key] = rec
        self._install(rec, variant, self.ahead_ms + (time.perf_counter() - t0) * 1e3)
        return rec

    def _share_now(self, rec: VariantRecord) -> VariantRecord | None:
        """A key just hot gets its variant in this call (under the lock) when a ready variant
        of the function is shape-generic: it is that variant's code with the key's
        reference values, well under a millisecond, as `_ready_now`. Made by the worker, it
        took the GIL from the calls beside it (0.1-0.3 ms on the next call). Its generated
        C, if it has chains, is a background job as for `_ready_now`. None: the worker
        compiles it (no generic lender, or making it failed)."""
        lender = self._lender()
        if lender is None or lender.variant is None:
            return None
        t0 = time.perf_counter()
        ref = self.policy.reference_values(rec.key, rec.values)
        try:  # a lender is this engine's, so of its executable: `compile` shares its code
            variant = self.compiler.compile(
                self.executable,
                self.report,
                rec.key,
                dict(zip(self.variables, ref, strict=True)),
                template=lender.variant,
            )
        except Exception:  # the worker compiles it and records why
            return None
        rec.status = COMPILING
        rec.tier3_when_hot = True
        self._install(rec, variant, (time.perf_counter() - t0) * 1e3)
        return rec

    def _tier3_job(self, rec: VariantRecord) -> _Tier3Job | None:
        """Tier 3 of a variant made in a call (from code lowered ahead, or shared), once its
        key is hot (called under the lock); none for a variant without chains."""
        if not rec.tier3_when_hot or rec.hits < self.options.hot_threshold:
            return None
        rec.tier3_when_hot = False
        variant = rec.variant
        if variant is None or not variant.has_chains:
            return None
        return _Tier3Job(self, rec)

    def _capabilities_changed(self) -> None:
        """The capability db changed: native code built under the old one goes (its
        records are evicted with the reason); the function is lowered again at once under
        the new table when it lowers ahead, and its keys compile again when hot."""
        with stats.LOCK:
            generation = scheduler.generation()
            if generation == self._generation:
                return  # another call has handled it
            self._generation = generation
            self._ahead = None
            self._fast = {}
            self._bind = None
            for rec in self._history:  # what they say of their memory, before the code goes
                rec.memory()
            for rec in list(self._records.values()):
                if rec.status in (READY, QUEUED, COMPILING):
                    rec.cancelled = rec.status != READY
                    if rec.patches is not None:
                        rec.patches.remove()
                        rec.patches = None
                    rec.status = EVICTED
                    rec.drop_variant(now=True)
                    rec.reason = "evicted: the capability table changed"
                    del self._records[rec.key]
                    self._history.append(rec)
                    self.counters.evictions += 1
                    stats.COUNTERS.evictions += 1
            self._counts.clear()
            self._function_calls = 0
        if self._compiler is not None:
            self._compiler.forget(self.executable)
        if self.options.enabled and self.options.ahead:
            self._lower_ahead()  # under the new table: this call already runs native

    def _lender(self) -> VariantRecord | None:
        """The most recently used ready variant that serves any key (shape-generic)."""
        for rec in reversed(self._records.values()):
            if rec.status == READY and rec.variant is not None and rec.variant.generic:
                return rec
        return None

    def _hit(self, rec: VariantRecord, now: float) -> Variant | None:
        rec.hits += 1
        rec.last_use = now
        self._records.move_to_end(rec.key)
        self.counters.compiled_calls += 1
        stats.COUNTERS.compiled_calls += 1
        return rec.variant

    def _count(self, key: Key, values: tuple[int, ...]) -> _Job | None:
        """Count a call of ``key``; a job when it just became hot and may be compiled."""
        n = self._counts.get(key, 0) + 1
        threshold = self.options.hot_threshold
        if not self._records:
            # Nothing compiled yet: the function's first lowering serves every shape, so its
            # calls count whatever their shapes (a stream of shapes would otherwise wait
            # for one shape to come back hot_threshold times, interpreted meanwhile).
            self._function_calls += 1
            n = max(n, self._function_calls)
            if self.options.eager_first:
                threshold = 1  # every call would stay in the interpreter
        if n < threshold:
            self._note_count(key, n)
            return None
        self._counts.pop(key, None)
        if self.skip_reason is not None:
            self.counters.scd_refusals += 1
            stats.COUNTERS.scd_refusals += 1
            return None
        if not self._make_room():
            self.counters.budget_refusals += 1
            stats.COUNTERS.budget_refusals += 1
            return None
        first = not self._records
        rec = VariantRecord(self, key, values)
        self._records[key] = rec
        return _Job(self, rec, first)

    def _make_room(self) -> bool:
        # queued, compiling or ready: the rest of the records (evicted ones are not there)
        if len(self._records) - self._failed_records < self.options.max_variants:
            return True
        for rec in self._records.values():  # least recently used first
            if rec.status == READY:
                self._evict(rec)
                return True
        return False

    def _evict(self, rec: VariantRecord) -> None:
        for shapes in rec.fast_shapes:  # (not a walk of _fast: a stream evicts at every key)
            if self._fast.get(shapes, (None,))[0] is rec:
                del self._fast[shapes]
        rec.fast_shapes.clear()
        if rec.patches is not None:
            rec.patches.remove()
            rec.patches = None
        rec.status = EVICTED
        rec.drop_variant()
        rec.reason = f"evicted: budget of {self.options.max_variants} variants"
        del self._records[rec.key]
        self._history.append(rec)
        self.counters.evictions += 1
        stats.COUNTERS.evictions += 1

    # -- compiling --------------------------------------------------------------------------
    @property
    def report(self) -> RegionReport:
        """The function's regions (computed at the first call)."""
        report = self._report
        if report is None:
            ex = self.executable
            report = find_regions(ex.fn, ex.program)
            threshold = self.options.scd_threshold
            if report.scd < threshold:
                self.skip_reason = f"function SCD {report.scd:.2f} < scd_threshold {threshold}"
            elif not report.compilable:
                self.skip_reason = "no compilable region"
            self._report = report
        return report

    def _submit(self, job: _Job | _Tier3Job) -> None:
        if self.options.background:
            WORKER.submit(job)
        else:
            run_with_timeout(job)

    def _compile(self, rec: VariantRecord) -> None:
        with stats.LOCK:
            if rec.status != QUEUED:
                return
            rec.status = COMPILING
            rec.compile_started = time.monotonic()
        ref = self.policy.reference_values(rec.key, rec.values)
        ref_env = dict(zip(self.variables, ref, strict=True))
        t0 = time.perf_counter()
        timeout = self.options.compile_timeout_s
        deadline = None if timeout is None else time.monotonic() + timeout
        with stats.LOCK:
            template = self._lender()
            n = len(self.report.compilable)
            rec.stage = (
                f"lowering {n} region{'s' * (n != 1)}"
                if template is None or template.variant is None or not template.variant.generic
                else f"sharing the native code of {format_key(template.key)}"
            )
        try:
            variant = self.compiler.compile(
                self.executable,
                self.report,
                rec.key,
                ref_env,
                rec.check,
                deadline,
                None if template is None else template.variant,
            )
        except CompileCancelled:
            return
        except Exception as exc:  # any failure of a lowering: recorded, the key interpreted
            self._fail(rec, f"{type(exc).__name__}: {exc}")
            return
        ms = (time.perf_counter() - t0) * 1e3
        with stats.LOCK:
            if rec.status != COMPILING:  # abandoned meanwhile
                return
            self._install(rec, variant, ms)
        self._tier3(rec, variant, ref_env)

    def _install(self, rec: VariantRecord, variant: Variant, ms: float) -> None:
        """A compiled record becomes ready (called under the lock)."""
        rec.variant = variant
        rec.shares_code_with = variant.shares_code_with
        rec.compile_ms = ms
        rec.patterns = variant.patterns
        rec.status = READY  # hot-patch: the next call of the key takes the variant
        rec.stage = ""
        fn = variant.function
        if self._mismatch is _NoExecutorYet:
            self._mismatch, self._failure = _exec_errors()
        if fn.direct is not None and not fn.direct_needs_dims and self._bind is None:
            self._bind = fn.direct.bind
        self.counters.compiles += 1
        self.counters.compile_ms += ms
        stats.COUNTERS.compiles += 1
        stats.COUNTERS.compile_ms += ms

    def _tier3(self, rec: VariantRecord, variant: Variant, ref_env: Mapping[str, int]) -> None:
        """Generated C for the key's chains (tier 3), patched in when built."""
        if not variant.has_chains:
            return
        if not self.options.tier3:
            rec.tier3 = "off (tier3=False)"
            return
        native_tier()
        tier3 = importlib.import_module("shapevm.jit.backend.tier3")
        why = tier3.available()
        least = self.options.tier3_min_elements
        largest = tier3.chain_elements(variant, ref_env)
        if why is None and largest < least:
            # Generated code saves too little per call here to pay for its compile: a
            # 1024-wide chain of 256 rows (262144 elements) took 289 us in tier 2 and 236 in
            # tier 3, about 0.2 ns an element, and a library costs 80-200 ms of a core while
            # the calls beside it run slower on a machine with few cores.
            why = (
                f"its chains are small at this shape (the largest {largest} elements, "
                f"below tier3_min_elements={least}): tier 2 runs them about as fast"
            )
        if why is not None:
            with stats.LOCK:
                rec.tier3 = f"skipped: {why}"
                self.counters.tier3_skipped += 1
                stats.COUNTERS.tier3_skipped += 1
            return
        rec.tier3 = "compiling"
        rec.tier3_started = time.monotonic()
        rec.stage = "tier 3: generating and compiling C for the chains"
        try:
            patches = tier3.generate(variant, ref_env, rec.key[0] == "exact", rec.check)
        except CompileCancelled:
            rec.stage = ""
            return
        except Exception as exc:
            with stats.LOCK:
                rec.stage = ""
                rec.tier3 = f"failed: {type(exc).__name__}: {exc}"
                self.counters.tier3_failures += 1
                stats.COUNTERS.tier3_failures += 1
            return
        with stats.LOCK:
            rec.stage = ""
            if rec.status != READY:  # evicted meanwhile: take the kernels out again
                patches.remove()
                return
            rec.patches = patches
            rec.tier = 3 if patches.installed else 2
            rec.tier3_ms = patches.compile_ms
            rec.tier3_build_ms = tuple(patches.build_ms)
            rec.tier3 = "ready" if not patches.skipped else "partial: " + "; ".join(patches.skipped)
            self.counters.tier3_builds += patches.built
            self.counters.tier3_ms += patches.compile_ms
            stats.COUNTERS.tier3_builds += patches.built
            stats.COUNTERS.tier3_ms += patches.compile_ms

    def _fail(self, rec: VariantRecord, reason: str, timeout: bool = False) -> None:
        with stats.LOCK:
            if rec.status not in (QUEUED, COMPILING):
                return
            rec.status = FAILED
            self._failed_records += 1
            rec.reason = reason
            rec.stage = ""
            rec.cancelled = True
            for c in (self.counters, stats.COUNTERS):
                c.failures += 1
                c.timeouts += timeout

    def _abandon(self, rec: VariantRecord, reason: str) -> None:
        self._fail(rec, reason, timeout=True)

    # -- looking inside -----------------------------------------------------------------------
    def records(self) -> list[VariantRecord]:
        with stats.LOCK:
            return [*self._history, *self._records.values()]

    def info(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.records()]

    def variant(self, key: Key) -> Variant | None:
        rec = self._records.get(key)
        return rec.variant if rec is not None else None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the compile queue is drained (all engines share it)."""
        return WORKER.wait(timeout)

    def reset_counters(self) -> None:
        with stats.LOCK:
            self.counters.reset()
            for rec in self._records.values():
                rec.hits = 0


__all__ = ["COMPILING", "EVICTED", "FAILED", "QUEUED", "READY", "JitEngine", "VariantRecord"]


def _exec_errors() -> tuple[type[Exception], type[Exception]]:
    """The executor's exceptions: a call it refuses (its operands), one that failed on the
    data (an index out of range)."""
    function = native_tier().function
    return function.ExecMismatch, function.ExecFailure
