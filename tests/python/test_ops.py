"""Every fd.ops entry, defined and executed on seeded random inputs, against numpy.

The cases live in tables (op_cases_elementwise.py, op_cases_tensor.py); this file runs them, runs
a few of them again on non-contiguous, transposed and expanded (stride-0) inputs, and checks that
every name in fd.ops has at least one case.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import braze
import op_cases_elementwise
import op_cases_tensor
from helpers import as_reference, assert_matches, run

CASES = op_cases_elementwise.all_cases() + op_cases_tensor.all_cases()


def _rng(ident: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(ident.encode()))  # a stable seed per case


def _check(case, arrays):
    outputs, _ = run(case.build, arrays)
    args = arrays if case.raw else [as_reference(a) if isinstance(a, np.ndarray) else a for a in arrays]
    expected = case.reference(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(case.out_dtypes) == len(expected)
    for i, (got, want, dtype) in enumerate(zip(outputs, expected, case.out_dtypes)):
        assert_matches(got, want, dtype, f"{case.id} output {i}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_matches_numpy(case):
    _check(case, case.make_inputs(_rng(case.id)))


# Ops that cannot run by design, and where their behaviour is tested instead.
NOT_EXECUTABLE = {
    "imag": "needs a complex operand and braze has no complex types: test_errors.py",
    # Random values have no numpy reference: their statistics and their dependence on (seed, offset)
    # only are tested in test_nvfuser_compat.py and scan_scatter_random_test.cpp.
    "uniform": "random", "normal": "random", "rand_like": "random", "randn_like": "random",
}


def test_every_op_has_a_case():
    covered = {c.op for c in CASES} | set(NOT_EXECUTABLE)
    missing = sorted(set(braze.op_names()) - covered)
    assert not missing, f"fd.ops entries without a test case: {missing}"


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


# ---- the same ops on inputs that are not row-major contiguous -----------------------------------
# Each layout turns a row-major array into a view with the same values; define_like declares it
# with the matching contiguity and stride order (nvFuser's computeTensorDescriptor).
LAYOUTS = {
    "transposed": lambda a: np.ascontiguousarray(a.T).T if a.ndim >= 2 else a,  # column-major: stride_order
    "sliced": lambda a: _sliced_view(a),  # gaps between elements: contiguity False
    "reversed": lambda a: a[::-1],  # negative strides: copied before the evaluator sees it
    "expanded": lambda a: np.broadcast_to(a[:1], a.shape),  # stride 0 on dim 0: contiguity None
}


def _sliced_view(a):
    wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    wide[..., ::2] = a
    return wide[..., ::2]


LAYOUT_OPS = ["exp-float32", "abs-bfloat16", "add-float32", "mul-broadcast-size-1-dim", "where",
              "sum-float32-dims=[1]", "var_mean", "permute", "slice", "reshape", "cat", "matmul-2d", "linear-bias",
              "quantize-per-channel-zero-point", "pad"]
BY_ID = {c.id: c for c in CASES}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("ident", LAYOUT_OPS)
def test_op_on_strided_inputs(ident, layout):
    case = BY_ID[ident]
    arrays = case.make_inputs(_rng(case.id))
    _check(case, [LAYOUTS[layout](a) if isinstance(a, np.ndarray) and a.ndim >= 1 else a for a in arrays])


def test_sign_and_clamp_of_nan_as_torch():
    """sign(NaN) is 0 and a NaN value or bound of clamp gives NaN, as torch's (and nvFuser's) do, in the
    simulated kernel and in the reference alike."""
    from braze import DataType, FusionDefinition
    from braze import execute as bx

    x = np.array([np.nan, -0.0, -2.0, 3.0], np.float32)
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.sign(t))
        fd.add_output(fd.ops.clamp(t, float("nan"), 1.0))
        fd.add_output(fd.ops.clamp(t, -1.0, 1.0))
    want = [np.array([0, 0, -1, 1], np.float32), np.full(4, np.nan, np.float32), np.array([np.nan, -0.0, -1, 1], np.float32)]
    for outputs in (fd.execute([x]), bx.reference(fd, [x])):
        for got, expected in zip(outputs, want, strict=True):
            np.testing.assert_array_equal(got, expected)
