"""Block sorts of float keys (and integers of 32 bits or fewer) hold each element as one 64-bit rank (csrc/scheduler/scan/block_sort.h:
the key's order bits above its position in the work item), which the bitonic network compares as one
integer. Against torch's stable sort, bit for bit: argsort of whole lines (odd lengths, size 1, a
strided dim), topk keeping most of a line, topk of long lines split into parts whose candidates a
block sort merges in several passes, with ties, NaNs of both signs, both zeros, infinities and
denormals (values checked bit for bit but NaN payloads). Float64 keys keep the key-and-position slots: one case checks that path as well."""

from __future__ import annotations

import pytest

from braze import DataType, FusionDefinition

torch = pytest.importorskip("torch")

from sort_keys import FLOAT_DTYPES, awkward  # noqa: E402  (needs torch)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = FLOAT_DTYPES
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float64: torch.int64}


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def same_bits(got, want):
    """NaN where the stable sort has NaN (its payload may change through the compute type), every other
    value equal bit for bit: -0 is not +0."""
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan)
    assert torch.equal(got[~nan].view(BITS[got.dtype]), want[~nan].view(BITS[want.dtype]))


def scan_plan(fd, inputs):
    plans = [s.heuristics for s in fd.explain(inputs).segments if s.scheduler == "scan"]
    assert len(plans) == 1, plans
    return plans[0]


@pytest.mark.parametrize("dtype, torch_dtype", DTYPES)
@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize(
    "shape, dim",
    # 1024 and 2048 slots (16 a thread), 256 (8), 128 (4), 64 (2: a thread per pair of slots), and short lines.
    [((6, 1000), 1), ((3, 1025), 1), ((700, 4), 0), ((5, 200), 1), ((5, 100), 1), ((4, 64), 1), ((2, 2), 1),
     ((5, 1), 1)])
def test_argsort_of_float_keys_is_the_stable_sort(device, dtype, torch_dtype, descending, shape, dim):
    x = awkward(shape, torch_dtype, shape[0] * 7 + shape[1]).to(device)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        fd.add_output(fd.ops.argsort(t, dim=dim, descending=descending, stable=True))
    (got,) = fd.execute([x])
    want = torch.sort(x.cpu(), dim=dim, descending=descending, stable=True).indices
    assert torch.equal(got.cpu(), want)
    if shape[dim] >= 64:
        assert "block sort" in scan_plan(fd, [x])


def define_topk(dtype, k, largest):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        values, indices = fd.ops.topk(t, k, 1, largest, True)
        fd.add_output(values)
        fd.add_output(indices)
    return fd


def expect_topk(fd, x, k, largest):
    values, indices = fd.execute([x])
    want = torch.sort(x.cpu(), dim=1, descending=largest, stable=True)
    assert torch.equal(indices.cpu(), want.indices[:, :k])
    same_bits(values, want.values[:, :k])


