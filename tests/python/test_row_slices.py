"""Outputs that keep some rows of a value a norm computes (scheduler/reduction/row_slices.h): a ViT's final norm
read at the class token alone, a language model's last token after its final norm, a ViT's first norm
backward whose grad_in loses the class token's row (and is reshaped into the patch linear's rows) beside the
class token's row. The persistent kernel stores each kept element where the output has it, instead of a
second kernel (or the whole value written for a view) slicing it. Values against the reference evaluator on
the test device, at odd sizes, a row dim of 1 or 2, bf16 and fp32, misaligned inputs; slices of the reduced
dim or with a step are no row slices and stay right."""

import ml_dtypes
import numpy as np
import pytest

import helpers
from braze import DataType, FusionDefinition
from test_thunder_backward_definitions import define_thunder_layer_norm_backward, thunder_inputs

F32, BF16 = DataType.Float, DataType.BFloat16
NP = {BF16: np.dtype(ml_dtypes.bfloat16), F32: np.dtype(np.float32)}


def layer_norm(fd, x, dtype):
    """x [b, t, c] normalized over c (no weight), in float, cast back to dtype."""
    xf = fd.ops.cast(x, dtype=F32)
    var, mean = fd.ops.var_mean(xf, dims=[2], correction=0, keepdim=True)
    rstd = fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5, dtype=DataType.Double)))
    full = dict(shape=x.shape(), broadcast_dims=[0, 1, 2])
    y = fd.ops.mul(fd.ops.sub(xf, fd.ops.broadcast_in_dim(mean, **full)), fd.ops.broadcast_in_dim(rstd, **full))
    return fd.ops.cast(y, dtype=dtype)


@pytest.mark.parametrize("dtype", [BF16, F32])
@pytest.mark.parametrize("b,t,c", [(2, 65, 128), (3, 9, 40), (1, 2, 7), (4, 1, 64)])
@pytest.mark.parametrize("which", ["first", "last"])
@pytest.mark.parametrize("layout", ["dense", "misaligned"])
def test_a_norm_read_at_one_token_writes_that_token_alone(dtype, b, t, c, which, layout):
    """The class token (first) or the last token of the normed sequence: one kernel writing [b, 1, c]."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, c], contiguity=[True] * 3, dtype=dtype)
        y = layer_norm(fd, x, dtype)
        start = 0 if which == "first" else t - 1
        fd.add_output(fd.ops.slice(y, start_indices=[0, start, 0], end_indices=[b, start + 1, c]))
    x = np.random.default_rng(b * t + c).standard_normal((b, t, c)).astype(NP[dtype])
    inputs = [helpers.misaligned(x) if layout == "misaligned" else x]
    kernels, plan = helpers.kernels_of(fd, inputs)
    assert [k.scheduler for k in kernels] == ["inner_persistent"] and plan.startswith("plan: 1 segment(s)"), plan
    helpers.execute_near_reference(fd, inputs, rtol=2e-2 if dtype == BF16 else 1e-5)


@pytest.mark.parametrize("dtype", [BF16, F32])
@pytest.mark.parametrize("b,t,c", [(2, 65, 128), (3, 10, 40), (1, 3, 7)])
def test_rows_without_the_first_reshaped_and_the_first_row_beside_them(dtype, b, t, c):
    """The ViT's split of a normed grad: rows 1.. of each sequence (an output, and reshaped to [b (t - 1), c]
    another), and row 0: one kernel writing all three."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, c], contiguity=[True] * 3, dtype=dtype)
        y = layer_norm(fd, x, dtype)
        patches = fd.ops.slice(y, start_indices=[0, 1, 0], end_indices=[b, t, c])
        fd.add_output(patches)
        fd.add_output(fd.ops.reshape(patches, new_shape=[b * (t - 1), c]))
        fd.add_output(fd.ops.slice(y, start_indices=[0, 0, 0], end_indices=[b, 1, c]))
    inputs = [np.random.default_rng(t).standard_normal((b, t, c)).astype(NP[dtype])]
    kernels, plan = helpers.kernels_of(fd, inputs)
    assert [k.scheduler for k in kernels] == ["inner_persistent"], plan
    helpers.execute_near_reference(fd, inputs, rtol=2e-2 if dtype == BF16 else 1e-5)


@pytest.mark.parametrize("batch,seq,hidden,width", [(2, 65, 128, 384), (3, 10, 40, 24), (1, 17, 33, 8)])
def test_the_vit_first_norm_backward_slices_its_grad_in_the_inner_outer_kernel(batch, seq, hidden, width):
    """Thunder's layer-norm backward with its grad_in sliced as a ViT's first block writes it: the patches'
    rows (reshaped for the patch linear) and the class token's row; one inner-outer segment."""
    with FusionDefinition() as fd:
        grad_in = define_thunder_layer_norm_backward(fd, batch, seq, hidden, width, grad_in_outputs=False)
        patches = fd.ops.slice(grad_in, start_indices=[0, 1, 0], end_indices=[batch, seq, hidden])
        fd.add_output(patches)
        fd.add_output(fd.ops.reshape(patches, new_shape=[batch * (seq - 1), hidden]))
        fd.add_output(fd.ops.slice(grad_in, start_indices=[0, 0, 0], end_indices=[batch, 1, hidden]))
    inputs = thunder_inputs(np.random.default_rng(seq), batch, seq, hidden, width)
    kernels, plan = helpers.kernels_of(fd, inputs)
    assert [k.scheduler for k in kernels] == ["inner_outer_persistent"], plan
    helpers.execute_near_reference(fd, inputs, rtol=2e-2)


@pytest.mark.parametrize("kind", ["reduced dim", "step 2"])
def test_slices_that_keep_no_whole_rows_are_no_row_slices(kind):
    """A slice of the normed dim, or of every other row: another kernel (or a view) slices it, and right."""
    b, t, c = 2, 9, 24
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, c], contiguity=[True] * 3, dtype=F32)
        y = layer_norm(fd, x, F32)
        if kind == "reduced dim":
            fd.add_output(fd.ops.slice(y, start_indices=[0, 0, 4], end_indices=[b, t, c]))
        else:
            fd.add_output(fd.ops.slice(y, start_indices=[0, 0, 0], end_indices=[b, t, c], strides=[1, 2, 1]))
    inputs = [np.random.default_rng(3).standard_normal((b, t, c)).astype(np.float32)]
    kernels, plan = helpers.kernels_of(fd, inputs)
    assert "segment(s), 1 kernel(s), 0 alias" not in plan.splitlines()[0], plan
    helpers.execute_near_reference(fd, inputs, rtol=1e-5)
