"""Determinism across processes: two fresh interpreters fed the same fusions with shapes in opposite
orders make the same plans, the same CUDA sources (through the GPU path's FusionCache, planning for an
H100 without one) and bitwise-identical simulator outputs. Anything a cache keeps between shapes, or
that hashes pointers, would show here as a difference."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_SCRIPT = r'''
import hashlib, json, sys
import ml_dtypes, numpy as np
from braze import DataType, FusionDefinition, _C
from braze import execute as bx
from test_shape_generic import sizeless_layer_norm
from test_explain import define_rope

BF16 = ml_dtypes.bfloat16
reverse = sys.argv[1] == "reverse"


def softmax(fd):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    m = fd.ops.broadcast(fd.ops.max(x, dims=[1]), [False, True])
    e = fd.ops.exp(fd.ops.sub(x, m))
    s = fd.ops.broadcast(fd.ops.sum(e, dims=[1]), [False, True])
    fd.add_output(fd.ops.div(e, s))


def inputs_for(name, shape, seed):
    rng = np.random.default_rng(seed)
    # float32 where the GPU cache plans too: its stand-in inputs come in through DLPack, which numpy's
    # bfloat16 lacks (litGPT's RoPE is bf16, and its sources come from the host path instead).
    if name == "layer_norm":
        return [rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape[-1]).astype(np.float32)]
    if name == "softmax":
        return [rng.standard_normal(shape).astype(np.float32)]
    B, T, heads, groups, hs = shape
    return [rng.standard_normal((B, T, (heads + 2 * groups) * hs)).astype(BF16),
            rng.standard_normal((T, hs)).astype(BF16), rng.standard_normal((T, hs)).astype(BF16)]


cases = {
    # Pairs of one shape class (133 and 131 rows: odd, in [128, 256)), whose segmentation is planned once
    # for the class: whichever of them comes first, each gets the same plan.
    "layer_norm": (lambda fd: sizeless_layer_norm(fd, DataType.Float),
                   [(1, 1, 64), (2, 3, 64), (4, 5, 40), (1, 7, 1600), (1, 133, 1600), (3, 2, 1600), (1, 131, 1600)]),
    "softmax": (softmax, [(1, 8), (5, 33), (133, 1000), (9, 1000), (2, 4096), (131, 1000), (64, 64)]),
}
rope_shapes = [(1, 4, 4, 2, 16), (2, 3, 4, 4, 16), (1, 5, 8, 2, 32)]
def definition(name, shape):
    fd = FusionDefinition()
    with fd:
        if name == "rope":  # litGPT's definition has its sizes in it: one per shape
            B, T, heads, groups, hs = shape
            define_rope(fd, B, T, heads, groups, hs, hs)
        else:
            cases[name][0](fd)
    return fd


report = {}
for name in ["layer_norm", "softmax", "rope"]:
    shapes = rope_shapes if name == "rope" else cases[name][1]
    # One definition and one GPU cache for all of a sizeless fusion's shapes: what a cache keeps from
    # one shape must not change what it makes for the next.
    fd = definition(name, shapes[0])
    gpu = None if name == "rope" else _C.FusionCache(fd._fusion, "auto", no_device="h100")
    for shape in (list(reversed(shapes)) if reverse else shapes):
        if name == "rope":
            fd = definition(name, shape)
        inputs = inputs_for(name, shape, seed=sum(shape))
        outputs = fd.execute(inputs)
        report[f"{name} {shape}"] = {
            "plan": str(fd.explain(inputs)),
            "cuda": bx.cuda_code_for(fd, inputs) if name == "rope" else gpu.cuda_code(inputs),
            "outputs": [hashlib.sha256(np.ascontiguousarray(o).tobytes()).hexdigest() for o in outputs],
        }
print(json.dumps(report, sort_keys=True))
'''


def _run(order):
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONHASHSEED"] = "random"  # different string hashes in each process
    result = subprocess.run([sys.executable, "-c", _SCRIPT, order], capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_two_processes_in_opposite_orders_agree_bit_for_bit():
    forward, reverse = _run("forward"), _run("reverse")
    assert forward.keys() == reverse.keys()
    for key in forward:
        for what in ("plan", "cuda", "outputs"):
            assert forward[key][what] == reverse[key][what], f"{key}: {what} differs between the two orders"
    assert all(entry["cuda"] for entry in forward.values())


def _segment_structure(plan_text):
    """Each segment's id, kind, scheduler, inputs, outputs and ops, and each cut's ends and reason: what
    segmenting decides (vectorization and the sizes named in refusals are left out)."""
    lines = plan_text.splitlines()
    segments = [l.split()[:3] + l.split()[4:] for l in lines
                if l.startswith("  ") and l.split()[0].isdigit() and "->" not in l]
    return segments + [l.split("(")[0] for l in lines if "->" in l]


def test_a_shape_class_plans_each_signature_as_alone_whatever_ran_before():
    """Random sizeless fusions (the multi-shape fuzzer's) over sizes that share shape classes: a signature's
    plan is the same text after any other signature of the definition as in a fresh cache (its row kernels,
    where they are lowered for the class's canonical row count, included), and its segments and cuts are
    those that segmenting it alone makes."""
    import fuzz_fusions
    from braze import _C
    from braze import execute as bx

    saved = fuzz_fusions.SIZES, fuzz_fusions.ROW_COUNTS, fuzz_fusions.DTYPES
    fuzz_fusions.SIZES = [1, 3, 5, 6, 129, 131, 136, 200, 255]  # batches 5 and 6 share a power of two
    fuzz_fusions.ROW_COUNTS = [129, 131, 133, 257, 263, 1]
    fuzz_fusions.DTYPES = [("np.float32", "Float"), ("np.float16", "Half")]
    try:
        sources = [fuzz_fusions.generate_multi_shape(seed) for seed in range(40)]
    finally:
        fuzz_fusions.SIZES, fuzz_fusions.ROW_COUNTS, fuzz_fusions.DTYPES = saved
    reused = relaunched = other_batch = 0
    for seed, source in enumerate(sources):
        scope: dict = {}
        exec(compile(source, f"<multi-shape case {seed}>", "exec"), scope)
        fd, input_sets = scope["fd"], scope["input_sets"]
        for before in input_sets:
            cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
            cache.cuda_code(before)
            for inputs in input_sets:
                plan = str(cache.explain(inputs)[0])
                alone = str(_C.FusionCache(fd._fusion, "auto", no_device="h100").explain(inputs)[0])
                assert plan == alone, f"seed {seed}: {[x.shape for x in inputs]} after {[x.shape for x in before]}"
                reused += "segmented for other sizes" in plan
                relaunched += "kernels: lowered for" in plan
                other_batch += "in dims 0 to" in plan
        for inputs in input_sets:
            plan = str(_C.FusionCache(fd._fusion, "auto", no_device="h100").explain(inputs)[0])
            afresh = str(_C.explain(fd._fusion, bx._host_args(fd, inputs)[0]))
            assert _segment_structure(plan) == _segment_structure(afresh), f"seed {seed}: {plan}\n{afresh}"
    assert reused > 100  # the class's segmentation was reused, not planned afresh each time
    # and row kernels were the class's canonical ones in many (144 of the plans when written, 18 of them
    # lowered for another batch of the same power of two)
    assert relaunched > 20, relaunched
    assert other_batch > 0, "no batch ran the kernels lowered for another of its power of two"


def test_a_scalar_read_only_as_a_value_leaves_the_plan_alone():
    """An epsilon or a count the kernels read as launch arguments (cast to the type an op computes in) is no
    part of a plan: the canonical row kernels serve a signature whatever value ran first (they were lowered
    for their own sizes when the first execute's value differed)."""
    import numpy as np
    from braze import DataType, FusionDefinition, _C

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        eps = fd.define_scalar(DataType.Double)
        n = fd.define_scalar(DataType.Int)
        var, mean = fd.ops.var_mean(fd.ops.mul(x, n), [1], correction=0, keepdim=True)
        fd.add_output(fd.ops.mul(fd.ops.sub(x, mean), fd.ops.rsqrt(fd.ops.add(var, eps))))
        fd.add_output(fd.ops.div(fd.ops.sum(x, [0]), n))

    def inputs(rows, eps, n):
        return [np.ones((rows, 64), np.float32), eps, n]

    relaunched = 0
    for first in (inputs(511, 1e-5, 3), inputs(257, 0.5, 511)):
        cache = _C.FusionCache(fd._fusion, "auto", no_device="h100")
        cache.cuda_code(first)
        for later in (inputs(509, 1e-6, 509), inputs(300, 1e-3, 7), inputs(511, 1e-5, 3)):
            plan = str(cache.explain(later)[0])
            assert plan == str(_C.FusionCache(fd._fusion, "auto", no_device="h100").explain(later)[0])
            relaunched += "kernels: lowered for 511 leading rows" in plan
    assert relaunched >= 2
