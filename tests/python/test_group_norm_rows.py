"""Group norms as Thunder writes them (thunder.torch.group_norm): x [b, c, *spatial] viewed as [b, g, c / g,
*spatial], its mean and variance over each group, the normed groups viewed back as [b, c, *spatial] and scaled
and shifted per channel; Stable Diffusion's UNet applies a SiLU after it and adds a residual before it. The view
back merges a kept dim (the group) with a reduced one (its channels): the normed value holds the rows'
elements in their order under other dims, which a kernel walking whole rows stores at their linear position
(scheduler/reduction/domain_alignment.h). One inner persistent kernel, where the norm and the affine
SiLU were two. Values against the reference evaluator at odd sizes, one channel per group, size-1 spatial
dims, bf16 and fp32, dense, misaligned and strided inputs."""

import ml_dtypes
import numpy as np
import pytest

import helpers
from braze import DataType, FusionDefinition

F32, BF16 = DataType.Float, DataType.BFloat16
NP = {BF16: np.dtype(ml_dtypes.bfloat16), F32: np.dtype(np.float32)}
LAYOUTS = {"dense": lambda a: a, "misaligned": helpers.misaligned, "strided": helpers.strided}


def tensor(fd, rank, dtype, contiguous=True):
    return fd.define_tensor(shape=[-1] * rank, contiguity=[contiguous] * rank, dtype=dtype)


