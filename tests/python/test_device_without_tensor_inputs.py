"""Fusions whose inputs name no GPU (only numbers and CPU scalars: full, iota, random ops), run on the GPU
that execute(..., device=) names, as Thunder runs them with device=0: torch CUDA tensors out. Without a
GPU, the same call says what is missing; host runs stay on the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from braze import DataType, FusionDefinition
from braze import execute as braze_execute

torch = pytest.importorskip("torch")


def tensorless_fusion():
    with FusionDefinition() as fd:
        n = fd.define_scalar(dtype=DataType.Int)
        scale = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=True)
        ramp = fd.ops.cast(fd.ops.iota(n, dtype=DataType.Int), DataType.Float)
        fd.add_output(fd.ops.mul(ramp, scale))
        fd.add_output(fd.ops.full(shape=[3, 5], fill_value=fd.define_scalar(1.5), dtype=DataType.BFloat16))
    return fd


@pytest.mark.parametrize("device, ordinal", [(0, 0), (2, 2), ("cuda:1", 1), ("cuda:0", 0), ("cpu", None),
                                             ("meta", None), (True, None)])
def test_the_device_keyword_names_a_gpu_ordinal(device, ordinal):
    assert braze_execute._gpu_ordinal(device) == ordinal
    assert braze_execute._gpu_ordinal(torch.device("cuda", 3)) == 3


def test_numbers_and_cpu_scalars_are_inputs_without_tensors():
    fd = tensorless_fusion()
    assert braze_execute._without_tensors(fd, [7, torch.tensor(2.0)])
    assert braze_execute._without_tensors(fd, [np.int64(7), np.array(2.0, np.float32)])
    assert not braze_execute._without_tensors(fd, [7, torch.ones(2)])


def test_host_runs_stay_on_the_simulator():
    fd = tensorless_fusion()
    ramp, ones = fd.execute([6, torch.tensor(0.5)])
    torch.testing.assert_close(ramp, torch.arange(6, dtype=torch.float32) * 0.5)
    assert ones.dtype == torch.bfloat16 and ones.shape == (3, 5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without a GPU")
def test_without_a_gpu_device_says_what_is_missing():
    with pytest.raises(RuntimeError, match="CUDA"):
        tensorless_fusion().execute([6, torch.tensor(0.5)], device=0)


def test_on_the_gpu_the_device_keyword_places_the_outputs():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: torch sees none")
    fd = tensorless_fusion()
    for device in (0, "cuda:0", torch.device("cuda", 0), "cuda"):
        ramp, ones = fd.execute([9, torch.tensor(2.0)], device=device)
        assert ramp.is_cuda and ones.is_cuda and ones.dtype == torch.bfloat16
        torch.testing.assert_close(ramp, torch.arange(9, dtype=torch.float32, device="cuda") * 2.0)
        torch.testing.assert_close(ones, torch.full((3, 5), 1.5, dtype=torch.bfloat16, device="cuda"))
    with FusionDefinition() as rand:
        u = rand.ops.uniform(rand.define_scalar(0.0), rand.define_scalar(1.0), shape=[1000], dtype=DataType.Float)
        rand.add_output(u)
    first, second = rand.execute([], device=0)[0], rand.execute([], device=0)[0]
    assert first.is_cuda and not torch.equal(first, second)  # a new Philox offset per execute
    assert 0.0 <= float(first.min()) and float(first.max()) < 1.0
