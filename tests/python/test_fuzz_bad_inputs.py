"""The fuzzer's bad-input mode: for every op, inputs that break its definition (mismatched sizes, indices
out of range, wrong dtypes and ranks, negative sizes; fuzz_bad_inputs.py) run on the simulated device,
each expected to raise a named error: ValueError, TypeError or IndexError naming the op (or the input
that does not match its definition), never a result and never another exception.

BRAZE_FUZZ_BAD_CASES (default 1000) and BRAZE_FUZZ_SEED (default 0) choose the cases; a failure prints
the case as a standalone reproducer."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

from braze import execute as _execute
from fuzz_bad_inputs import CASES as OP_CASES, _kinds, define, generate

CASES = int(os.environ.get("BRAZE_FUZZ_BAD_CASES", "1000"))
FIRST = int(os.environ.get("BRAZE_FUZZ_SEED", "0"))
BATCHES = 10
NAMED = (ValueError, TypeError, IndexError)


def _reproducer(seed: int) -> str:
    return (f"# braze bad-input case {seed}: run this to reproduce\n"
            f"from fuzz_bad_inputs import define, generate\ncase, kind, inputs = generate({seed})\n"
            "print(case.name, kind, [getattr(x, 'shape', x) for x in inputs])\ndefine(case).execute(inputs)\n")


def _expect_named_error(seed: int) -> tuple[str, str]:
    case, kind, inputs = generate(seed)
    fd = define(case)
    try:
        got = fd.execute(inputs)
    except NAMED as error:
        message = str(error)
        # An input that does not match its definition is named by its index; anything else by the op.
        named = case.name in message or (kind in ("dtype", "rank") and "input " in message)
        assert named, f"{kind} case of {case.name}: the error does not name the op: {message}\n\n{_reproducer(seed)}"
        return case.name, kind
    except Exception as error:  # noqa: BLE001 - any other exception is a failure with the reproducer
        raise AssertionError(f"{kind} case of {case.name}: {type(error).__name__}: {error}\n\n{_reproducer(seed)}") from error
    raise AssertionError(f"{kind} case of {case.name} gave a result instead of an error: "
                         f"{[getattr(g, 'shape', g) for g in got]}\n\n{_reproducer(seed)}")


@pytest.mark.parametrize("batch", range(BATCHES))
def test_bad_inputs_raise_a_named_error(batch):
    per_batch = (CASES + BATCHES - 1) // BATCHES
    seeds = range(FIRST + batch * per_batch, min(FIRST + CASES, FIRST + (batch + 1) * per_batch))
    seen = Counter(_expect_named_error(seed)[1] for seed in seeds)
    assert len(seen) >= 3, f"only the kinds {dict(seen)} were generated"


def test_every_kind_of_every_op_is_generated():
    """Over the default cases, every op case meets every kind of mistake that applies to it."""
    seen = {(id(generate(seed)[0]), generate(seed)[1]) for seed in range(FIRST, FIRST + max(CASES, 1000))}
    missing = [(c.name, k) for c in OP_CASES for k in set(_kinds(c)) if (id(c), k) not in seen]
    assert not missing, f"never generated: {missing}"


@pytest.mark.parametrize("case", OP_CASES, ids=[f"{c.name}-{i}" for i, c in enumerate(OP_CASES)])
def test_each_op_case_runs_with_inputs_that_fit(case):
    """The definitions are valid: with sizes that agree and indices in range they match the reference,
    so the errors above come from the mistakes, not from the definitions."""
    _, _, inputs = generate(7, case, "good")
    fd = define(case)
    got = fd.execute(inputs)
    want = _execute.reference(fd, inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=2e-2, atol=2e-2)
