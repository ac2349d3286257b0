"""torch.Tensors read through torch's stable C ABI (torch 2.14 on) give what their Python attributes give:
address, dtype, device, sizes and strides, for every kind of view; what braze refuses or leaves to the
DLPack path it refuses or leaves either way. Outputs made through the ABI (at::empty_strided) are torch
tensors of the planned sizes, strides and dtype. CPU tensors stand in for CUDA ones (a cache made with
torch_cpu_stand_ins), so all of it runs without a GPU."""

import pytest

torch = pytest.importorskip("torch")

from braze import DataType, FusionDefinition, _C  # noqa: E402


@pytest.fixture(params=[True, False], ids=["c_abi", "attributes"])
def reader(request):
    """Each test once through the C ABI (where this torch has it) and once through the attributes."""
    if request.param and not _C._torch_has_c_abi():
        pytest.skip(f"torch {torch.__version__} has no stable C ABI for Python tensors (torch 2.14 on)")
    was = _C._torch_c_abi(request.param)
    yield request.param
    _C._torch_c_abi(was)


def views():
    base = torch.arange(4 * 6 * 10, dtype=torch.float32).reshape(4, 6, 10)
    yield "contiguous", base
    yield "sliced with an offset", base[1:, 2:5, 3:]
    yield "stepped", base[:, ::2, ::3]
    yield "transposed", base.transpose(0, 2)
    yield "permuted", base.permute(1, 2, 0)
    yield "expanded", torch.zeros(1, 10).expand(7, 10)
    yield "size-1 dims with odd strides", base[:, 1:2, :].as_strided((4, 1, 10), (60, 999, 1))
    yield "0-d", torch.tensor(3.0)
    yield "empty", torch.zeros(0, 5)
    for dtype in [torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int8, torch.uint8, torch.bool,
                  torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]:
        yield str(dtype), torch.zeros(3, 5, dtype=dtype)[1:]


@pytest.mark.parametrize("name,tensor", list(views()), ids=[name for name, _ in views()])
def test_every_view_reads_as_its_attributes_say(reader, name, tensor):
    address, dtype, device, sizes, strides, stood_in, through_abi = _C._read_torch_tensor(tensor, False, True)
    assert through_abi == reader  # the way this run asked for, not a fallback
    assert address == tensor.data_ptr()
    assert sizes == list(tensor.shape)
    # Size-1 dims: stride 1, whatever torch keeps, so that one tensor has one input signature.
    assert strides == [1 if size == 1 else stride for size, stride in zip(tensor.shape, tensor.stride())]
    assert dtype == {torch.float32: "Float", torch.bfloat16: "BFloat16", torch.float16: "Half",
                     torch.float64: "Double", torch.int64: "Int64", torch.int8: "Int8", torch.uint8: "UInt8",
                     torch.bool: "Bool", torch.float8_e4m3fn: "Float8_e4m3fn", torch.float8_e5m2: "Float8_e5m2",
                     torch.float8_e4m3fnuz: "Float8_e4m3fnuz", torch.float8_e5m2fnuz: "Float8_e5m2fnuz"}[tensor.dtype]
    assert device == 0 and stood_in  # a CPU tensor standing in for one on device 0


def test_both_readers_agree_on_random_views():
    if not _C._torch_has_c_abi():
        pytest.skip(f"torch {torch.__version__} has no stable C ABI for Python tensors")
    generator = torch.Generator().manual_seed(7)
    was = _C._torch_c_abi()
    try:
        for _ in range(200):
            rank = int(torch.randint(1, 5, (1,), generator=generator))
            shape = [int(s) for s in torch.randint(1, 6, (rank,), generator=generator)]
            t = torch.zeros(shape, dtype=torch.bfloat16)
            t = t.permute(*torch.randperm(rank, generator=generator).tolist())
            starts = [int(torch.randint(0, s, (1,), generator=generator)) for s in t.shape]
            t = t[tuple(slice(start, None) for start in starts)]
            read = []
            for abi in (True, False):
                _C._torch_c_abi(abi)
                read.append(_C._read_torch_tensor(t, False, True))
            assert read[0][:6] == read[1][:6] and read[0][6] and not read[1][6], (t.shape, t.stride())
    finally:
        _C._torch_c_abi(was)


def test_what_braze_leaves_or_refuses_is_the_same_either_way(reader):
    # CPU tensors are no device tensors unless they stand in for them.
    assert _C._read_torch_tensor(torch.zeros(3, 4)) is None
    # A 0-d CPU tensor where the fusion takes a CPU scalar: its value is read from host memory (device -1).
    scalar = torch.tensor(2.5)
    assert _C._read_torch_tensor(scalar, True, False) == (scalar.data_ptr(), "Float", -1, [], [], False, reader)
    assert _C._read_torch_tensor(torch.zeros(2), True, False) is None
    # Memory on no GPU and not in host memory (meta, XPU, ...) is read as neither.
    assert _C._read_torch_tensor(torch.zeros((), device="meta"), True, True) is None
    assert _C._read_torch_tensor(torch.zeros(3, device="meta"), False, True) is None
    # A dtype braze lacks: left to the DLPack path, which names it.
    assert _C._read_torch_tensor(torch.zeros(3, dtype=torch.complex64), False, True) is None
    # A lazily negated view: refused by name.
    with pytest.raises(ValueError, match="input 0: a torch tensor with its negative bit set"):
        _C._read_torch_tensor(torch._neg_view(torch.zeros(3)), False, True)
    with pytest.raises(ValueError, match="negative bit set"):
        _C._read_torch_tensor(torch._neg_view(torch.zeros(3)).detach(), False, True)
    with pytest.raises(ValueError, match="negative bit set"):  # checked before the scalar's rank
        _C._read_torch_tensor(torch._neg_view(torch.zeros(3)), True, False)
    # Not a tensor at all.
    assert _C._read_torch_tensor([1.0, 2.0], False, True) is None


