// The GEMV schedule (a few rows): a warp per gemv_cols output columns; its lanes walk K in chunks of
// gemv_vector elements (one 16-byte load of B's weights per column), multiply by every row of A and keep
// a sum per row and column, then the warp adds its lanes' sums and lane 0 runs the epilogue.
#include "scheduler/matmul/lowering.h"

namespace braze::kernel {

void MatmulLowering::gemv() {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  ValueBuilder& vb = vb_;
  const MatmulExtents& s = s_;
  const int64_t width = p.gemv_vector;
  ctx_.kernel.grid = {p.grid, 1};
  ctx_.kernel.block = {32, p.gemv_warps};  // threadIdx.x: the lane, threadIdx.y: the warp

  const ExprId block = kb.blockIdx(0);
  const ExprId bn = kb.letValue("bn", kb.mod(block, kb.index(p.blocks_n)));
  setBatch(kb.letValue("bb", kb.div(block, kb.index(p.blocks_n))));
  const ExprId lane = kb.threadIdx(0);
  const ExprId col0 = kb.letValue("col0", kb.mul(kb.add(kb.mul(bn, kb.index(p.gemv_warps)), kb.threadIdx(1)),
                                                 kb.index(p.gemv_cols)));
  // Columns past N read column N - 1 (in bounds) and store nothing.
  std::vector<ExprId> cols;
  for (int64_t c = 0; c < p.gemv_cols; ++c) cols.push_back(kb.letValue("n", kb.min(kb.add(col0, kb.index(c)), kb.index(s.n - 1))));
  // A sum per row and column, in the accumulator's type (float, or int32 that wraps as mma's does).
  std::vector<VarId> sums;
  for (int64_t i = 0; i < s.m * p.gemv_cols; ++i) {
    sums.push_back(kb.scalarVar("sum", acc_type_));
    kb.let(sums.back(), zeroOf(acc_type_));
  }
  const DataType product_type = acc_type_ == DataType::Float ? DataType::Float : DataType::Int64;
  // Adds row m times column c at K index k (a chunk's lane, or one element) to their sums.
  auto accumulate = [&](Chunk& chunk, Idx k) {
    std::vector<ExprId> column;
    for (ExprId n : cols) column.push_back(kb.cast(valueOfB(k, {n, false}), product_type));
    for (int64_t m = 0; m < s.m; ++m) {
      const ExprId row = kb.cast(valueOfA({kb.index(m), false}, k), product_type);
      kb.pushTarget(k.lane ? &chunk.body : &chunk.pre);
      for (int64_t c = 0; c < p.gemv_cols; ++c) {
        const VarId sum = sums[m * p.gemv_cols + c];
        const ExprId product = kb.elementwise(OpKind::Mul, product_type, {row, column[c]});
        kb.assign(sum, kb.cast(kb.elementwise(OpKind::Add, product_type, {kb.cast(kb.ref(sum), product_type), product}),
                               acc_type_));
      }
      kb.popTarget();
    }
  };
  // Whole chunks of `width` K elements, lane l taking chunks l, l + 32, ... in steps of gemv_unroll
  // chunks, unrolled so that the steps' loads are in flight together; then the last K % width elements
  // one at a time.
  const int64_t chunks = s.k / width;
  const int64_t steps = ceilDiv(chunks, int64_t{32});
  const int64_t unroll = std::min(p.gemv_unroll, std::max<int64_t>(steps, 1));
  const VarId lane_var = kb.scalarVar("l", DataType::Int64, /*is_index=*/true);
  auto chunkStep = [&](ExprId step) {
    const ExprId chunk = kb.letValue("kc", kb.add(kb.mul(step, kb.index(32)), lane));
    const ExprId inside = chunks % 32 == 0 ? kb.constantInt(1, DataType::Bool) : kb.lt(chunk, kb.index(chunks));
    emitChunk(kb, vb, inside, width, lane_var,
              [&](Chunk& c) { accumulate(c, {kb.mul(chunk, kb.index(width)), width > 1}); });
  };
  if (steps >= unroll) {
    const VarId group = kb.scalarVar("kg", DataType::Int64, /*is_index=*/true);
    const VarId u = kb.scalarVar("ku", DataType::Int64, /*is_index=*/true);
    kb.openFor(group, kb.index(0), kb.index(steps / unroll * unroll), kb.index(unroll), /*unroll=*/false);
    kb.openFor(u, kb.index(0), kb.index(unroll), kb.index(1), /*unroll=*/true);
    chunkStep(kb.add(kb.ref(group), kb.ref(u)));
    kb.close();
    kb.close();
  }
  if (steps % unroll != 0) {
    const VarId step = kb.scalarVar("ks", DataType::Int64, /*is_index=*/true);
    kb.openFor(step, kb.index(steps / unroll * unroll), kb.index(steps), kb.index(1), /*unroll=*/true);
    chunkStep(kb.ref(step));
    kb.close();
  }
  const ExprId all = kb.constantInt(1, DataType::Bool);
  if (s.k % width != 0) {
    const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
    kb.openFor(kt, kb.add(kb.index(chunks * width), lane), kb.index(s.k), kb.index(32), /*unroll=*/false);
    emitChunk(kb, vb, all, 1, -1, [&](Chunk& c) { accumulate(c, {kb.ref(kt), false}); });
    kb.close();
  }
  for (VarId sum : sums) kb.blockReduce(sum, ReduceOp::Sum, /*axis=*/0);
  // Lane 0 holds the warp's sums.
  for (int64_t m = 0; m < s.m; ++m) {
    for (int64_t c = 0; c < p.gemv_cols; ++c) {
      const ExprId n = kb.add(col0, kb.index(c));
      const ExprId inside = kb.land(kb.eq(lane, kb.index(0)), kb.lt(n, kb.index(s.n)));
      epilogue(inside, kb.index(m), n, [&] { return kb.ref(sums[m * p.gemv_cols + c]); });
    }
  }
}

}  // namespace braze::kernel
