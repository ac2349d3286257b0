"""Random ops defined without rng_seed= and rng_offset= (as Thunder's dropout and nvFuser's random tests
write them): each execute draws the seed and offset, from braze's generator for numpy inputs and from
torch's for torch tensors. Consecutive executes differ, reseeding repeats them, and the draw changes no
plan (a seed is a launch argument)."""

from __future__ import annotations

import numpy as np
import pytest

import braze
from braze import DataType, FusionDefinition


def dropout(fd, p=0.25):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    keep = fd.ops.ge(fd.ops.rand_like(x), p)
    fd.add_output(fd.ops.where(keep, fd.ops.mul(x, 1.0 / (1.0 - p)), 0.0))
    return x


def test_consecutive_executes_differ_and_reseeding_repeats_them():
    with FusionDefinition() as fd:
        dropout(fd)
    x = np.ones((64, 33), np.float32)
    braze.manual_seed(1234)
    first, second = fd.execute([x])[0], fd.execute([x])[0]
    assert not np.array_equal(first, second)
    braze.manual_seed(1234)
    np.testing.assert_array_equal(fd.execute([x])[0], first)
    np.testing.assert_array_equal(fd.execute([x])[0], second)
    # About a quarter dropped, the rest scaled.
    assert 0.15 < np.mean(first == 0) < 0.35
    assert set(np.unique(first)) <= {0.0, np.float32(1 / 0.75)}


def test_drawing_seeds_plans_once():
    with FusionDefinition() as fd:
        dropout(fd)
    x = np.ones((8, 129), np.float32)
    fd.execute([x])
    plans = len(fd._host_caches["auto", "h100"])  # shared with identical definitions of other tests
    assert fd.explain([x]).cache == "hit"
    fd.execute([x])
    assert len(fd._host_caches["auto", "h100"]) == plans  # no new plan, whatever was drawn


def test_two_random_ops_draw_different_streams():
    with FusionDefinition() as fd:
        shape = [fd.define_scalar(DataType.Int64), 16]
        fd.add_output(fd.ops.uniform(0.0, 1.0, shape))
        fd.add_output(fd.ops.normal(0.0, 1.0, shape))
        fd.add_output(fd.ops.uniform(0.0, 1.0, shape))
    a, n, b = fd.execute([4])
    assert a.shape == (4, 16) and n.shape == (4, 16)
    assert not np.array_equal(a, b)
    assert 0.0 <= a.min() and a.max() < 1.0


def test_inputs_defined_after_a_random_op_keep_their_positions():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        noise = fd.ops.rand_like(x)
        s = fd.define_scalar(DataType.Double)
        fd.add_output(fd.ops.add(fd.ops.mul(x, s), fd.ops.mul(noise, 0.0)))
    (out,) = fd.execute([np.arange(5, dtype=np.float32), 2.0])
    np.testing.assert_array_equal(out, np.arange(5, dtype=np.float32) * 2)
    assert "__global__" in fd.cuda_code_for([np.arange(5, dtype=np.float32), 2.0])


def test_the_explicit_form_keeps_its_meaning():
    def define(fd):
        fd.add_output(fd.ops.uniform(0.0, 1.0, [3, 5], rng_seed=7, rng_offset=0))

    with FusionDefinition() as fd:
        define(fd)
    np.testing.assert_array_equal(fd.execute([])[0], fd.execute([])[0])


def test_a_seed_without_an_offset_is_refused():
    with FusionDefinition() as fd:
        with pytest.raises(TypeError, match="both rng_seed= and rng_offset=, or neither"):
            fd.ops.uniform(0.0, 1.0, [3], rng_seed=1)


def test_a_definition_by_id_draws_too():
    with FusionDefinition() as fd:
        dropout(fd)
    again = FusionDefinition(fd.id())
    x = np.ones((4, 8), np.float32)
    braze.manual_seed(5)
    want = fd.execute([x])[0]
    braze.manual_seed(5)
    np.testing.assert_array_equal(again.execute([x])[0], want)


def test_manual_seed_takes_an_int():
    with pytest.raises(TypeError, match="expected an int"):
        braze.manual_seed(1.5)


torch_devices = []
try:
    import torch

    torch_devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
except ImportError:
    torch = None


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("device", torch_devices)
def test_torch_inputs_draw_from_torch_generator(device):
    with FusionDefinition() as fd:
        dropout(fd)
    x = torch.ones(32, 64, device=device)
    torch.manual_seed(0)
    first, second = fd.execute([x])[0], fd.execute([x])[0]
    assert not torch.equal(first, second)
    torch.manual_seed(0)
    assert torch.equal(fd.execute([x])[0], first)
    assert torch.equal(fd.execute([x])[0], second)
    if device == "cuda":
        generator = torch.cuda.default_generators[x.device.index]
        before = generator.get_offset()
        fd.execute([x])
        assert generator.get_offset() > before  # what the fusion drew is not drawn again by torch


def test_the_printed_script_and_a_reproducer_leave_the_drawn_seeds_out():
    """repr(fd) (and so repro_script) declared the drawn seed and offset as scalar inputs, so the rebuilt
    definition wanted 3 inputs where the caller passes 1; it now calls the random op without them too."""
    with FusionDefinition() as fd:
        dropout(fd)
    text = repr(fd)
    assert "rng_seed" not in text and "define_scalar(None" not in text, text
    namespace = {}
    exec(text, namespace)
    rebuilt = namespace["fd"]
    x = np.ones((16, 8), np.float32)
    braze.manual_seed(7)
    want = fd.execute([x])[0]
    braze.manual_seed(7)
    np.testing.assert_array_equal(rebuilt.execute([x])[0], want)
    script = fd.repro_script([x])
    exec(script, {})  # runs without a count error
    with FusionDefinition() as explicit:
        y = explicit.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        seed, offset = explicit.define_scalar(DataType.Int64), explicit.define_scalar(DataType.Int64)
        explicit.add_output(explicit.ops.uniform(0.0, 1.0, [y.size(0)], rng_seed=seed, rng_offset=offset))
    assert "rng_seed=S1, rng_offset=S2" in repr(explicit)


