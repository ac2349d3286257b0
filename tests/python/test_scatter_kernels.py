"""scatter and index_put_accumulate in kernels (the scan scheduler's line walks), against torch: repeated
indices (scatter's last write wins; index_put adds in index order, rounding each add to the dtype, so
results are deterministic), negative indices, an embedding-backward shape in bf16, and an index out of
range reported by name. Updates of an input in place (a KV cache's new tokens, a grad accumulated into its
buffer) write only the entries into the input's memory. On torch CPU tensors (the simulated device) and on
CUDA where torch sees a GPU."""

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


def kv_cache_update(index_dtype=DataType.Int):
    """A decoding step's KV-cache write: cache[b, h, pos[t], :] = new[b, h, t, :], the cache updated in place."""
    with FusionDefinition() as fd:
        cache = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.BFloat16)
        new = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True] * 4, dtype=DataType.BFloat16)
        pos = fd.define_tensor(shape=[-1], contiguity=[True], dtype=index_dtype)
        index = fd.ops.broadcast_in_dim(pos, new.shape(), [2])
        fd.add_output(fd.ops.scatter(cache, index, new, 2), alias_input=cache)
    return fd


@pytest.mark.parametrize("tokens", [1, 3])
@pytest.mark.parametrize("index_dtype, torch_index", [(DataType.Int, torch.int64), (DataType.Int32, torch.int32)])
def test_a_kv_cache_update_writes_only_the_new_tokens_in_place(device, tokens, index_dtype, torch_index):
    # The scatter's kernel writes the new tokens into the cache itself: no copy of the cache into a buffer
    # and back, which would move the whole cache twice for a token.
    fd = kv_cache_update(index_dtype)
    cache = torch.randn(2, 4, 40, 16, device=device).to(torch.bfloat16)
    new = torch.randn(2, 4, tokens, 16, device=device).to(torch.bfloat16)
    pos = torch.tensor([17, 3, 39][:tokens], device=device, dtype=torch_index)
    want = cache.clone()
    want.index_copy_(2, pos.long(), new)
    plan = fd.explain([cache, new, pos])
    assert [s.scheduler for s in plan.segments if s.kind == "kernel"] == ["scan"], str(plan)
    assert "braze_copy" not in str(plan), str(plan)
    address = cache.data_ptr()
    assert fd.execute([cache, new, pos]) == []
    assert cache.data_ptr() == address and torch.equal(cache, want)


def test_index_put_accumulate_adds_into_its_input_in_place(device):
    # An embedding's weight grad accumulated into the grad buffer itself, repeated rows added in order.
    with FusionDefinition() as fd:
        grad = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        rows = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int)
        values = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.index_put_accumulate(grad, rows, values), alias_input=grad)
    grad = torch.randn(50, 24, device=device)
    rows = torch.tensor([4, 49, 4, 0, 4], device=device)
    values = torch.randn(5, 24, device=device)
    want = grad.index_put((rows,), values, accumulate=True)
    assert "braze_copy" not in str(fd.explain([grad, rows, values]))
    fd.execute([grad, rows, values])
    torch.testing.assert_close(grad, want)


def test_a_scatter_reading_its_own_input_elsewhere_is_copied_back(device):
    # The entries come from the updated tensor itself (its last column): written in place, a line's writes
    # could be read as entries, so the new value is computed into a buffer and copied back after.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        index = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int)
        last = fd.ops.slice(x, [0, 5], [6, 6])
        fd.add_output(fd.ops.scatter(x, index, last, 1), alias_input=x)
    x = torch.arange(36, dtype=torch.float32, device=device).reshape(6, 6)
    index = torch.tensor([[0], [1], [2], [3], [4], [5]], device=device)
    want = x.scatter(1, index, x[:, 5:6])
    assert "braze_copy" in str(fd.explain([x, index]))
    fd.execute([x, index])
    torch.testing.assert_close(x, want)


def test_the_updated_cache_passed_again_as_the_entries_is_refused_by_name(device):
    fd = kv_cache_update()
    cache = torch.randn(1, 1, 4, 8, device=device).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"lies in the memory range of input 0 .* pass a copy"):
        fd.execute([cache, cache, torch.tensor([0, 1, 2, 3], device=device)])


@pytest.mark.parametrize("in_place", [False, True])
def test_a_repetition_penalty_is_one_scatter_kernel(device, in_place):
    """Hugging Face's repetition penalty: the logits at the tokens seen so far (repeated ones included)
    gathered, penalized and scattered back. The entries are computed where the scatter's walk reads them,
    from the logits as they were; in place, the update is then copied back (the entries read the logits)."""
    with FusionDefinition() as fd:
        logits = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        seen = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int)
        g = fd.ops.gather(logits, seen, 1)
        penalized = fd.ops.where(fd.ops.lt(g, 0.0), fd.ops.mul(g, 1.3), fd.ops.div(g, 1.3))
        fd.add_output(fd.ops.scatter(logits, seen, penalized, 1), **({"alias_input": logits} if in_place else {}))
    logits = torch.randn(3, 100, device=device)
    seen = torch.tensor([[5, 7, 5, 99], [0, 0, 0, 0], [42, 17, 3, 8]], device=device)
    g = logits.gather(1, seen)
    want = logits.scatter(1, seen, torch.where(g < 0, g * 1.3, g / 1.3))
    kernels = [s for s in fd.explain([logits, seen]).segments if s.kind == "kernel"]
    assert [s.scheduler for s in kernels if "copy" not in s.scheduler] == ["scan"], [s.ops for s in kernels]
    got = fd.execute([logits, seen])
    torch.testing.assert_close(logits if in_place else got[0], want)