def group_norm(fd, x, w, b, sizes, groups, dtype, silu=False, flat=False):
    """x [b, c, *spatial] normed per group of channels, times w [c], plus b [c] (then SiLU), cast to dtype;
    with the mean and 1 / std [b, g]. `flat` views the groups as [b, g, c / g * prod(spatial)] instead."""
    n, c, *spatial = sizes
    inner = [c // groups, *spatial]
    grouped = [n, groups, int(np.prod(inner))] if flat else [n, groups, *inner]
    xf = fd.ops.reshape(fd.ops.cast(x, F32), new_shape=grouped)
    reduced = list(range(2, len(grouped)))
    var, mean = fd.ops.var_mean(xf, dims=reduced, correction=0, keepdim=False)
    stat = dict(shape=grouped, broadcast_dims=[0, 1])
    rstd = fd.ops.rsqrt(fd.ops.add(var, 1e-5))
    normed = fd.ops.mul(fd.ops.sub(xf, fd.ops.broadcast_in_dim(mean, **stat)), fd.ops.broadcast_in_dim(rstd, **stat))
    per_channel = dict(shape=list(sizes), broadcast_dims=[1])
    y = fd.ops.add(fd.ops.mul(fd.ops.reshape(normed, new_shape=list(sizes)),
                              fd.ops.cast(fd.ops.broadcast_in_dim(w, **per_channel), F32)),
                   fd.ops.cast(fd.ops.broadcast_in_dim(b, **per_channel), F32))
    if silu:
        y = fd.ops.mul(y, fd.ops.reciprocal(fd.ops.add(fd.ops.exp(fd.ops.neg(y)), 1.0)))
    return fd.ops.cast(y, dtype), mean, rstd


def inputs(sizes, dtype, seed, count=1):
    rng = np.random.default_rng(seed)
    c = sizes[1]
    arrays = [rng.standard_normal(sizes).astype(NP[dtype]) for _ in range(count)]
    return arrays + [(1 + 0.5 * rng.standard_normal(c)).astype(NP[dtype]), rng.standard_normal(c).astype(NP[dtype])]


def assert_one_row_kernel(fd, arrays):
    kernels, plan = helpers.kernels_of(fd, arrays)
    assert [k.scheduler for k in kernels] == ["inner_persistent"], plan


SIZES = [((2, 128, 8, 8), 32), ((1, 6, 5, 3), 3), ((3, 4, 1, 1), 2), ((2, 8, 7, 1), 8), ((1, 12, 9), 4)]


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("sizes,groups", SIZES)
@pytest.mark.parametrize("layout", ["dense", "misaligned", "strided"])
def test_group_norm_with_silu_is_one_row_kernel(dtype, sizes, groups, layout):
    """The norm, its affine and SiLU, with the statistics beside, in one kernel as the reference."""
    with FusionDefinition() as fd:
        x, w, b = tensor(fd, len(sizes), dtype, layout != "strided"), tensor(fd, 1, dtype), tensor(fd, 1, dtype)
        y, mean, rstd = group_norm(fd, x, w, b, sizes, groups, dtype, silu=True)
        for out in (mean, rstd, y):
            fd.add_output(out)
    arrays = inputs(sizes, dtype, sum(sizes) + groups)
    arrays[0] = LAYOUTS[layout](arrays[0])
    assert_one_row_kernel(fd, arrays)
    helpers.execute_near_reference(fd, arrays, rtol=1e-2 if dtype == BF16 else 1e-5)


@pytest.mark.parametrize("sizes,groups", SIZES)
def test_group_norm_over_flattened_groups_is_one_row_kernel(sizes, groups):
    """Groups viewed as [b, g, c / g * spatial] (one reduced dim): the same kernel."""
    with FusionDefinition() as fd:
        x, w, b = tensor(fd, len(sizes), F32), tensor(fd, 1, F32), tensor(fd, 1, F32)
        fd.add_output(group_norm(fd, x, w, b, sizes, groups, F32, flat=True)[0])
    arrays = inputs(sizes, F32, sum(sizes))
    assert_one_row_kernel(fd, arrays)
    helpers.execute_near_reference(fd, arrays, rtol=1e-5)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("sizes,groups", SIZES[:3])
def test_a_residual_before_the_group_norm_is_stored_by_its_kernel(dtype, sizes, groups):
    """The UNet's residual x + h, an output of its own in [b, c, *spatial], and its group norm: one kernel."""
    with FusionDefinition() as fd:
        x, h = tensor(fd, len(sizes), dtype), tensor(fd, len(sizes), dtype)
        w, b = tensor(fd, 1, dtype), tensor(fd, 1, dtype)
        total = fd.ops.cast(fd.ops.add(fd.ops.cast(x, F32), fd.ops.cast(h, F32)), dtype)
        fd.add_output(total)
        fd.add_output(group_norm(fd, total, w, b, sizes, groups, dtype, silu=True)[0])
    arrays = inputs(sizes, dtype, sum(sizes), count=2)
    assert_one_row_kernel(fd, arrays)
    helpers.execute_near_reference(fd, arrays, rtol=1e-2 if dtype == BF16 else 1e-5)


@pytest.mark.parametrize("sizes,groups", [((2, 16, 4, 4), 4), ((1, 6, 3, 5), 3)])
def test_moves_of_the_normed_groups_are_right(sizes, groups):
    """The attention block's tokens: the normed [b, c, h, w] viewed as [b, c, h * w] and transposed to
    [b, h * w, c] (the rows no longer innermost: a transpose's job); and the normed groups permuted before the
    view back. Whatever the plan, the reference's values."""
    n, c, hh, ww = sizes
    for move in ("tokens", "permuted groups"):
        with FusionDefinition() as fd:
            x, w, b = tensor(fd, 4, F32), tensor(fd, 1, F32), tensor(fd, 1, F32)
            y = group_norm(fd, x, w, b, sizes, groups, F32)[0]
            if move == "tokens":
                fd.add_output(fd.ops.permute(fd.ops.reshape(y, new_shape=[n, c, hh * ww]), [0, 2, 1]))
            else:
                grouped = fd.ops.reshape(y, new_shape=[n, groups, c // groups, hh, ww])
                fd.add_output(fd.ops.reshape(fd.ops.permute(grouped, [0, 2, 1, 3, 4]), new_shape=list(sizes)))
        helpers.execute_near_reference(fd, inputs(sizes, F32, sum(sizes)), rtol=1e-5)


def random_views(fd, y, sizes, rng, arrays):
    """A few random moves of y: dims merged or split (each element kept at its linear position), permuted, scaled
    by a new input along one dim (appended to `arrays`), or centered by their own sum along the last dim (a
    second reduction of the moved value). Returns the moved value."""
    sizes = list(sizes)
    for _ in range(int(rng.integers(1, 5))):
        move = rng.choice(["merge", "split", "permute", "scale", "center"])
        rank = len(sizes)
        if move == "merge" and rank > 1:
            at = int(rng.integers(0, rank - 1))
            sizes = sizes[:at] + [sizes[at] * sizes[at + 1]] + sizes[at + 2:]
            y = fd.ops.reshape(y, new_shape=sizes)
        elif move == "split":
            at = int(rng.integers(0, rank))
            divisors = [k for k in range(2, sizes[at]) if sizes[at] % k == 0]
            if divisors:
                k = int(rng.choice(divisors))
                sizes = sizes[:at] + [k, sizes[at] // k] + sizes[at + 1:]
                y = fd.ops.reshape(y, new_shape=sizes)
        elif move == "permute":
            order = [int(i) for i in rng.permutation(rank)]
            y, sizes = fd.ops.permute(y, order), [sizes[i] for i in order]
        elif move == "scale":
            at = int(rng.integers(0, rank))
            arrays.append(rng.standard_normal(sizes[at]).astype(np.float32))
            w = fd.ops.broadcast_in_dim(tensor(fd, 1, F32), shape=sizes, broadcast_dims=[at])
            y = fd.ops.mul(y, w)
        elif move == "center":
            total = fd.ops.sum(y, dims=[rank - 1], keepdim=True)
            y = fd.ops.sub(y, fd.ops.broadcast_in_dim(total, shape=sizes, broadcast_dims=list(range(rank))))
    return y


@pytest.mark.parametrize("seed", range(24))
def test_random_views_of_normed_groups_match_the_reference(seed):
    """Random chains of views, permutes, scales and second reductions after a group norm's statistics, as
    outputs beside the statistics: the values are the reference's whatever the plan."""
    rng = np.random.default_rng(100 + seed)
    groups, per_group = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    sizes = (int(rng.integers(1, 4)), groups * per_group, int(rng.choice([1, 2, 3, 5, 6, 8, 16])),
             int(rng.choice([1, 3, 4, 8])))
    arrays = inputs(sizes, F32, seed)
    with FusionDefinition() as fd:
        x, w, b = tensor(fd, 4, F32), tensor(fd, 1, F32), tensor(fd, 1, F32)
        y, mean, rstd = group_norm(fd, x, w, b, sizes, groups, F32, flat=bool(seed % 2))
        fd.add_output(random_views(fd, y, sizes, rng, arrays))
        fd.add_output(rstd)
    helpers.execute_near_reference(fd, arrays, rtol=1e-5)
