"""The seed and offset of random ops defined without rng_seed= and rng_offset= (fd.ops.uniform(0, 1,
shape) as Thunder's dropout writes it). Such an op reads two Int64 scalar inputs that the caller does not
pass: each execute draws them, as nvFuser does, from torch's generator when the inputs are torch tensors
(a CUDA tensor's device generator: its Philox seed and offset, the offset advanced past what the fusion
draws, so consecutive executes differ and torch.manual_seed repeats them; on the CPU, one draw from
torch's default generator), and from braze's own generator otherwise (braze.manual_seed repeats it).
Values are a function of (seed, offset, element index) only, so a run is the same on every device."""

from __future__ import annotations

import sys
import threading

from ._C import BrazeValueError

# Like torch's, braze's generator starts from a fixed seed: a process's runs repeat unless it reseeds.
_DEFAULT_SEED = 67280421310721
_lock = threading.Lock()
_state = {"seed": _DEFAULT_SEED, "offset": 0}

# Offsets one random op takes from the generator: torch's Philox offsets advance in steps of 4.
_OFFSET_STEP = 4


def manual_seed(seed: int) -> None:
    """Seeds braze's generator (the one random ops without seeds draw from when no torch tensor is an
    input) and restarts its offsets."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"manual_seed: expected an int, got {type(seed).__name__}")
    with _lock:
        _state["seed"], _state["offset"] = seed & (2**64 - 1), 0


def drawn_positions(fd) -> list:
    """The input positions of the (seed, offset) pairs the definition's random ops draw: each the seed's."""
    return fd.__dict__.get("_drawn_inputs") or []


def with_drawn(fd, flat, device=None) -> list:
    """`flat` (the caller's inputs, flattened) with each random op's seed and offset inserted, drawn for
    this execute."""
    positions = drawn_positions(fd)
    _check_count(fd, flat, positions)
    seed, offset = _draw(flat, len(positions), device)
    return _insert(flat, positions, seed, offset)


def _check_count(fd, flat, positions) -> None:
    """The count the caller passes, without the drawn inputs, which the message must not count either."""
    expected = len(fd._fusion.inputs()) - 2 * len(positions)
    if len(flat) != expected:
        raise BrazeValueError(f"expected {expected} inputs, got {len(flat)} (the seed and offset of the fusion's "
                              "random ops are drawn by each execute, not passed)")


def with_placeholders(fd, flat) -> list:
    """The same with zeros, drawing nothing: for explain, the reference and the kernels' source (a seed
    or offset is a launch argument, so the plan and kernels do not depend on it)."""
    positions = drawn_positions(fd)
    _check_count(fd, flat, positions)
    return _insert(flat, positions, 0, 0)


def drawer(ops: int):
    """For the torch runner (FusionCache.torch_runner): draws for `ops` random ops from a call's inputs,
    once it has read them, and returns each op's seed and offset in order, as with_drawn inserts them. The
    runner passes the GPU the inputs are on (it has read their devices), or -1 for CPU tensors standing in."""
    def draw(flat, device=-1):
        seed, offset = _draw_on_gpu(device, ops) if device >= 0 else _draw(flat, ops, None)
        return _pairs(ops, seed, offset)
    return draw


def _pairs(ops, seed, offset) -> list:
    """[seed, offset] of each of `ops` random ops, one flat list: they share the seed, their offsets step."""
    return [value for k in range(ops) for value in (seed, offset + k * _OFFSET_STEP)]


def _insert(flat, positions, seed, offset) -> list:
    if not positions:
        return flat
    full = type(flat)(flat)  # a list execute has flattened stays one
    pairs = _pairs(len(positions), seed, offset)
    for k, position in enumerate(positions):  # ascending: each insert leaves the later positions right
        full[position:position] = pairs[2 * k:2 * k + 2]
    return full


def _int64_bits(seed: int) -> int:
    """A 64-bit seed (torch's and manual_seed's are unsigned: 2**63 and above, or -1 as 2**64 - 1) as the
    Int64 scalar input with its bits, which the kernels' Philox reads as the same unsigned seed."""
    return seed - 2**64 if seed >= 2**63 else seed


def _draw_on_gpu(index: int, ops: int):
    """The seed and offset from torch's generator of GPU `index`, its offset advanced past `ops` random ops."""
    generator = sys.modules["torch"].cuda.default_generators[index]
    with _lock:
        offset = generator.get_offset()
        generator.set_offset(offset + ops * _OFFSET_STEP)
    return _int64_bits(generator.initial_seed()), offset


def _draw(flat, ops, device):
    torch = sys.modules.get("torch")
    if torch is not None:
        tensors = [x for x in flat if isinstance(x, torch.Tensor)]
        gpu = next((x.device for x in tensors if x.is_cuda), None)
        if gpu is None and not tensors and device is not None and str(device) != "cpu":
            gpu = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        if gpu is not None:
            return _draw_on_gpu(gpu.index if gpu.index is not None else torch.cuda.current_device(), ops)
        if tensors:
            return int(torch.randint(0, 2**62, (1,)).item()), 0
    with _lock:
        offset = _state["offset"]
        _state["offset"] = offset + ops * _OFFSET_STEP
        return _int64_bits(_state["seed"]), offset