def test_a_subclass_is_read_through_its_attributes(reader):
    class Reporting(torch.Tensor):
        """A subclass that reports other strides than its storage's: braze reads what it says."""

        def stride(self):
            return (1, 4)

    base = torch.zeros(4, 6)[:, 2:]
    sub = base.as_subclass(Reporting)
    read = _C._read_torch_tensor(sub, False, True)
    assert read[:5] == (base.data_ptr(), "Float", 0, [4, 4], [1, 4]) and not read[6]
    param = torch.nn.Parameter(torch.zeros(3, 5), requires_grad=False)
    assert _C._read_torch_tensor(param, False, True)[3:5] == ([3, 5], [5, 1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU: the CUDA branches of the readers need one")
def test_cuda_tensors_read_the_same_both_ways_on_every_device():
    was = _C._torch_c_abi()
    try:
        for device in range(torch.cuda.device_count()):
            t = torch.zeros(5, 7, 9, dtype=torch.bfloat16, device=f"cuda:{device}").transpose(0, 2)[1:]
            read = {}
            for abi in (True, False):
                _C._torch_c_abi(abi)
                read[abi] = _C._read_torch_tensor(t, False, False)
            assert read[True][:5] == read[False][:5] == (t.data_ptr(), "BFloat16", device, list(t.shape),
                                                         list(t.stride()))
            assert read[True][6] == _C._torch_has_c_abi() and not read[False][6]
    finally:
        _C._torch_c_abi(was)


def test_the_current_stream_is_read_through_the_abi_of_a_cuda_build():
    gpu_build = torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None  # ROCm: "cuda"
    assert _C._torch_has_current_stream_abi() == gpu_build
    was = _C._torch_c_abi()
    try:
        if torch.cuda.is_available():
            side = torch.cuda.Stream()
            for abi in (True, False):
                _C._torch_c_abi(abi)
                assert _C._torch_current_stream(0) == torch.cuda.current_stream(0).cuda_stream
                with torch.cuda.stream(side):  # the stream a `with` block makes current, not the default
                    assert _C._torch_current_stream(0) == side.cuda_stream != 0
        elif gpu_build:
            # Without a driver the ABI reports an error and torch's Python call raises its own: no stream
            # is made up.
            for abi in (True, False):
                _C._torch_c_abi(abi)
                with pytest.raises(RuntimeError):
                    _C._torch_current_stream(0)
        else:  # a CPU-only torch has no way to tell: the caller uses torch.cuda's own
            for abi in (True, False):
                _C._torch_c_abi(abi)
                assert _C._torch_current_stream(0) is None
    finally:
        _C._torch_c_abi(was)


def scale_rows():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        y = fd.ops.mul(fd.ops.cast(x, DataType.Float), fd.ops.broadcast(w, [True, False]))
        fd.add_output(fd.ops.cast(y, DataType.BFloat16))
        fd.add_output(fd.ops.sum(y, dims=[0]))
    return fd


def test_run_torch_on_cpu_stand_ins_makes_torch_outputs_of_the_planned_layout(reader):
    fd = scale_rows()
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100", torch_cpu_stand_ins=True)
    x, w = torch.zeros(37, 130, dtype=torch.bfloat16), torch.zeros(130)
    for rows in (37, 37, 5):
        outputs = cache.run_torch([x[:rows], w], None, True)
        assert [type(o) for o in outputs] == [torch.Tensor, torch.Tensor]
        assert [(o.shape, o.stride(), o.dtype, o.device.type) for o in outputs] == [
            ((rows, 130), (130, 1), torch.bfloat16, "cpu"), ((130,), (1,), torch.float32, "cpu")]
        assert len({o.data_ptr() for o in outputs} | {x.data_ptr(), w.data_ptr()}) == 4
    assert len(cache) == 2  # one plan per row count: the second call hit the first's
    # A cache without stand-ins (the GPU binding's) declines CPU tensors: the general path decides.
    plain = _C.FusionCache(fd._fusion, "auto", no_device="h100")
    assert plain.run_torch([x, w], None, True) is None


def test_fd_execute_on_stand_ins_gives_one_plan_in_every_call_form(reader):
    fd = scale_rows()
    cache = _C.FusionCache(fd._fusion, "auto", no_device="h100", torch_cpu_stand_ins=True)
    fd.__dict__["_gpu_caches"] = {"auto": cache}
    x, w = torch.zeros(8, 130, dtype=torch.bfloat16), torch.zeros(130)
    forms = [{}, {"device": 0}, {"device": "cuda:0"}, {"device": torch.device("cuda:0")},
             {"device": torch.device("cuda:0"), "_enable_options": [], "_disable_options": []}]
    thunder = {"device": None, "save_repro_inputs": False, "_enable_options": None, "_disable_options": None}
    fd.execute([x, w])  # the first run makes the plan and opens the one-pass route
    runs = []

    runner = fd.__dict__["_torch_fast"]

    def counting(inputs):
        outputs = runner(inputs)
        runs.append((type(inputs), outputs is not None))  # None: declined, the general path would run
        return outputs

    fd.__dict__["_torch_fast"] = counting
    calls = [([x, w], form) for form in forms] + [((x, w), thunder)]
    for inputs, form in calls:
        outputs = fd.execute(inputs, **form)
        assert [o.shape for o in outputs] == [(8, 130), (130,)]
    assert runs == [(list, True)] * len(forms) + [(tuple, True)]  # each through the one C++ pass
    assert len(cache) == 1
