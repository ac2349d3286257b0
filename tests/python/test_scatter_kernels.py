"""scatter and index_put_accumulate in kernels (the scan scheduler's line walks), against torch: repeated
indices (scatter's last write wins; index_put adds in index order, rounding each add to the dtype, so
results are deterministic), negative indices, an embedding-backward shape in bf16, and an index out of
range reported by name. On torch CPU tensors (the simulated device) and on CUDA where torch sees a GPU."""

from __future__ import annotations

import pytest

from braze import DataType, FusionDefinition

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def scatter_fusion(dtype, dim):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        index = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int)
        src = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        fd.add_output(fd.ops.scatter(x, index, src, dim))
    return fd


def index_put_fusion(dtype):
    with FusionDefinition() as fd:
        acc = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        index = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        value = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=dtype)
        fd.add_output(fd.ops.index_put_accumulate(acc, index, value))
    return fd


@pytest.mark.parametrize("dim", [0, 1])
def test_scatter_runs_in_a_kernel_and_the_last_write_wins(device, dim):
    g = torch.Generator().manual_seed(dim)
    x = torch.randn(13, 17, generator=g).to(device)
    src = torch.randn(11, 9, generator=g).to(device)
    # Few targets, many writes: every target is written several times.
    index = torch.randint(0, 3, (11, 9), generator=g).to(device)
    fd = scatter_fusion(DataType.Float, dim)
    (out,) = fd.execute([x, index, src])
    want = x.cpu().clone()
    for i in range(11):  # torch's scatter on CUDA does not promise an order; this is the sequential one
        for j in range(9):
            at = [i, j]
            at[dim] = int(index[i, j])
            want[at[0], at[1]] = src[i, j].cpu()
    torch.testing.assert_close(out.cpu(), want, rtol=0, atol=0)
    assert [s.scheduler for s in fd.explain([x, index, src]).segments] == ["scan"]


@pytest.mark.parametrize("dtype, torch_dtype", [(DataType.Float, torch.float32), (DataType.BFloat16, torch.bfloat16)])
def test_index_put_accumulate_adds_rows_in_index_order(device, dtype, torch_dtype):
    # An embedding backward: 2048 token gradients into a 1000 x 768 table, most rows hit several times.
    g = torch.Generator().manual_seed(3)
    acc = torch.randn(1000, 768, generator=g).to(device, torch_dtype)
    index = torch.randint(-1000, 1000, (2048,), generator=g).to(device)
    value = torch.randn(2048, 768, generator=g).to(device, torch_dtype)
    (out,) = index_put_fusion(dtype).execute([acc, index, value])
    want = acc.cpu().clone()
    for k in range(2048):  # each add rounded to the dtype, in index order
        want[int(index[k])] += value[k].cpu()
    torch.testing.assert_close(out.cpu(), want, rtol=0, atol=0)
    again = index_put_fusion(dtype).execute([acc, index, value])[0]
    assert torch.equal(out, again)  # deterministic


def test_an_index_out_of_range_is_reported_by_name(device):
    acc = torch.zeros(4, 3, device=device)
    with pytest.raises(IndexError, match=r"index_put_accumulate T3 \(dim 0 of T0, size 4\): index 7 is out of bounds"):
        (out,) = index_put_fusion(DataType.Float).execute([acc, torch.tensor([1, 7], device=device),
                                                            torch.ones(2, 3, device=device)])
        if device == "cuda":
            torch.cuda.synchronize()
            index_put_fusion(DataType.Float).execute([acc, torch.tensor([0], device=device), torch.ones(1, 3, device=device)])


def test_scatter_takes_a_number_or_a_scalar_as_src(device):
    # nvFuser's newer releases take a scalar src (Thunder passes one for x.scatter(dim, index, value)).
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        index = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int)
        fill = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.scatter(x, index, 2.5, 1))
        fd.add_output(fd.ops.scatter(x, index, fill, 1))
    x = torch.zeros(3, 4, device=device)
    index = torch.tensor([[0, 2], [1, 1], [3, 0]], device=device)
    by_number, by_scalar = fd.execute([x, index, -1.0])
    assert torch.equal(by_number.cpu(), x.cpu().scatter(1, index.cpu(), 2.5))
    assert torch.equal(by_scalar.cpu(), x.cpu().scatter(1, index.cpu(), -1.0))
