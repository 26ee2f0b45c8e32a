"""Decoder hardening: mutated files load a program or raise BytecodeFormatError, nothing else.

Most mutations are made *behind* the checksums (which are recomputed), so they reach the
structural decoder rather than stopping at the first CRC. A decoded program then goes
through the verifier, which must report problems as diagnostics and never crash.
"""

from __future__ import annotations

import random
import struct
import time
import tracemalloc
from collections.abc import Callable, Iterator

from shapevm.bytecode import BytecodeFormatError, check, deserialize, serialize
from shapevm.bytecode.binary_reader import decode
from tests.bytecode.programs import programs
from tests.bytecode.test_binary import fix_checksums

N_INPUTS = 10_000
TIME_LIMIT_S = 30.0
ABSURD = [0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 10**9, 65, 256, 0xFFFF, 2**64 - 1, 2**63]

Mutation = Callable[[random.Random, bytes], bytes]


def truncate(rng: random.Random, blob: bytes) -> bytes:
    return blob[: rng.randrange(len(blob))]


def flip_bits(rng: random.Random, blob: bytes) -> bytes:
    out = bytearray(blob)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def random_run(rng: random.Random, blob: bytes) -> bytes:
    out = bytearray(blob)
    start = rng.randrange(len(out))
    n = rng.randint(1, 16)
    out[start : start + n] = rng.randbytes(n)
    return bytes(out[: len(blob)])


def absurd_field(rng: random.Random, blob: bytes) -> bytes:
    out = bytearray(blob)
    value = rng.choice(ABSURD)
    width = 8 if value >= 2**32 or rng.random() < 0.3 else 4
    at = rng.randrange(len(out) - width)
    out[at : at + width] = struct.pack("<Q" if width == 8 else "<I", value)
    return bytes(out)


def small_int(rng: random.Random, blob: bytes) -> bytes:
    """Tags, kinds and opcodes: set one byte to a small value."""
    out = bytearray(blob)
    out[rng.randrange(len(out))] = rng.choice([0, 1, 2, 3, 4, 5, 13, 14, 64, 255])
    return bytes(out)


MUTATIONS: list[Mutation] = [truncate, flip_bits, random_run, absurd_field, small_int]


def inputs(rng: random.Random) -> Iterator[bytes]:
    seeds = [serialize(p) for p in programs().values()]
    for i in range(N_INPUTS):
        if i % 50 == 0:
            yield rng.randbytes(rng.randint(0, 300))
            continue
        blob = rng.choice(seeds)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            if len(blob) > 8:
                blob = rng.choice(MUTATIONS)(rng, blob)
        if len(blob) >= 64 and rng.random() < 0.85:
            blob = fix_checksums(blob)
        yield blob


def outcome(blob: bytes) -> str:
    try:
        program = deserialize(blob, verify=False)
    except BytecodeFormatError:
        return "format error"
    check(program)  # must report, never raise
    return "loaded"


def test_mutated_inputs_load_or_raise_format_error() -> None:
    rng = random.Random(20240521)
    start = time.perf_counter()
    seen: dict[str, int] = {}
    count = 0
    for blob in inputs(rng):
        try:
            result = outcome(blob)
        except Exception as exc:  # pragma: no cover - the failure report
            raise AssertionError(f"input {count} ({blob[:16]!r}...) raised {exc!r}") from exc
        seen[result] = seen.get(result, 0) + 1
        count += 1
    elapsed = time.perf_counter() - start
    assert count >= N_INPUTS
    assert elapsed < TIME_LIMIT_S, f"{count} inputs took {elapsed:.1f} s"
    assert seen.get("format error", 0) > N_INPUTS // 2
    assert seen.get("loaded", 0) > 0, "no mutation got past the decoder"


def test_absurd_counts_allocate_no_more_than_the_input_justifies() -> None:
    rng = random.Random(7)
    seed = serialize(programs()["control"])
    tracemalloc.start()
    try:
        for _ in range(300):
            blob = fix_checksums(absurd_field(rng, seed))
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            try:
                decode(blob)
            except BytecodeFormatError:
                pass
            peak = tracemalloc.get_traced_memory()[1] - base
            assert peak < 200 * len(blob) + 200_000, f"decoding used {peak} bytes"
    finally:
        tracemalloc.stop()
