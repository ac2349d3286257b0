"""fd.ops.embedding_fwd, as Lightning Thunder's nvFuser executor calls it for F.embedding with max_norm:
the output and the weight's in-place renormalization against torch.nn.functional.embedding, on torch
CPU tensors (the simulated device) and CUDA tensors where torch sees a GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest

from braze import DataType, FusionDefinition, execute

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TORCH_TO_BRAZE = {torch.float32: DataType.Float, torch.float64: DataType.Double, torch.bfloat16: DataType.BFloat16,
                  torch.float16: DataType.Half}


def thunder_embedding(index_rank, dtype, max_norm, norm_type, padding_idx=None):
    """The definition Thunder's nvfuserex_impl.embedding writes: every argument a constant Scalar or None."""
    with FusionDefinition() as fd:
        index = fd.define_tensor(shape=[-1] * index_rank, contiguity=[True] * index_rank, dtype=DataType.Int64)
        weight = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=TORCH_TO_BRAZE[dtype])
        constants = [None if v is None else fd.define_scalar(v, dtype=kind)
                     for v, kind in ((padding_idx, DataType.Int64), (max_norm, DataType.Double),
                                     (norm_type, DataType.Double))]
        out = fd.ops.embedding_fwd(index, weight, *constants, fd.define_scalar(False, dtype=DataType.Bool),
                                   fd.define_scalar(False, dtype=DataType.Bool))
        fd.add_output(out)
    return fd


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_shape, rows, dim, max_norm, norm_type, dtype", [
    ((7,), 10, 5, 1.0, 2.0, torch.float32),          # some rows above the norm, some below
    ((3, 4), 10, 33, 2.5, 1.0, torch.float32),       # 2-D indices: the output keeps their shape
    ((3, 4, 2), 50, 129, 3.0, 3.0, torch.float32),   # a general p
    ((6,), 4, 7, 1.0, math.inf, torch.float32),      # the max norm; repeated indices
    ((6,), 4, 7, 1.0, 0.0, torch.float32),           # the count of nonzeros
    ((1000,), 300, 64, 1.0, 2.0, torch.float64),
    ((5, 9), 17, 48, 2.0, 2.0, torch.bfloat16),      # norms in Float, rows scaled and rounded to bf16
    ((1,), 1, 1, 0.5, 2.0, torch.float16),
])
def test_max_norm_renormalizes_output_and_weight_as_torch(device, index_shape, rows, dim, max_norm, norm_type, dtype):
    gen = torch.Generator().manual_seed(rows * dim)
    weight = (torch.randn(rows, dim, generator=gen, dtype=torch.float64) * 2).to(dtype).to(device)
    index = torch.randint(0, rows, index_shape, generator=gen).to(device)
    untouched = weight.clone()
    # torch's CPU kernel is the expectation on either device: its CUDA kernel sums pow(x, p) without
    # the absolute value for p other than 1 and 2 (a negative sum for odd p; no max for p = inf, no count
    # of nonzeros for p = 0), where the CPU one computes the p-norm the documentation states.
    want_weight = weight.cpu().clone()
    want = torch.nn.functional.embedding(index.cpu(), want_weight, max_norm=max_norm, norm_type=norm_type)
    fd = thunder_embedding(len(index_shape), dtype, max_norm, norm_type)
    outputs = fd.execute([index, weight])
    assert len(outputs) == 1  # the weight's update is in place, not returned
    assert outputs[0].device == weight.device
    tolerance = {"atol": 1e-2, "rtol": 1e-2} if dtype in (torch.bfloat16, torch.float16) else {}
    torch.testing.assert_close(outputs[0].cpu(), want, **tolerance)
    torch.testing.assert_close(weight.cpu(), want_weight, **tolerance)
    assert not torch.equal(weight.cpu(), untouched.cpu()) or torch.equal(want_weight, untouched.cpu())
    # The reference evaluator agrees, and leaves rows no index names as they were.
    ref_weight = untouched.cpu().clone()
    (ref,) = execute.reference(fd, [index.cpu(), ref_weight])
    torch.testing.assert_close(torch.as_tensor(np.asarray(ref, dtype=np.float64)).to(dtype), want.cpu(), **tolerance)
    named = torch.zeros(rows, dtype=torch.bool)
    named[index.cpu().flatten()] = True
    assert torch.equal(ref_weight[~named], untouched.cpu()[~named])