@pytest.mark.parametrize("dtype, torch_dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_of_most_of_a_line(device, dtype, torch_dtype, largest):
    # 1100 of 1300: more than half the line, which a radix select does not take.
    x = awkward((5, 1300), torch_dtype, 3).to(device)
    fd = define_topk(dtype, 1100, largest)
    expect_topk(fd, x, 1100, largest)
    plan = scan_plan(fd, [x])
    assert "block sort" in plan and "radix" not in plan, plan


@pytest.mark.parametrize("largest", [True, False])
def test_topk_of_long_lines_merged_in_passes(device, largest):
    # 600 of 40000: 10 parts' 6000 candidates are more than a radix merge holds, so the line is split into
    # parts of 2048 slots, and their 20 x 600 candidates merged by a block sort in several passes.
    x = awkward((2, 40000), torch.bfloat16, 5).to(device)
    fd = define_topk(DataType.BFloat16, 600, largest)
    expect_topk(fd, x, 600, largest)
    plan = scan_plan(fd, [x])
    assert "20 parts of 2048 slots" in plan and "radix" not in plan, plan
    merge = plan.split("merge")[1]
    assert "pass(es)" in merge and " 1 pass(es)" not in merge, plan


def test_topk_radix_select_values_keep_their_bits(device):
    # A radix select stores each value read again at its index: -0 stays -0 and a NaN keeps its sign.
    x = awkward((3, 9000), torch.float32, 9).to(device)
    fd = define_topk(DataType.Float, 70, True)
    expect_topk(fd, x, 70, True)
    fd_small = define_topk(DataType.Float, 70, False)
    expect_topk(fd_small, x, 70, False)
    assert "radix select" in scan_plan(fd, [x])


def test_double_keys_keep_key_and_position_slots(device):
    x = awkward((2, 40000), torch.float64, 13).to(device)
    fd = define_topk(DataType.Double, 600, True)
    expect_topk(fd, x, 600, True)
    assert "parts of" in scan_plan(fd, [x])


INT_DTYPES = [(DataType.Int32, torch.int32), (DataType.Int16, torch.int16), (DataType.Int8, torch.int8),
              (DataType.UInt8, torch.uint8)]


def awkward_ints(shape, torch_dtype, seed):
    """Ties everywhere, and the dtype's extremes (an offset by 2^31 must keep INT32_MIN lowest)."""
    g = torch.Generator().manual_seed(seed)
    info = torch.iinfo(torch_dtype)
    x = torch.randint(-3, 4, shape, generator=g).clamp(min=info.min)
    flat = x.view(-1)
    flat[5::11] = torch.randint(info.min, info.max, (flat.numel(),), generator=g)[5::11]
    flat[::13] = info.min
    flat[3::17] = info.max
    return x.to(torch_dtype)


@pytest.mark.parametrize("dtype, torch_dtype", INT_DTYPES)
@pytest.mark.parametrize("descending", [True, False])
def test_argsort_of_small_integer_keys_is_the_stable_sort(device, dtype, torch_dtype, descending):
    x = awkward_ints((4, 1000), torch_dtype, 21).to(device)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        fd.add_output(fd.ops.argsort(t, dim=1, descending=descending, stable=True))
    (got,) = fd.execute([x])
    assert torch.equal(got.cpu(), torch.sort(x.cpu(), dim=1, descending=descending, stable=True).indices)
    assert "block sort" in scan_plan(fd, [x])


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("extent, split", [(3000, False), (20000, True)])
def test_topk_of_int32_keys_is_a_radix_select(device, largest, extent, split):
    x = awkward_ints((2, extent), torch.int32, extent).to(device)
    fd = define_topk(DataType.Int32, 45, largest)
    values, indices = fd.execute([x])
    want = torch.sort(x.cpu(), dim=1, descending=largest, stable=True)
    assert torch.equal(indices.cpu(), want.indices[:, :45])
    assert torch.equal(values.cpu(), want.values[:, :45])
    plan = scan_plan(fd, [x])
    assert "radix select" in plan and ("parts per line" in plan) == split, plan


def test_int64_keys_keep_key_and_position_slots(device):
    # Int64 keys have 64 order bits: no rank holds them with a position, so the slots are pairs.
    x = torch.tensor([[2**40, -(2**40), 5, 2**40, -1, 0, 2**62] * 150], dtype=torch.int64).to(device)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int64)
        fd.add_output(fd.ops.argsort(t, dim=1, descending=True, stable=True))
    (got,) = fd.execute([x])
    assert torch.equal(got.cpu(), torch.sort(x.cpu(), dim=1, descending=True, stable=True).indices)


def test_a_merge_of_more_candidates_than_rank_positions_keeps_pairs():
    # The top 600 of 9e9 halves (an expanded input: explain only, nothing allocated): parts of 2048 slots
    # and a merge of 2.6e9 candidates, whose positions take 32 bits: the merge keeps (key, position) slots.
    x = torch.zeros(1, dtype=torch.float16).expand(1, 9_000_000_000)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[None, False], dtype=DataType.Half)
        values, indices = fd.ops.topk(t, 600, 1, True, True)
        fd.add_output(values)
        fd.add_output(indices)
    plan = scan_plan(fd, [x])
    assert "parts of 2048 slots" in plan, plan
