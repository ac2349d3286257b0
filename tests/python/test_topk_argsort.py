"""fd.ops.topk and fd.ops.argsort, as Thunder's nvFuser executor calls them (topk(arg, k, dim, largest,
sorted) -> (values, indices); argsort(arg, dim, descending, stable) -> indices), in kernels of the scan
scheduler, against torch: values as torch.topk gives them, indices as torch's stable sort orders them
(ties by lower index, NaN above every number), in float (with NaN), bf16 and integer dtypes, along each
dim, with k a constant or an input, k = 0 and k = n. On torch CPU tensors (the simulated device) and on
CUDA where torch sees a GPU."""

from __future__ import annotations

import pytest

import braze
from braze import DataType, FusionDefinition

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
DTYPES = [(DataType.Float, torch.float32), (DataType.BFloat16, torch.bfloat16), (DataType.Int32, torch.int32)]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def tied(shape, torch_dtype, seed):
    """Values with many ties (a few distinct integers), and NaNs in float tensors."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-3, 4, shape, generator=g).to(torch_dtype)
    if torch_dtype.is_floating_point:
        x.view(-1)[:: 7] = float("nan")
    return x


def sorted_like_torch(x, dim, descending):
    return torch.sort(x, dim=dim, descending=descending, stable=True)


@pytest.mark.parametrize("dtype, torch_dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_keeps_the_k_first_of_a_stable_sort(device, dtype, torch_dtype, dim, largest):
    x = tied((23, 37), torch_dtype, 1).to(device)
    k = 5
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        values, indices = fd.ops.topk(t, k, dim, largest, True)
        fd.add_output(values)
        fd.add_output(indices)
    got_values, got_indices = fd.execute([x])
    want = sorted_like_torch(x.cpu(), dim, largest)
    want_values = want.values.narrow(dim, 0, k)
    torch.testing.assert_close(got_values.cpu(), want_values, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(got_indices.cpu(), want.indices.narrow(dim, 0, k))
    # torch.topk agrees on the values (its order among ties is its own).
    torch.testing.assert_close(got_values.cpu(), torch.topk(x.cpu(), k, dim, largest).values, equal_nan=True)
    assert [s.scheduler for s in fd.explain([x]).segments] == ["scan"]


@pytest.mark.parametrize("dtype, torch_dtype", DTYPES)
@pytest.mark.parametrize("descending", [True, False])
def test_argsort_is_torchs_stable_sort(device, dtype, torch_dtype, descending):
    x = tied((3, 4, 50), torch_dtype, 2).to(device)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=dtype)
        fd.add_output(fd.ops.argsort(t, 1, descending, False))
        fd.add_output(fd.ops.argsort(t, dim=-1, descending=descending))
    along_1, along_last = fd.execute([x])
    assert along_1.dtype == torch.int64
    assert torch.equal(along_1.cpu(), sorted_like_torch(x.cpu(), 1, descending).indices)
    assert torch.equal(along_last.cpu(), sorted_like_torch(x.cpu(), -1, descending).indices)


def test_k_from_an_input_and_the_edge_cases(device):
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        k = fd.define_scalar(dtype=DataType.Int)
        values, indices = fd.ops.topk(t, k, dim=1)
        fd.add_output(values)
        fd.add_output(indices)
    x = torch.randn(4, 9, device=device)
    for k in (0, 1, 9):
        values, indices = fd.execute([x, k])
        assert values.shape == (4, k) and indices.shape == (4, k)
        want = torch.sort(x.cpu(), dim=1, descending=True, stable=True)
        torch.testing.assert_close(values.cpu(), want.values[:, :k])
        assert torch.equal(indices.cpu(), want.indices[:, :k])
    with pytest.raises(ValueError, match=r"topk: k = 10 is not in \[0, 9\]"):
        fd.execute([x, 10])


@pytest.mark.parametrize("length", [13, 37, 100])
def test_every_k_of_a_line(device, length):
    """Every k from 1 to the line's length, those above half its power of two included (9 of 13: the whole
    line sorted in one pass of 16 slots, fewer than twice the kept ones)."""
    x = tied((3, length), torch.float32, length).to(device)
    want = sorted_like_torch(x.cpu(), 1, True)
    for k in range(1, length + 1):
        with FusionDefinition() as fd:
            t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
            values, indices = fd.ops.topk(t, k, 1, True, True)
            fd.add_output(values)
            fd.add_output(indices)
        got_values, got_indices = fd.execute([x])
        torch.testing.assert_close(got_values.cpu(), want.values[:, :k], equal_nan=True, rtol=0, atol=0)
        assert torch.equal(got_indices.cpu(), want.indices[:, :k]), k


def test_the_definition_checks_its_arguments():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, 4], contiguity=[True, True], dtype=DataType.Float)
        with pytest.raises(ValueError, match=r"topk: k = 5 is not in \[0, 4\]"):
            fd.ops.topk(t, 5, dim=1)
        s = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        with pytest.raises(IndexError, match=r"argsort: dim 1 is out of range for the 0-d tensor T\d+"):
            fd.ops.argsort(s, 1)
        with pytest.raises(ValueError, match=r"topk: k must be a constant 0 or 1 for the 0-d tensor T\d+, got 2"):
            fd.ops.topk(s, 2, 0)
        fd.add_output(t)


def test_a_zero_dim_tensor_is_a_line_of_one_as_torch_takes_it():
    x = torch.tensor(3.0)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float)
        i = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Int32)
        for k in (0, 1):
            values, indices = fd.ops.topk(t, k, dim=0)
            fd.add_output(values)
            fd.add_output(indices)
        fd.add_output(fd.ops.argsort(t, -1))
        fd.add_output(fd.ops.cumsum(t, 0))
        fd.add_output(fd.ops.cumsum(i, -1))
    n = torch.tensor(7, dtype=torch.int32)
    want = [*torch.topk(x, 0), *torch.topk(x, 1), torch.argsort(x), torch.cumsum(x, 0), torch.cumsum(n, -1)]
    for got, expected in zip(fd.execute([x, n]), want):
        assert got.shape == expected.shape == torch.Size([])
        assert got.dtype == expected.dtype and torch.equal(got, expected)


def test_the_printed_definition_runs_again():
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        values, indices = fd.ops.topk(t, 3, dim=0, largest=False)
        fd.add_output(values)
        fd.add_output(fd.ops.argsort(t, dim=1, descending=True))
    script = str(fd)
    assert "fd.ops.topk(T0, " in script and "fd.ops.argsort(T0, dim=1, descending=True" in script
    namespace = {}
    exec(script, namespace)
    again = namespace["fd"]
    x = torch.randn(6, 5)
    for a, b in zip(again.execute([x]), fd.execute([x])):
        assert torch.equal(a, b)
    assert braze.execute.reference(fd, [x.numpy()])[0].shape == (3, 5)


def test_topk_with_only_its_indices_used(device):
    # The kernel keeps the order through the indices alone, reading x at them.
    x = tied((5, 31), torch.float32, 3).to(device)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        _, indices = fd.ops.topk(t, 6, dim=1)
        fd.add_output(indices)
    (indices,) = fd.execute([x])
    assert torch.equal(indices.cpu(), sorted_like_torch(x.cpu(), 1, True).indices[:, :6])


@pytest.mark.parametrize("largest", [True, False])
def test_long_lines_are_sorted_by_blocks(device, largest):
    # Vocabulary-sized lines of float64 keys: block sorts in shared memory (float keys take a radix select,
    # test_topk_radix_select.py).
    x = tied((2, 5000), torch.float64, 4).to(device)
    x.view(-1)[3::11] = torch.arange(x.numel(), device=device)[3::11].to(torch.float64) / 64  # distinct values too
    k = 20
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Double)
        values, indices = fd.ops.topk(t, k, 1, largest, True)
        fd.add_output(values)
        fd.add_output(indices)
        fd.add_output(fd.ops.argsort(fd.ops.slice(t, [0, 0], [2, 1500]), dim=1, descending=largest))
        wide, _ = fd.ops.topk(fd.ops.slice(t, [0, 0], [2, 3001]), 700, 1, largest, True)
        fd.add_output(wide)
    got_values, got_indices, got_order, got_wide = fd.execute([x])
    want = sorted_like_torch(x.cpu(), 1, largest)
    torch.testing.assert_close(got_values.cpu(), want.values[:, :k], equal_nan=True, rtol=0, atol=0)
    assert torch.equal(got_indices.cpu(), want.indices[:, :k])
    assert torch.equal(got_order.cpu(), sorted_like_torch(x.cpu()[:, :1500], 1, largest).indices)
    torch.testing.assert_close(got_wide.cpu(), sorted_like_torch(x.cpu()[:, :3001], 1, largest).values[:, :700],
                               equal_nan=True, rtol=0, atol=0)
    heuristics = [s.heuristics for s in fd.explain([x]).segments if s.scheduler == "scan"]
    assert len(heuristics) == 3 and all("block sort" in h for h in heuristics), heuristics
    # k = 20 of 5000: parts of the line on blocks of their own, then a merge; k = 700 of 3001: one block
    # per line, in two passes.
    assert "block sort of 3 parts of 2048 slots" in heuristics[0], heuristics
    assert "2 pass(es)" in heuristics[2], heuristics


def test_ops_reading_an_input_through_meta_ops_get_a_kernel(device):
    # A slice or permute of an input is inlined into the segment that reads it: the scan scheduler
    # takes it there (on a GPU a segment without a kernel could not run).
    x = tied((6, 40), torch.float32, 5).to(device)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.argsort(fd.ops.slice(t, [1, 3], [6, 40]), dim=1, descending=False))
        values, _ = fd.ops.topk(fd.ops.permute(t, [1, 0]), 2, 1, True, True)
        fd.add_output(values)
        fd.add_output(fd.ops.cumsum(fd.ops.permute(t, [1, 0]), 1))
    order, top, sums = fd.execute([x])
    assert torch.equal(order.cpu(), sorted_like_torch(x.cpu()[1:, 3:], 1, False).indices)
    torch.testing.assert_close(top.cpu(), sorted_like_torch(x.cpu().t(), 1, True).values[:, :2], equal_nan=True)
    torch.testing.assert_close(sums.cpu(), torch.cumsum(x.cpu().t().double(), 1).float(), equal_nan=True)
    assert [s.scheduler for s in fd.explain([x]).segments] == ["scan"] * 3


def test_topk_along_a_slice_of_an_expanded_dim(device):
    # A slice of an expanded (stride-0) dim keeps its length: k may be up to it (not 1).
    # Expanded on the device: torch copies an expanded tensor into a dense one when it moves it.
    x = torch.arange(33, dtype=torch.float32, device=device).reshape(1, 33).expand(8, 33)
    with FusionDefinition() as fd:
        t = fd.define_tensor(sizes=[8, 33], strides=[0, 1], dtype=DataType.Float)
        values, indices = fd.ops.topk(fd.ops.slice(t, [1, 0], [8, 33]), 3, 0, True, True)
        fd.add_output(values)
        fd.add_output(indices)
    values, indices = fd.execute([x])
    want = sorted_like_torch(x.cpu()[1:], 0, True)
    assert torch.equal(values.cpu(), want.values[:3]) and torch.equal(indices.cpu(), want.indices[:3])
