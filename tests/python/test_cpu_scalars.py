"""CPU scalar inputs (a 0-d define_tensor(is_cpu=True), what Thunder passes for a learning rate, an
epsilon or a scale held as a torch CPU tensor) next to tensors on the device: kernels take the value as
a launch argument read on every run, so a new value reuses the plan and a GPU kernel never reads host
memory. On the simulated device (numpy and torch CPU tensors), through the GPU binding with host
stand-ins (nothing launched), and on CUDA where torch sees a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import braze
from braze import DataType, FusionDefinition, _C


def scaled_fusion(scalar_dtype=DataType.Float):
    """y = x * s (s broadcast by broadcast_in_dim) and z = sum(x + s, dim 1), as Thunder writes them."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        s = fd.define_tensor(shape=[], contiguity=[], dtype=scalar_dtype, is_cpu=True)
        sf = fd.ops.cast(s, DataType.Float)
        fd.add_output(fd.ops.mul(x, fd.ops.broadcast_in_dim(sf, shape=x.shape(), broadcast_dims=[])))
        fd.add_output(fd.ops.sum(fd.ops.add(x, sf), dims=[1]))
    return fd


@pytest.mark.parametrize("scalar_dtype, numpy_dtype", [(DataType.Float, np.float32), (DataType.Double, np.float64),
                                                       (DataType.Int, np.int64)])
def test_each_value_runs_on_one_plan_and_matches_the_reference(scalar_dtype, numpy_dtype):
    fd = scaled_fusion(scalar_dtype)
    x = np.random.default_rng(0).standard_normal((37, 129)).astype(np.float32)
    for value in (2, -3, 5):
        s = np.array(value, dtype=numpy_dtype)
        got = fd.execute([x, s])
        want = braze.execute.reference(fd, [x, s])
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got[0], x * np.float32(value))
    assert fd.explain([x, np.array(11, dtype=numpy_dtype)]).cache == "hit"


def test_kernels_take_the_value_not_the_address():
    fd = scaled_fusion()
    code = fd.cuda_code_for([np.ones((8, 64), np.float32), np.array(2.0, np.float32)])
    assert "const float T1" in code
    assert "float* __restrict__ T1" not in code


def test_torch_cpu_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    fd = scaled_fusion()
    x = torch.randn(4, 33)
    y, z = fd.execute([x, torch.tensor(0.5)])
    torch.testing.assert_close(y, x * 0.5)
    torch.testing.assert_close(z, (x + 0.5).sum(1))


def test_the_gpu_binding_takes_a_cpu_scalar_where_the_definition_says_so():
    torch = pytest.importorskip("torch")
    fd = scaled_fusion()
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
    x = np.zeros((16, 256), np.float32)
    cache.run([x, torch.tensor(3.0)], 0, "dlpack", None)
    # Another scalar tensor (another address, another value): the same plan.
    assert cache.explain([x, torch.tensor(-1.0)])[1] == "hit"
    assert len(cache) == 1


def test_a_cpu_scalar_cannot_be_the_only_thing_an_output_is_on_a_gpu():
    # Returning the scalar's own memory (a broadcast of it, bookended into a view) from a GPU execute:
    # refused, naming the output; on the simulated device it is host memory and comes back as a view.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        s = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=True)
        fd.add_output(fd.ops.mul(x, s))
        fd.add_output(fd.ops.broadcast_in_dim(s, shape=[4], broadcast_dims=[]))
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(fd.execute([x, np.array(2.0, np.float32)])[1], np.full(4, 2.0, np.float32))
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match=r"output 1 \(T\d+\) is a view of T1, a CPU scalar input"):
        cache.run([x, torch.tensor(2.0)], 0, "dlpack", None)


def test_cuda_tensors_with_a_cpu_scalar():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: torch sees none")
    fd = scaled_fusion()
    x = torch.randn(64, 1000, device="cuda")
    for value in (0.25, 4.0):
        y, z = fd.execute([x, torch.tensor(value)], device="cuda:0")
        assert y.is_cuda and z.is_cuda
        torch.testing.assert_close(y, x * value)
        torch.testing.assert_close(z, (x + value).sum(1))
    # A CUDA tensor where the definition says CPU scalar: named, nothing read from the wrong memory.
    with pytest.raises(RuntimeError, match="input 1: T1 is defined as a CPU scalar"):
        fd.execute([x, torch.tensor(1.0, device="cuda")])
