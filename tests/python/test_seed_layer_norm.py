"""The seed: nanoGPT's layer_norm as nvFuser printed it (NVIDIA/Fuser PR #2815), run by
examples/layer_norm_demo.py, which compares with a float64 numpy layer norm."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

DEMO = pathlib.Path(__file__).resolve().parents[2] / "examples" / "layer_norm_demo.py"


def test_layer_norm_demo_passes():
    result = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, env=dict(os.environ),
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    # On the GPU where torch sees one, else on the CPU simulator; never on the reference evaluator.
    assert "backend:        GPU (" in result.stdout or "backend:        CPU simulator" in result.stdout
    assert "result:         PASS" in result.stdout


def test_demo_keeps_the_seed_definition_verbatim():
    # Only the import may differ from the seed script (notes section 7).
    text = DEMO.read_text()
    assert "from braze import FusionDefinition, DataType" in text
    assert "T4, T5 = fd.ops.var_mean(T3, dims=[2], correction=0, keepdim=False)" in text
    assert "S16 = fd.define_scalar(1.00000e-05, dtype=DataType.Double)" in text
    assert "T45 = fd.ops.cast(T44, dtype=DataType.BFloat16)" in text