def test_a_wrong_input_count_does_not_count_the_drawn_seeds():
    with FusionDefinition() as fd:
        dropout(fd)
    x = np.ones((2, 3), np.float32)
    for inputs in ([], [x, x]):
        with pytest.raises(ValueError, match=rf"expected 1 inputs, got {len(inputs)} \(the seed and offset"):
            fd.execute(inputs)


def test_a_seed_past_int64_draws_like_its_bits():
    # braze.manual_seed takes any 64-bit seed, as torch.manual_seed does (2**63 and above, or -1): the
    # drawn seed input holds the same bits, so the draws are those of the equal signed seed.
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.uniform(0.0, 1.0, [4], dtype=DataType.Float))
    draws = {}
    for seed in (2**63, -2**63, 2**64 - 1, -1):
        braze.manual_seed(seed)
        draws[seed] = fd.execute([])[0]
    np.testing.assert_array_equal(draws[2**63], draws[-2**63])
    np.testing.assert_array_equal(draws[2**64 - 1], draws[-1])
    assert not np.array_equal(draws[-1], draws[2**63])


@pytest.mark.parametrize("dtype, low, high", [(DataType.Half, -1.5, 3.7), (DataType.BFloat16, 2.0, 3.3),
                                              (DataType.Float, 0.0, 0.1)])
def test_uniform_never_reaches_maxval_as_the_dtype_holds_it(dtype, low, high):
    # 3.7 is 3.69921875 in Half, below 3.7: a draw that rounds to it is maxval, which the range excludes
    # (torch's uniform_ and nvFuser's test_uniform_range); it becomes minval, in kernels and reference alike.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    np_dtype = {DataType.Half: np.float16, DataType.BFloat16: ml_dtypes.bfloat16, DataType.Float: np.float32}[dtype]
    with FusionDefinition() as fd:
        seed, offset = fd.define_scalar(DataType.Int), fd.define_scalar(DataType.Int)
        fd.add_output(fd.ops.uniform(low, high, [1 << 18], dtype=dtype, rng_seed=seed, rng_offset=offset))
    (got,) = fd.execute([123, 0])
    (ref,) = braze.execute.reference(fd, [123, 0])
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), np.asarray(ref).view(np.uint8))
    values = np.asarray(got).astype(np.float64)
    assert values.min() >= low and values.max() < float(np_dtype(high))


def test_drawn_inputs_stay_a_plain_list_for_the_gpu_fast_path():
    """FusionCache.run_torch takes an exact list (a subclass goes the general way): the inputs with their drawn
    seed and offset inserted are one, with or without a define_vector input spread among them."""
    from braze import execute as bx
    from braze import generator

    for with_vector in (False, True):
        with FusionDefinition() as fd:
            r = fd.ops.uniform(0.0, 1.0, [4], dtype=DataType.Float)
            t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
            if with_vector:
                t = fd.ops.reshape(t, fd.define_vector(1))
            fd.add_output(fd.ops.add(r, t))
        inputs = [np.zeros(4, np.float32)] + ([[4]] if with_vector else [])
        drawn = generator.with_drawn(fd, bx._flatten(inputs, fd))
        assert type(bx.plain_list(drawn)) is list and len(drawn) == len(fd._fusion.inputs())
        assert (type(drawn) is list) != with_vector  # only a spread vector is marked as flattened


def test_noise_shaped_like_a_computed_tensor_computes_only_the_noise():
    # randn_like(cast(b)) reads the cast only for its shape: no kernel computes it (one with no outputs
    # would launch an empty grid), and the noise follows the same draw as a randn_like of b's shape.
    with FusionDefinition() as fd:
        a = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        b = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Half)
        noise = fd.ops.randn_like(fd.ops.cast(b, DataType.Float), rng_seed=7, rng_offset=0)
        fd.add_output(fd.ops.add(a, noise))
    with FusionDefinition() as direct:
        a2 = direct.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        direct.add_output(direct.ops.add(a2, direct.ops.randn_like(a2, rng_seed=7, rng_offset=0)))
    a_in = np.zeros((5, 7), np.float32)
    b_in = np.ones((5, 7), np.float16)
    plan = fd.explain([a_in, b_in])
    assert [s.scheduler for s in plan.segments] == ["pointwise"], plan
    assert len(plan.segments[0].outputs) == 1
    np.testing.assert_array_equal(fd.execute([a_in, b_in])[0], direct.execute([a_in])[0])


def test_an_index_op_read_only_for_its_shape_still_checks_its_indices():
    # randn_like(index_select(x, i)): the index_select's values are never read, but a bad index is reported
    # as the reference evaluator reports it.
    x = np.random.default_rng(0).random((64, 8), dtype=np.float32)
    index = np.arange(64)
    index[-1] = 1000
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int64)
        fd.add_output(fd.ops.randn_like(fd.ops.index_select(t, i, 0), rng_seed=1, rng_offset=0))
    with pytest.raises(IndexError, match="1000"):
        fd.execute([x, index])
    index[-1] = 3
    assert fd.execute([x, index])[0].shape == (64, 8)
