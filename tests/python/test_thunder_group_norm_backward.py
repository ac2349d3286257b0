"""The group-norm backward as Lightning Thunder 0.2.6 writes it for nn.GroupNorm (its nvFuser executor's
definition, captured by running Thunder on braze; reshapes to [n, groups, channels per group, h, w] and
back): grad_in per group (a persistent row of channels per group x h x w), and the weight and bias grads,
both sums over dims [0, 2, 3] of [n, c, h, w]. The two grads are one kernel: they read grad_out alike
and neither fits the grad_in kernel's rows (the segmenter tries each reader of a tensor with every
earlier reader's group, not only the first's). Plans and values against the reference evaluator."""

import numpy as np
import pytest

import helpers
from braze import DataType, FusionDefinition

F32 = DataType.Float


def define_thunder_group_norm_backward(fd, n, c, groups, h, w):
    """Inputs: weight [c], mean [n, groups], grad_out [n, c, h, w], x [n, c, h, w], rstd [n, groups, 1, 1, 1].
    Outputs: the bias grad [c], the weight grad [c], grad_in [n, c, h, w]."""
    per = c // groups
    grouped = [n, groups, per, h, w]
    count = float(per * h * w)

    def scalar(value):
        return fd.define_scalar(value, dtype=DataType.Double)

    def group_stat(t):  # [n, groups] -> [n, groups, 1, 1, 1]
        return fd.ops.broadcast_in_dim(t, shape=[n, groups, 1, 1, 1], broadcast_dims=[0, 1])

    def spread(t):  # [n, groups, 1, 1, 1] -> grouped
        return fd.ops.broadcast_in_dim(t, shape=grouped, broadcast_dims=[0, 1, 2, 3, 4])

    def tensor(shape):  # size-1 dims are broadcasts (contiguity None), as Thunder defines them
        return fd.define_tensor(shape=shape, contiguity=[None if d == 1 else True for d in shape], dtype=F32)

    weight, mean = tensor([c]), tensor([n, groups])
    grad_out, x, rstd = tensor([n, c, h, w]), tensor([n, c, h, w]), tensor([n, groups, 1, 1, 1])

    weight_4d = fd.ops.broadcast_in_dim(fd.ops.reshape(weight, new_shape=[1, c, 1, 1]), shape=[n, c, h, w],
                                        broadcast_dims=[0, 1, 2, 3])
    g = fd.ops.reshape(fd.ops.mul(weight_4d, grad_out), new_shape=grouped)
    xg = fd.ops.reshape(x, new_shape=grouped)
    centered = fd.ops.sub(xg, spread(group_stat(mean)))
    rstd_grouped = spread(rstd)
    dvar_part = fd.ops.sum(fd.ops.mul(centered, g), dims=[2, 3, 4], keepdim=False, dtype=DataType.Null)
    scaled = fd.ops.mul(rstd_grouped, g)
    neg_sum = fd.ops.sum(fd.ops.neg(scaled), dims=[2, 3, 4], keepdim=False, dtype=DataType.Null)
    dvar = fd.ops.mul(fd.ops.mul(scalar(-0.5), group_stat(dvar_part)), fd.ops.pow(rstd, scalar(3.0)))
    dvar = fd.ops.squeeze(dvar, dims=[2, 3, 4], squeeze_expanded=False)
    x_hat = fd.ops.reshape(fd.ops.mul(centered, rstd_grouped), new_shape=[n, c, h, w])
    from_var = fd.ops.mul(fd.ops.mul(scalar(2.0), spread(group_stat(dvar))),
                          fd.ops.sub(xg, spread(group_stat(mean))))
    from_var = fd.ops.mul(from_var, fd.ops.cast(fd.ops.reciprocal(scalar(count)), dtype=F32))
    from_mean = fd.ops.mul(scalar(1.0 / count), spread(group_stat(neg_sum)))
    grad_in = fd.ops.add(scaled, fd.ops.add(from_mean, from_var))
    grad_weight = fd.ops.sum(fd.ops.mul(x_hat, grad_out), dims=[0, 2, 3], keepdim=False, dtype=DataType.Null)
    grad_bias = fd.ops.sum(grad_out, dims=[0, 2, 3], keepdim=False, dtype=DataType.Null)
    fd.add_output(grad_bias)
    fd.add_output(grad_weight)
    fd.add_output(fd.ops.reshape(grad_in, new_shape=[n, c, h, w]))


def group_norm_inputs(rng, n, c, groups, h, w):
    def randn(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    return [randn(c), randn(n, groups), randn(n, c, h, w), randn(n, c, h, w),
            (0.5 + rng.random((n, groups, 1, 1, 1))).astype(np.float32)]


SHAPES = [
    (4, 64, 8, 16, 16),  # the captured one
    (3, 12, 3, 5, 7),    # odd sizes
    (1, 8, 4, 3, 3),     # batch 1
    (2, 6, 1, 4, 4),     # one group: a layer norm over [c, h, w]
    (2, 6, 6, 4, 4),     # a group per channel: an instance norm
    (5, 4, 2, 1, 1),     # h = w = 1
]


@pytest.mark.parametrize("n,c,groups,h,w", SHAPES)
def test_thunder_group_norm_backward_plans_its_weight_and_bias_grads_as_one_kernel(n, c, groups, h, w):
    with FusionDefinition() as fd:
        define_thunder_group_norm_backward(fd, n, c, groups, h, w)
    plan = fd.explain(group_norm_inputs(np.random.default_rng(0), n, c, groups, h, w))
    kernels = [s for s in plan.segments if s.kind == "kernel"]
    assert len(kernels) <= 2, str(plan)
    # The kernel that writes the bias grad writes the weight grad too.
    bias, weight = (v.name for v in fd._fusion.outputs()[:2])
    writers = {name: [s.id for s in kernels if name in s.outputs] for name in (bias, weight)}
    assert writers[bias] == writers[weight] and len(writers[bias]) == 1, str(plan)


@pytest.mark.parametrize("n,c,groups,h,w", SHAPES)
def test_thunder_group_norm_backward_matches_the_reference(n, c, groups, h, w):
    with FusionDefinition() as fd:
        define_thunder_group_norm_backward(fd, n, c, groups, h, w)
    inputs = group_norm_inputs(np.random.default_rng(n * c + h * w), n, c, groups, h, w)
    assert len(helpers.execute_near_reference(fd, inputs, rtol=1e-4)) == 3