def test_without_max_norm_the_weight_is_read_only():
    weight = torch.randn(11, 6)
    index = torch.tensor([[3, 0, 10], [3, 3, 1]])
    before = weight.clone()
    fd = thunder_embedding(2, torch.float32, None, 2.0, padding_idx=0)
    (out,) = fd.execute([index, weight])
    torch.testing.assert_close(out, torch.nn.functional.embedding(index, before, padding_idx=0))
    assert torch.equal(weight, before)
    assert "alias_input" not in repr(fd)


def test_the_definition_prints_and_rebuilds():
    fd = thunder_embedding(1, torch.float32, 1.0, 2.0)
    script = repr(fd)
    assert "alias_input" in script
    namespace = {}
    exec(script, {"nvfuser": __import__("braze"), "FusionDefinition": FusionDefinition, "DataType": DataType},
         namespace)
    rebuilt = next(v for v in namespace.values() if isinstance(v, FusionDefinition))
    weight = torch.randn(8, 4) * 3
    index = torch.tensor([1, 5, 1])
    w1, w2 = weight.clone(), weight.clone()
    torch.testing.assert_close(fd.execute([index, w1])[0], rebuilt.execute([index, w2])[0])
    torch.testing.assert_close(w1, w2)


def test_a_weight_that_is_not_an_input_is_scaled_in_the_output_only():
    with FusionDefinition() as fd:
        index = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int64)
        weight = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        doubled = fd.ops.mul(weight, 2.0)
        fd.add_output(fd.ops.embedding_fwd(index, doubled, None, 1.0, 2.0, False, False))
    weight = torch.randn(5, 3)
    before = weight.clone()
    index = torch.tensor([4, 0])
    (out,) = fd.execute([index, weight])
    torch.testing.assert_close(out, torch.nn.functional.embedding(index, before * 2, max_norm=1.0))
    assert torch.equal(weight, before)


def test_bad_arguments_are_refused_by_name():
    with FusionDefinition() as fd:
        index = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        weight = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        flat = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        ints = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int64)
        with pytest.raises(ValueError, match=r"embedding_fwd: input T0 must hold integer indices"):
            fd.ops.embedding_fwd(index, weight)
        with pytest.raises(ValueError, match=r"embedding_fwd: weight T2 must be 2-D"):
            fd.ops.embedding_fwd(ints, flat)
        with pytest.raises(ValueError, match=r"norm_type must be a non-negative number or inf, got -1.0"):
            fd.ops.embedding_fwd(ints, weight, None, 1.0, -1.0)
        with pytest.raises(TypeError, match=r"embedding_fwd: padding_idx must be an int"):
            fd.ops.embedding_fwd(ints, weight, 1.5)


def test_an_index_out_of_range_is_refused():
    fd = thunder_embedding(1, torch.float32, 1.0, 2.0)
    with pytest.raises(Exception, match=r"index"):
        fd.execute([torch.tensor([0, 7]), torch.randn(7, 3)])


@pytest.mark.parametrize("norm_type", [math.inf, 0.0, 2.0, 3.0])
def test_a_symbolic_norm_type_takes_its_form_at_run_time(norm_type):
    weight = torch.tensor([[3.0, 0.0, 4.0], [0.5, 0.25, 0.0]])
    index = torch.tensor([0, 1])
    with FusionDefinition() as fd:
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int64)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        p = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.embedding_fwd(i, w, None, 1.0, p, None, None))
    want_weight = weight.clone()
    want = torch.nn.functional.embedding(index, want_weight, max_norm=1.0, norm_type=norm_type)
    got_weight = weight.clone()
    (got,) = fd.execute([index, got_weight, norm_type])
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_weight, want_weight)


def test_renormalizing_refuses_an_integer_weight_and_a_second_update():
    with FusionDefinition() as fd:
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int64)
        ints = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int64)
        w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        with pytest.raises(ValueError, match=r"embedding_fwd: max_norm renormalizes the weight's rows, which must be "
                                             r"floating, got T1"):
            fd.ops.embedding_fwd(i, ints, None, 1.0)
        fd.add_output(fd.ops.embedding_fwd(i, ints))  # without max_norm an integer table is fine
        fd.add_output(fd.ops.embedding_fwd(i, w, None, 1.0))
        with pytest.raises(ValueError, match=r"embedding_fwd: the weight T2 is updated in place already"):
            fd.ops.embedding_fwd(i, w, None, 2.0)
