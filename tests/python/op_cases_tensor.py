"""Cases for the non-elementwise fd.ops: reductions and normalizations, meta ops (views), data
movement, creation, indexing, matmul, quantization and shape queries."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from braze import DataType
from op_cases import BF16, BOOL, F32, F64, I32, I64, OpCase, bools, inputs, ints, uniform

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
I8 = np.dtype(np.int8)


def _reduce(name, ref, in_dtype=F32, out=None, **kwargs):
    def build(fd, x):
        return getattr(fd.ops, name)(x, **kwargs)

    def reference(x):
        dims = kwargs.get("dims", kwargs.get("dim"))
        axis = None if dims is None else tuple(dims) if isinstance(dims, (list, tuple)) else dims
        return ref(x, axis=axis, keepdims=kwargs.get("keepdim", False))

    tag = "-".join(f"{k}={v}" for k, v in kwargs.items())
    if in_dtype == BOOL:
        make = bools((3, 4, 5))
    elif in_dtype == I32:
        make = ints((3, 4, 5), -3, 4)
    else:
        make = uniform((3, 4, 5), 0.5, 1.5, in_dtype)
    return OpCase(name, f"{name}-{np.dtype(in_dtype).name}-{tag}", build, inputs(make), reference, (out or in_dtype,))


def reduction_cases():
    cases = [
        _reduce("sum", np.sum, dims=[1]),
        _reduce("sum", np.sum, dims=[0, 2], keepdim=True),
        _reduce("sum", np.sum, dim=-1),
        _reduce("sum", np.sum),  # every dim
        _reduce("sum", np.sum, BF16, dims=[2]),
        _reduce("sum", np.sum, I32, I64, dims=[1]),  # integer sums give Int64, as torch
        _reduce("sum", np.sum, F32, F64, dims=[1], dtype=DataType.Double),
        _reduce("prod", np.prod, dims=[2]),
        _reduce("max", np.max, dims=[0]),
        _reduce("max", np.max, BF16, dims=[1], keepdim=True),
        _reduce("min", np.min, dims=[1, 2]),
        _reduce("min", np.min, I32, dims=[2]),
        _reduce("any", np.any, BOOL, dims=[1]),
        _reduce("all", np.all, BOOL, dims=[0, 2]),
    ]
    x = inputs(uniform((3, 4, 7), -2, 2))
    cases += [
        OpCase("var", "var-correction-1", lambda fd, t: fd.ops.var(t, dims=[2]), x,
               lambda t: t.var(axis=2, ddof=1), (F32,)),
        OpCase("var", "var-correction-0-keepdim", lambda fd, t: fd.ops.var(t, [0, 2], correction=0, keepdim=True), x,
               lambda t: t.var(axis=(0, 2), ddof=0, keepdims=True), (F32,)),
        OpCase("var_mean", "var_mean", lambda fd, t: fd.ops.var_mean(t, dims=[2], correction=0), x,
               lambda t: (t.var(axis=2), t.mean(axis=2)), (F32, F32)),
        OpCase("var_mean", "var_mean-bf16", lambda fd, t: fd.ops.var_mean(t, dims=[1]),
               inputs(uniform((3, 4, 7), -2, 2, BF16)), lambda t: (t.var(axis=1, ddof=1), t.mean(axis=1)), (BF16, BF16)),
        OpCase("welford", "welford", lambda fd, t: fd.ops.welford(t, dims=[1]), x,
               lambda t: (t.mean(axis=1), ((t - t.mean(axis=1, keepdims=True)) ** 2).sum(axis=1),
                          np.full((3, 7), 4)), (F32, F32, I64)),
    ]
    return cases


def _view(op, ident, build, make, reference, out=F32):
    return OpCase(op, ident, build, make, reference, (out,))


def shape_cases():
    x = inputs(uniform((2, 3, 5), -3, 3))
    v = inputs(uniform((5,), -3, 3))
    return [
        _view("broadcast", "broadcast", lambda fd, t: fd.ops.broadcast(t, [True, False, True]), v,
              lambda t: t[None, :, None]),
        _view("broadcast_in_dim", "broadcast_in_dim", lambda fd, t: fd.ops.broadcast_in_dim(t, [4, 5], [1]), v,
              lambda t: np.broadcast_to(t, (4, 5))),
        _view("broadcast_in_dim", "broadcast_in_dim-symbolic-shape",
              lambda fd, t, u: fd.ops.broadcast_in_dim(t, u.shape(), [1]), inputs(uniform((5,), -3, 3), uniform((3, 5), 0, 1)),
              lambda t, u: np.broadcast_to(t, (3, 5))),
        _view("expand", "expand", lambda fd, t: fd.ops.expand(fd.ops.broadcast(t, [True, False]), [4, -1]), v,
              lambda t: np.broadcast_to(t, (4, 5))),
        _view("reshape", "reshape", lambda fd, t: fd.ops.reshape(t, [6, -1]), x, lambda t: t.reshape(6, 5)),
        _view("reshape", "reshape-symbolic", lambda fd, t: fd.ops.reshape(t, [t.size(0), 15]), x,
              lambda t: t.reshape(2, 15)),
        _view("permute", "permute", lambda fd, t: fd.ops.permute(t, [2, 0, 1]), x, lambda t: t.transpose(2, 0, 1)),
        _view("squeeze", "squeeze", lambda fd, t: fd.ops.squeeze(t, [1]), inputs(uniform((3, 1, 5), -3, 3)),
              lambda t: t[:, 0, :]),
        _view("squeeze", "squeeze-expanded", lambda fd, t: fd.ops.squeeze(t, [0], squeeze_expanded=True),
              inputs(lambda rng: np.broadcast_to(rng.uniform(-1, 1, (1, 5)).astype(np.float32), (4, 5))),
              lambda t: t[0]),
        _view("slice", "slice", lambda fd, t: fd.ops.slice(t, [0, 1, 1], [2, 3, 4]), x, lambda t: t[0:2, 1:3, 1:4]),
        _view("slice", "slice-clamped-and-strided", lambda fd, t: fd.ops.slice(t, [0, 1, 0], [2, 9, 5], [1, 1, 2]), x,
              lambda t: t[0:2, 1:9, 0:5:2]),
        _view("pad", "pad", lambda fd, t: fd.ops.pad(t, [1, 2]), x, lambda t: np.pad(t, [(0, 0), (0, 0), (1, 2)])),
        _view("pad", "pad-value-two-dims", lambda fd, t: fd.ops.pad(t, [0, 1, 2, 0], 7.0), x,
              lambda t: np.pad(t, [(0, 0), (2, 0), (0, 1)], constant_values=7.0)),
        _view("cat", "cat", lambda fd, a, b: fd.ops.cat([a, b], dim=1),
              inputs(uniform((2, 3), -1, 1), uniform((2, 4), -1, 1)), lambda a, b: np.concatenate([a, b], axis=1)),
        _view("cat", "cat-negative-dim", lambda fd, a, b: fd.ops.cat([a, b, a], -1),
              inputs(uniform((2, 3), -1, 1), uniform((2, 1), -1, 1)), lambda a, b: np.concatenate([a, b, a], axis=-1)),
        _view("set", "set", lambda fd, t: fd.ops.set(t), x, lambda t: t),
        _view("stride_order", "stride_order", lambda fd, t: fd.ops.stride_order(t, [0, 2, 1]), x, lambda t: t),
        _view("segment_set", "segment_set", lambda fd, t: fd.ops.segment_set(t), x, lambda t: t),
    ]


def creation_cases():
    return [
        OpCase("full", "full", lambda fd: fd.ops.full([2, 3], 1.5, DataType.Float), inputs(),
               lambda: np.full((2, 3), 1.5), (F32,)),
        OpCase("full", "full-symbolic-shape", lambda fd, n: fd.ops.full([n, 2], 7, DataType.Int32), inputs(3),
               lambda n: np.full((n, 2), 7), (I32,)),
        OpCase("iota", "iota", lambda fd: fd.ops.iota(5), inputs(), lambda: np.arange(5), (I64,)),
        OpCase("iota", "iota-start-step-float", lambda fd: fd.ops.iota(4, 1.0, 0.5, DataType.Float), inputs(),
               lambda: 1.0 + 0.5 * np.arange(4), (F32,)),
        OpCase("size", "size", lambda fd, t: fd.ops.size(t, 1), inputs(uniform((2, 7), 0, 1)), lambda t: 7, (I64,)),
        OpCase("shape", "shape", lambda fd, t: tuple(fd.ops.shape(t)), inputs(uniform((2, 7), 0, 1)),
               lambda t: (2, 7), (I64, I64)),
        OpCase("tensor_sizes", "tensor_sizes", lambda fd, t: fd.ops.tensor_sizes(t)[0], inputs(uniform((4, 7), 0, 1)),
               lambda t: 4, (I64,)),
        OpCase("at", "at", lambda fd, t: fd.ops.at(fd.ops.shape(t), -1), inputs(uniform((4, 7), 0, 1)),
               lambda t: 7, (I64,)),
    ]


def indexing_cases():
    x = uniform((4, 5), -3, 3)
    return [
        OpCase("index_select", "index_select", lambda fd, t, i: fd.ops.index_select(t, i, 0),
               inputs(x, lambda rng: rng.integers(0, 4, (6,))), lambda t, i: t[i], (F32,)),
        OpCase("select", "select", lambda fd, t: fd.ops.select(t, 2, 1), inputs(x), lambda t: t[:, 2], (F32,)),
        OpCase("select", "select_from_end", lambda fd, t: fd.ops.select(t, -4, 0), inputs(x), lambda t: t[0], (F32,)),
        OpCase("gather", "gather", lambda fd, t, i: fd.ops.gather(t, i, 1),
               inputs(x, lambda rng: rng.integers(0, 5, (3, 2))),
               lambda t, i: np.take_along_axis(t[:3], i, axis=1), (F32,)),
        OpCase("take_along_axis", "take_along_axis", lambda fd, t, i: fd.ops.take_along_axis(t, i, 0),
               inputs(x, lambda rng: rng.integers(0, 4, (2, 5))), lambda t, i: np.take_along_axis(t, i, axis=0), (F32,)),
        # Without max_norm (renormalizing, an in-place update of the weight, is test_embedding.py's).
        OpCase("embedding_fwd", "embedding_fwd", lambda fd, t, i: fd.ops.embedding_fwd(i, t),
               inputs(x, lambda rng: rng.integers(0, 4, (2, 3))), lambda t, i: t[i], (F32,)),
    ]


def _scattered(t, i, s):
    out = t.copy()
    np.put_along_axis(out, i, s[: i.shape[0], : i.shape[1]], axis=0)
    return out


def _index_put_accumulated(acc, i, v):
    out = acc.copy()
    np.add.at(out, i, v)
    return out


def _top(t, k, dim):
    """torch.topk(largest=True) with ties in index order: the first k of a stable descending sort."""
    order = np.take(np.argsort(-t, axis=dim, kind="stable"), np.arange(k), axis=dim)
    return np.take_along_axis(t, order, axis=dim), order


def scan_scatter_cases():
    x = uniform((4, 5), -3, 3)
    return [
        OpCase("cumsum", "cumsum", lambda fd, t: fd.ops.cumsum(t, 1), inputs(x), lambda t: np.cumsum(t, 1), (F32,)),
        OpCase("cumsum", "cumsum-int8-in-int64", lambda fd, t: fd.ops.cumsum(t, 0),
               inputs(ints((5, 3), -100, 100, np.int8)), lambda t: np.cumsum(t, 0), (I64,)),
        OpCase("topk", "topk-largest-3", lambda fd, t: fd.ops.topk(t, 3, 1, True, True), inputs(x),
               lambda t: _top(t, 3, 1), (F32, I64)),
        OpCase("argsort", "argsort-descending-dim0", lambda fd, t: fd.ops.argsort(t, 0, True, False), inputs(x),
               lambda t: np.argsort(-t, axis=0, kind="stable"), (I64,)),
        OpCase("scatter", "scatter", lambda fd, t, i, src: fd.ops.scatter(t, i, src, 0),
               inputs(x, lambda rng: np.stack([rng.permutation(4)[:2] for _ in range(5)], 1), uniform((3, 5), -1, 1)),
               _scattered, (F32,)),
        OpCase("index_put_accumulate", "index_put_accumulate-repeated-rows",
               lambda fd, a, i, v: fd.ops.index_put_accumulate(a, i, v),
               inputs(x, lambda rng: rng.integers(0, 4, (7,)), uniform((7, 5), -1, 1)), _index_put_accumulated, (F32,)),
        OpCase("triu", "triu", lambda fd, t: fd.ops.triu(t), inputs(x), lambda t: np.triu(t), (F32,)),
        OpCase("triu", "triu-diagonal-3d", lambda fd, t: fd.ops.triu(t, -1), inputs(uniform((2, 4, 3), -1, 1)),
               lambda t: np.triu(t, -1), (F32,)),
    ]


def matmul_cases():
    a = uniform((3, 4), -1, 1)
    return [
        OpCase("matmul", "matmul-2d", lambda fd, x, y: fd.ops.matmul(x, y), inputs(a, uniform((4, 5), -1, 1)),
               np.matmul, (F32,)),
        OpCase("matmul", "matmul-batched-broadcast", lambda fd, x, y: fd.ops.matmul(x, y),
               inputs(uniform((2, 3, 4), -1, 1), uniform((4, 5), -1, 1)), np.matmul, (F32,)),
        OpCase("matmul", "matmul-vector", lambda fd, x, y: fd.ops.matmul(x, y), inputs(a, uniform((4,), -1, 1)),
               np.matmul, (F32,)),
        OpCase("matmul", "matmul-int8-accumulates-int32", lambda fd, x, y: fd.ops.matmul(x, y),
               inputs(ints((3, 64), -128, 128, I8), ints((64, 5), -128, 128, I8)), np.matmul, (I32,)),
        OpCase("matmul", "matmul-bf16", lambda fd, x, y: fd.ops.matmul(x, y),
               inputs(uniform((3, 8), -1, 1, BF16), uniform((8, 2), -1, 1, BF16)), np.matmul, (BF16,)),
        OpCase("bmm", "bmm", lambda fd, x, y: fd.ops.bmm(x, y),
               inputs(uniform((2, 3, 4), -1, 1), uniform((2, 4, 5), -1, 1)), np.matmul, (F32,)),
        OpCase("linear", "linear-bias", lambda fd, x, w, b: fd.ops.linear(x, w, b),
               inputs(uniform((2, 3, 4), -1, 1), uniform((5, 4), -1, 1), uniform((5,), -1, 1)),
               lambda x, w, b: x @ w.T + b, (F32,)),
        OpCase("linear", "linear-no-bias", lambda fd, x, w: fd.ops.linear(x, w), inputs(a, uniform((5, 4), -1, 1)),
               lambda x, w: x @ w.T, (F32,)),
        OpCase("scaled_mm", "scaled_mm-row-column-scales-bias",
               lambda fd, x, y, sa, sb, b: fd.ops.scaled_mm(x, y, sa, sb, b, out_dtype=DataType.BFloat16),
               inputs(uniform((3, 32), -2, 2, E4M3), uniform((32, 5), -2, 2, E4M3), uniform((3, 1), 0.5, 2),
                      uniform((1, 5), 0.5, 2), uniform((5,), -1, 1)),
               lambda x, y, sa, sb, b: (x @ y) * sa * sb + b, (BF16,)),
    ]


def _round_half_even_clip(v, low, high):
    return np.clip(np.round(v), low, high)


def quantize_cases():
    x = uniform((4, 6), -3, 3)
    scale_c = lambda rng: rng.uniform(0.01, 0.05, (6,)).astype(np.float32)  # noqa: E731
    scale_b = lambda rng: rng.uniform(0.01, 0.05, (2, 2)).astype(np.float32)  # noqa: E731
    zp = lambda rng: rng.integers(-5, 5, (6,)).astype(np.int8)  # noqa: E731
    blocks = lambda s: np.repeat(np.repeat(s, 2, axis=0), 3, axis=1)  # noqa: E731
    return [
        OpCase("quantize", "quantize-per-tensor", lambda fd, t: fd.ops.quantize(t, 0.03), inputs(x),
               lambda t: _round_half_even_clip(t / np.float64(np.float32(0.03)), -128, 127), (I8,)),
        OpCase("quantize", "quantize-per-channel-zero-point",
               lambda fd, t, s, z: fd.ops.quantize(t, s, z, axis=1), inputs(x, scale_c, zp),
               lambda t, s, z: _round_half_even_clip(t / s + z, -128, 127), (I8,)),
        OpCase("quantize", "quantize-per-block", lambda fd, t, s: fd.ops.quantize(t, s, block_shape=[2, 3]),
               inputs(x, scale_b), lambda t, s: _round_half_even_clip(t / blocks(s), -128, 127), (I8,)),
        OpCase("quantize", "quantize-fp8", lambda fd, t, s: fd.ops.quantize(t, s, dtype=DataType.Float8_e4m3fn, axis=1),
               inputs(x, scale_c), lambda t, s: np.clip(t / s, -448, 448).astype(E4M3), (E4M3,)),
        OpCase("dequantize", "dequantize-per-channel", lambda fd, q, s, z: fd.ops.dequantize(q, s, z, axis=1),
               inputs(ints((4, 6), -128, 128, I8), scale_c, zp), lambda q, s, z: (q - z) * s, (F32,)),
        OpCase("dequantize", "dequantize-per-tensor-bf16",
               lambda fd, q: fd.ops.dequantize(q, 0.5, dtype=DataType.BFloat16), inputs(ints((4, 6), -128, 128, I8)),
               lambda q: q * 0.5, (BF16,)),
    ]


def all_cases():
    return (reduction_cases() + shape_cases() + creation_cases() + indexing_cases() + scan_scatter_cases()
            + matmul_cases() + quantize_cases())
