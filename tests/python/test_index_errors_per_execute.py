"""An index a kernel finds out of range is raised by the execute that launched it, on the simulated device:
not by another thread's execute running at the same time, and not by the next execute after a run that
failed for another reason too."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from braze import DataType, FusionDefinition


def _index_select():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int64)
        fd.add_output(fd.ops.index_select(x, i, 0))
    return fd


def _exp():
    with FusionDefinition() as fd:
        y = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(y))
    return fd


def test_threads_each_get_their_own_index_errors():
    bad_fd, good_fd = _index_select(), _exp()
    x = np.random.default_rng(0).random((64, 256), dtype=np.float32)
    index = np.arange(64)
    index[-1] = 1000
    y = np.ones((64, 256), np.float32)
    unreported, blamed = [], []

    def run_bad():
        for _ in range(20):
            try:
                bad_fd.execute([x, index])
                unreported.append(1)
            except IndexError:
                pass

    def run_good():
        for _ in range(20):
            try:
                np.testing.assert_allclose(good_fd.execute([y])[0], np.e, rtol=1e-6)
            except IndexError as error:
                blamed.append(str(error))

    threads = [threading.Thread(target=run_bad), threading.Thread(target=run_good)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not unreported, f"{len(unreported)} executes with an index out of range returned"
    assert not blamed, blamed[:1]


def test_an_index_error_of_a_run_that_failed_otherwise_is_its_own():
    # The index_select reads row 7 of 3, then the division meets a zero: the reference raises the index
    # first, and so does the execute; the next execute, of another fusion, runs.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32)
        i = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int64)
        d = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Int32)
        fd.add_output(fd.ops.div(fd.ops.index_select(x, i, 0), d))
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    d = np.ones((2, 4), np.int32)
    d[1, 3] = 0
    with pytest.raises(IndexError, match=r"index 7 is out of bounds"):
        fd.execute([x, np.array([0, 7]), d])
    np.testing.assert_allclose(_exp().execute([np.zeros((2, 2), np.float32)])[0], 1.0)
