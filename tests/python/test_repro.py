"""Reproducers: when execute raises, print_repro=True prints (and BRAZE_REPRO_DIR saves) a script that
raises the same error in a fresh process; fd.repro_script(inputs) recreates inputs exactly (values,
sizes, strides, expanded dims, alignment) whether or not anything failed."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from braze import DataType, FusionDefinition

BF16 = ml_dtypes.bfloat16


def _index_select_fusion():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16)
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int64)
        fd.add_output(fd.ops.index_select(x, i, 0))
    return fd


def _run_script(text, tmp_path):
    path = tmp_path / "repro.py"
    path.write_text(text)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))


def test_a_value_dependent_error_is_raised_again_by_the_printed_script(tmp_path, capsys):
    fd = _index_select_fusion()
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(BF16)
    with pytest.raises(IndexError) as raised:
        fd.execute([x, np.array([0, 7, 2])], print_repro=True)  # row 7 of 4: the simulator reports it
    script = capsys.readouterr().out
    assert script.startswith("# braze reproducer")
    assert f"# The execute this reproducer repeats raised BrazeIndexError: {str(raised.value).splitlines()[0]}" in script
    result = _run_script(script, tmp_path)
    assert result.returncode != 0
    assert f"IndexError: {str(raised.value).splitlines()[0]}" in result.stderr


def test_an_input_check_error_is_saved_to_the_repro_dir_and_named_in_the_error(tmp_path, monkeypatch):
    fd = _index_select_fusion()
    monkeypatch.setenv("BRAZE_REPRO_DIR", str(tmp_path / "repros"))
    with pytest.raises(Exception) as raised:
        fd.execute([np.zeros((2, 3, 4), BF16), np.array([0])])  # rank 3 where 2 is defined
    notes = getattr(raised.value, "__notes__", [])
    assert len(notes) == 1 and notes[0].startswith("braze: reproducer written to "), notes
    path = notes[0].removeprefix("braze: reproducer written to ")
    assert os.path.dirname(path) == str(tmp_path / "repros")
    result = _run_script(open(path).read(), tmp_path)
    assert result.returncode != 0
    assert f"{type(raised.value).__name__}: {str(raised.value).splitlines()[0]}" in result.stderr


def test_the_script_repeats_the_keywords_a_script_can_hold(capsys):
    fd = _index_select_fusion()
    with pytest.raises(IndexError):
        fd.execute([np.zeros((4, 8), BF16), np.array([9])], bookend="none", target="a100", print_repro=True)
    assert "outputs = fd.execute(inputs, bookend='none', target='a100')" in capsys.readouterr().out


def test_a_reproducer_that_cannot_be_made_leaves_the_error_as_it_was(monkeypatch):
    fd = _index_select_fusion()
    monkeypatch.setenv("BRAZE_REPRO_DIR", "/proc/no/such/dir")  # cannot be created
    with pytest.raises(IndexError) as raised:
        fd.execute([np.zeros((4, 8), BF16), np.array([9])])
    (note,) = raised.value.__notes__
    assert note.startswith("braze: no reproducer could be written (")


def test_without_either_switch_nothing_is_printed_or_noted(capsys, monkeypatch):
    monkeypatch.delenv("BRAZE_REPRO_DIR", raising=False)
    with pytest.raises(IndexError) as raised:
        _index_select_fusion().execute([np.zeros((4, 8), BF16), np.array([9])])
    assert capsys.readouterr().out == ""
    assert not getattr(raised.value, "__notes__", [])


def test_the_script_recreates_values_layouts_and_alignment(tmp_path):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float)
        w = fd.define_tensor(shape=[1, -1], contiguity=[None, True], dtype=DataType.BFloat16)
        s = fd.define_scalar(dtype=DataType.Double)
        fd.add_output(fd.ops.mul(fd.ops.add(x, fd.ops.cast(w, DataType.Float)), s))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 10), dtype=np.float32)[:, ::2]              # non-contiguous: stride 2
    w_storage = rng.standard_normal(9).astype(BF16)
    w = w_storage[1:6].reshape(1, 5)                                        # 2 bytes off its allocation
    inputs = [x, w, 0.5]
    want = fd.execute(inputs)[0]
    text = fd.repro_script(inputs)
    namespace = {}  # the script up to its execute: the fusion and the rebuilt inputs
    exec(compile(text.split("outputs = fd.execute(inputs)")[0], "repro", "exec"), namespace)
    rebuilt = namespace["inputs"]
    for original, copy in zip(inputs[:2], rebuilt[:2]):
        assert copy.dtype == original.dtype and copy.shape == original.shape
        assert copy.strides == original.strides
        assert copy.ctypes.data % 64 == original.ctypes.data % 64
        np.testing.assert_array_equal(copy.astype(np.float64), original.astype(np.float64))
    assert rebuilt[2] == 0.5
    got = namespace["fd"].execute(rebuilt)[0]
    np.testing.assert_array_equal(got, want)
    result = _run_script(text, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "(7, 5)" in result.stdout


def test_expanded_bool_fp8_and_0d_inputs_are_recreated():
    with FusionDefinition() as fd:
        e = fd.define_tensor(shape=[-1, -1], contiguity=[True, None], dtype=DataType.Float)  # stride 0 inner
        b = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Bool)
        q = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float8_e4m3fn)
        z = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Double)
        z2 = fd.ops.broadcast(z, [True, True])
        fd.add_output(fd.ops.where(fd.ops.broadcast(b, [True, False]), e,
                                   fd.ops.add(fd.ops.cast(fd.ops.broadcast(q, [True, False]), DataType.Float), z2)))
    rng = np.random.default_rng(4)
    inputs = [np.broadcast_to(rng.standard_normal((3, 1), dtype=np.float32), (3, 6)), rng.random(6) > 0.5,
              rng.standard_normal(6).astype(ml_dtypes.float8_e4m3fn), np.array(2.5)]
    want = fd.execute(inputs)[0]
    namespace = {}
    exec(compile(fd.repro_script(inputs).split("outputs = fd.execute")[0], "repro", "exec"), namespace)
    rebuilt = namespace["inputs"]
    for original, copy in zip(inputs, rebuilt):
        assert copy.dtype == original.dtype and copy.shape == original.shape and copy.strides == original.strides
        np.testing.assert_array_equal(copy.astype(np.float64), original.astype(np.float64))
    np.testing.assert_array_equal(namespace["fd"].execute(rebuilt)[0], want)


def test_thunder_finds_the_reproducer_under_nvfusers_names():
    # thunder.examine.get_nvfuser_repro and its dynamo reports look up repro_script_for, then the legacy
    # getReproString; without inputs, the script rebuilds the definition.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(x))
    inputs = [np.arange(3, dtype=np.float32)]
    assert fd.repro_script_for(inputs) == fd.repro_script(inputs)
    assert fd.getReproString(inputs) == fd.repro_script(inputs)
    assert fd.repro_script_for() == repr(fd)
    fd.execute(inputs, profile=True)  # nvFuser's keyword: accepted, and no profile is collected
    with pytest.raises(NotImplementedError, match="torch.profiler"):
        fd.profile()


def test_the_script_recreates_a_strided_float8_e5m2_input(tmp_path):
    # numpy cannot read e5m2's type string ('<f1'): the script strides it through an unsigned view.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    with FusionDefinition() as fd:
        t = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float8_e5m2)
        fd.add_output(fd.ops.cast(t, DataType.Float))
    x = np.arange(6, dtype=np.float32).reshape(2, 3).astype(ml_dtypes.float8_e5m2)[:, ::2]
    namespace = {}
    exec(compile(fd.repro_script_for([x]).split("outputs = fd.execute")[0], "repro", "exec"), namespace)
    rebuilt = namespace["inputs"][0]
    assert rebuilt.strides == x.strides
    np.testing.assert_array_equal(rebuilt.astype(np.float32), x.astype(np.float32))
