"""topk of float keys by radix select (csrc/scheduler/scan/lower_radix_select.cpp), against torch's stable
sort: the k best of each line by key, equal keys by lower index, NaN (of either sign) above every number,
-0 and +0 equal. Lines of one block, lines split into parts and merged (the last part shorter than k, so
its candidates are padded), largest and smallest, float, half and bf16, lines along a strided dim."""

from __future__ import annotations

import pytest

from braze import DataType, FusionDefinition

torch = pytest.importorskip("torch")

from sort_keys import FLOAT_DTYPES, awkward  # noqa: E402  (needs torch)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = FLOAT_DTYPES


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def expect_topk(x, k, dim, largest, got_values, got_indices):
    want = torch.sort(x.cpu(), dim=dim, descending=largest, stable=True)
    want_values = want.values.narrow(dim, 0, k)
    want_indices = want.indices.narrow(dim, 0, k)
    assert torch.equal(got_indices.cpu(), want_indices)
    torch.testing.assert_close(got_values.cpu(), want_values, equal_nan=True, rtol=0, atol=0)


def define_topk(fd, dtype, k, dim, largest):
    t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
    values, indices = fd.ops.topk(t, k, dim, largest, True)
    fd.add_output(values)
    fd.add_output(indices)


@pytest.mark.parametrize("dtype, torch_dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize(
    "lines, extent, k, parts",
    [
        (4, 1000, 10, False),  # a block per line
        (1, 300, 1, False),
        (3, 40000, 50, True),  # parts of a line, then a merge of their candidates
        (2, 16390, 50, True),  # the last part holds 6 elements: fewer than k
        (2, 8193, 3, True),  # the last part holds one element
    ],
)
def test_topk_is_the_stable_sorts_first_k(device, dtype, torch_dtype, largest, lines, extent, k, parts):
    x = awkward((lines, extent), torch_dtype, extent + k).to(device)
    with FusionDefinition() as fd:
        define_topk(fd, dtype, k, 1, largest)
    values, indices = fd.execute([x])
    expect_topk(x, k, 1, largest, values, indices)
    heuristics = [s.heuristics for s in fd.explain([x]).segments if s.scheduler == "scan"]
    assert len(heuristics) == 1 and "radix select" in heuristics[0], heuristics
    assert ("parts per line" in heuristics[0]) == parts, heuristics


@pytest.mark.parametrize("largest", [True, False])
def test_lines_along_a_strided_dim(device, largest):
    # topk along dim 0 of a [extent, lines] tensor: each line's elements lie `lines` apart.
    x = awkward((9000, 3), torch.bfloat16, 11).to(device)
    with FusionDefinition() as fd:
        define_topk(fd, DataType.BFloat16, 40, 0, largest)
    values, indices = fd.execute([x])
    expect_topk(x, 40, 0, largest, values, indices)
    heuristics = [s.heuristics for s in fd.explain([x]).segments if s.scheduler == "scan"]
    assert "radix select" in heuristics[0], heuristics


def test_all_equal_keys_keep_the_first_indices(device):
    # One value everywhere: the index bits alone decide, and the first k indices are kept.
    x = torch.full((2, 20000), -0.0, dtype=torch.float32).to(device)
    x[1] = float("nan")
    with FusionDefinition() as fd:
        define_topk(fd, DataType.Float, 33, 1, True)
    values, indices = fd.execute([x])
    assert torch.equal(indices.cpu(), torch.arange(33).expand(2, 33))
    expect_topk(x, 33, 1, True, values, indices)
