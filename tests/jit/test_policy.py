"""Cache policies: the specialization key of a call's dimension values."""

from __future__ import annotations

import pytest

from shapevm.jit import AdaptivePolicy, BucketPolicy, ExactPolicy, JitOptions


def test_exact_key_is_the_values():
    p = ExactPolicy()
    assert p.key((3, 64)) == ("exact", (3, 64))
    assert p.reference_values(("exact", (3, 64)), (3, 64)) == (3, 64)


def test_bucket_key_is_the_range_of_each_value():
    p = BucketPolicy([1, 8, 32, 64])
    assert p.key((1,)) == ("bucket", ((1, 8),))
    assert p.key((7,)) == ("bucket", ((1, 8),))
    assert p.key((8,)) == ("bucket", ((8, 32),))
    assert p.key((63, 5)) == ("bucket", ((32, 64), (1, 8)))
    assert p.key((64,)) == ("bucket", ((64, None),))
    assert p.key((10_000,)) == ("bucket", ((64, None),))


def test_values_below_the_first_boundary_have_no_bucket():
    p = BucketPolicy([4, 16])
    assert p.key((3,)) is None
    assert p.key((4, 2)) is None


def test_bucket_variants_are_planned_for_the_top_of_their_range():
    p = BucketPolicy([1, 8, 32])
    key = p.key((3, 40))
    assert p.reference_values(key, (3, 40)) == (7, 40)  # open bucket: the value seen


def test_adaptive_gives_frequent_keys_their_own_variant():
    p = AdaptivePolicy(exact_after=3)
    assert p.key((5,)) == ("pow2", ((4, 8),))
    assert p.key((5,)) == ("pow2", ((4, 8),))
    assert p.key((5,)) == ("exact", (5,))
    assert p.key((6,)) == ("pow2", ((4, 8),))
    assert p.key((1,)) == ("pow2", ((1, 2),))
    assert p.reference_values(("pow2", ((4, 8),)), (6,)) == (7,)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cache_mode": "fuzzy"}, "cache_mode must be one of"),
        ({"cache_mode": "bucket"}, "needs bucket_boundaries"),
        ({"cache_mode": "bucket", "bucket_boundaries": [8, 4]}, "increasing integers"),
        ({"hot_threshold": 0}, "hot_threshold must be an integer >= 1"),
        ({"scd_threshold": 1.5}, "scd_threshold must be in [0, 1]"),
        ({"compile_timeout_s": 0}, "compile_timeout_s must be > 0"),
        ({"max_variants": -1}, "max_variants must be an integer >= 1"),
    ],
)
def test_bad_options_are_refused_with_what_is_accepted(options, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        JitOptions.from_kwargs(options)


def test_unknown_option_lists_the_known_ones():
    with pytest.raises(TypeError, match=r"unknown JIT option .hot.; accepted: .*hot_threshold"):
        JitOptions.from_kwargs({"hot": 3})
    assert not JitOptions.from_kwargs({"jit": False}).enabled
    assert not JitOptions.from_kwargs({"interpret_only": True}).enabled


def test_bucket_boundaries_per_variable_and_exact_for_the_others():
    p = BucketPolicy({"b": [1, 4, 16], "s": [16, 64]}, variables=("b", "h", "s"))
    assert p.key((3, 7, 20)) == ("bucket", ((1, 4), (7, 8), (16, 64)))
    assert p.key((20, 7, 100)) == ("bucket", ((16, None), (7, 8), (64, None)))
    assert p.key((2, 7, 8)) is None  # s below its first boundary
    assert p.reference_values(p.key((3, 7, 20)), (3, 7, 20)) == (3, 7, 63)
    with pytest.raises(ValueError, match="'t', which are not dimension variables"):
        BucketPolicy({"t": [1]}, variables=("b",))


def test_per_variable_boundaries_reach_the_engine():
    import numpy as np

    import shapevm as sv

    f = sv.jit(
        lambda x: x * 2.0,
        shapes="b, n",
        cache_mode="bucket",
        bucket_boundaries={"b": [1, 4]},
        hot_threshold=1,
        background=False,
        tier3=False,
    )
    for b, n in [(1, 3), (3, 3), (2, 5)]:
        f(np.ones((b, n), np.float32))
    keys = sorted(r["key"] for r in f.jit_info())
    assert keys == [("bucket", ((1, 4), (3, 4))), ("bucket", ((1, 4), (5, 6)))]
    with pytest.raises(ValueError, match="bucket_boundaries of 'b' must be increasing"):
        JitOptions.from_kwargs({"cache_mode": "bucket", "bucket_boundaries": {"b": [4, 2]}})
