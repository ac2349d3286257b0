// The GEMV schedule (a few rows): a warp per gemv_cols output columns; its lanes walk K in chunks of
// gemv_vector elements (one 16-byte load of B's weights per column), multiply by every row of A and keep
// a sum per row and column, then the warp adds its lanes' sums and lane 0 runs the epilogue. With
// split-K (too few columns to fill the GPU), gemv_split blocks share a group of columns, each walking
// its part of K; the last to arrive adds their sums in split order before the epilogue.
#include "scheduler/matmul/lowering.h"

namespace braze::scheduler {

void MatmulLowering::gemv() {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  ValueBuilder& vb = vb_;
  const MatmulExtents& s = s_;
  const int64_t width = p.gemv_vector;
  ctx_.kernel.grid = {p.grid, 1};
  ctx_.kernel.block = {32, p.gemv_warps};  // threadIdx.x: the lane, threadIdx.y: the warp

  const ExprId block = kb.blockIdx(0);
  const int64_t splits = p.gemv_split;
  const ExprId split = splits > 1 ? kb.letValue("split", kb.mod(block, kb.index(splits))) : kb.index(0);
  const ExprId group_id = splits > 1 ? kb.letValue("group_id", kb.div(block, kb.index(splits))) : block;
  const ExprId bn = kb.letValue("bn", kb.mod(group_id, kb.index(p.blocks_n)));
  setBatch(kb.letValue("bb", kb.div(group_id, kb.index(p.blocks_n))));
  const ExprId lane = kb.threadIdx(0);
  const ExprId col0 = kb.letValue("col0", kb.mul(kb.add(kb.mul(bn, kb.index(p.gemv_warps)), kb.threadIdx(1)),
                                                 kb.index(p.gemv_cols)));
  // Columns past N read column N - 1 (in bounds) and store nothing.
  std::vector<ExprId> cols;
  for (int64_t c = 0; c < p.gemv_cols; ++c) cols.push_back(kb.letValue("n", kb.min(kb.add(col0, kb.index(c)), kb.index(s.n - 1))));
  // A sum per row and column, in the accumulator's type (float, or int32 that wraps as mma's does).
  const int64_t rows = gemvRows();
  std::vector<VarId> sums;
  for (int64_t i = 0; i < rows * p.gemv_cols; ++i) {
    sums.push_back(kb.scalarVar("sum", acc_type_));
    kb.let(sums.back(), zeroOf(acc_type_));
  }
  const DataType product_type = acc_type_ == DataType::Float ? DataType::Float : DataType::Int64;
  // Adds row m times column c at K index k (a chunk's lane, or one element) to their sums.
  auto accumulate = [&](Chunk& chunk, Idx k) {
    std::vector<ExprId> column;
    for (ExprId n : cols) column.push_back(kb.cast(valueOfB(k, {n, false}), product_type));
    for (int64_t m = 0; m < rows; ++m) {
      const ExprId row = kb.cast(valueOfA({gemvRow(kb.index(m)), false}, k), product_type);
      kb.pushTarget(k.lane ? &chunk.body : &chunk.pre);
      for (int64_t c = 0; c < p.gemv_cols; ++c) {
        const VarId sum = sums[m * p.gemv_cols + c];
        // Float sums take one FMA per product: the order of this sum is the kernel's own anyway.
        if (product_type == DataType::Float) {
          kb.assign(sum, kb.fma(row, column[c], kb.ref(sum)));
          continue;
        }
        const ExprId product = kb.elementwise(OpKind::Mul, product_type, {row, column[c]});
        kb.assign(sum, kb.cast(kb.elementwise(OpKind::Add, product_type, {kb.cast(kb.ref(sum), product_type), product}),
                               acc_type_));
      }
      kb.popTarget();
    }
  };
  // Whole chunks of `width` K elements, lane l taking chunks l, l + 32, ... of its split's range in
  // steps of gemv_unroll chunks, unrolled so that the steps' loads are in flight together; then the last
  // K % width elements one at a time (by the last split).
  const int64_t chunks = s.k / width;
  const int64_t steps = ceilDiv(ceilDiv(chunks, splits), int64_t{32});  // per split
  const int64_t unroll = std::min(p.gemv_unroll, std::max<int64_t>(steps, 1));
  const ExprId first_chunk = kb.mul(split, kb.index(steps * 32));
  const VarId lane_var = kb.scalarVar("l", DataType::Int64, /*is_index=*/true);
  auto chunkStep = [&](ExprId step) {
    const ExprId chunk = kb.letValue("kc", kb.add(first_chunk, kb.add(kb.mul(step, kb.index(32)), lane)));
    const bool exact = chunks % 32 == 0 && chunks == steps * 32 * splits;
    const ExprId inside = exact ? kb.constantInt(1, DataType::Bool) : kb.lt(chunk, kb.index(chunks));
    emitChunk(kb, vb, inside, width, lane_var,
              [&](Chunk& c) { accumulate(c, {kb.mul(chunk, kb.index(width)), width > 1}); });
  };
  unrolledSteps(steps, unroll, chunkStep);
  const ExprId all = kb.constantInt(1, DataType::Bool);
  if (s.k % width != 0) {
    // split > splits - 2: the last split (an == in an `if` draws clang's -Wparentheses-equality in HIP).
    if (splits > 1) kb.openIf(kb.lt(kb.index(splits - 2), split));
    const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
    kb.openFor(kt, kb.add(kb.index(chunks * width), lane), kb.index(s.k), kb.index(32), /*unroll=*/false);
    emitChunk(kb, vb, all, 1, -1, [&](Chunk& c) { accumulate(c, {kb.ref(kt), false}); });
    kb.close();
    if (splits > 1) kb.close();
  }
  for (VarId sum : sums) kb.blockReduce(sum, ReduceOp::Sum, /*axis=*/0);
  if (splits > 1) combineGemvSplits(sums, group_id, split);
  // Lane 0 holds the warp's sums.
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t c = 0; c < p.gemv_cols; ++c) {
      const ExprId n = kb.add(col0, kb.index(c));
      const ExprId inside = kb.land(kb.eq(lane, kb.index(0)), kb.lt(n, kb.index(s.n)));
      epilogue(inside, gemvRow(kb.index(m)), n, 1, [&](ExprId) { return kb.ref(sums[m * p.gemv_cols + c]); });
    }
  }
  if (splits > 1) kb.close();  // the last split's block
}

void MatmulLowering::unrolledSteps(int64_t steps, int64_t unroll, const std::function<void(ExprId step)>& step) {
  KernelBuilder& kb = kb_;
  if (steps >= unroll && steps > 0) {
    const VarId group = kb.scalarVar("kg", DataType::Int64, /*is_index=*/true);
    const VarId u = kb.scalarVar("ku", DataType::Int64, /*is_index=*/true);
    kb.openFor(group, kb.index(0), kb.index(steps / unroll * unroll), kb.index(unroll), /*unroll=*/false);
    kb.openFor(u, kb.index(0), kb.index(unroll), kb.index(1), /*unroll=*/true);
    step(kb.add(kb.ref(group), kb.ref(u)));
    kb.close();
    kb.close();
  }
  if (steps % unroll != 0) {
    const VarId rest = kb.scalarVar("ks", DataType::Int64, /*is_index=*/true);
    kb.openFor(rest, kb.index(steps / unroll * unroll), kb.index(steps), kb.index(1), /*unroll=*/true);
    step(kb.ref(rest));
    kb.close();
  }
}

void MatmulLowering::combineGemvSplits(const std::vector<VarId>& sums, ExprId group_id, ExprId split) {
  KernelBuilder& kb = kb_;
  const int64_t splits = p_.gemv_split, groups = p_.grid / splits;
  const int64_t per_block = p_.gemv_warps * static_cast<int64_t>(sums.size());
  const TensorId partials = kb.addTensor(workspaceParam("partials", acc_type_, p_.grid * per_block, false));
  const TensorId arrived = kb.addTensor(workspaceParam("arrived", DataType::Int32, groups, true));
  // Split s of column group g keeps warp w's sums at ((g * splits + s) * warps + w) * sums.
  auto slot = [&](ExprId s, size_t i) {
    const ExprId base = kb.mul(kb.add(kb.mul(group_id, kb.index(splits)), s), kb.index(per_block));
    return kb.add(base, kb.add(kb.mul(kb.threadIdx(1), kb.index(static_cast<int64_t>(sums.size()))),
                               kb.index(static_cast<int64_t>(i))));
  };
  const ExprId lane0 = kb.eq(kb.threadIdx(0), kb.index(0));
  kb.openIf(lane0);
  for (size_t i = 0; i < sums.size(); ++i) kb.store(partials, slot(split, i), kb.ref(sums[i]));
  kb.close();
  kb.fence();
  kb.barrier();
  const VarId flag = kb.arrayVar("last_split", DataType::Bool, 1, VarKind::SharedArray);
  kb.declare(flag);
  const ExprId first_thread = kb.land(lane0, kb.eq(kb.threadIdx(1), kb.index(0)));
  kb.openIf(first_thread);
  const VarId before = kb.scalarVar("arrived_before", DataType::Int64, true);
  kb.atomicAdd(before, arrived, group_id, kb.index(1));
  kb.fence();  // acquire: the other splits' partials are read after their count is seen
  kb.localWrite(flag, kb.index(0), kb.eq(kb.ref(before), kb.index(splits - 1)));
  kb.close();
  kb.barrier();
  kb.openIf(kb.letValue("is_last", kb.localRead(flag, kb.index(0))));
  // Lane 0 of each warp adds the splits' sums in split order (the same total whichever block is last).
  const DataType sum_type = acc_type_ == DataType::Float ? DataType::Float : DataType::Int64;
  kb.openIf(lane0);
  for (VarId sum : sums) kb.assign(sum, zeroOf(acc_type_));
  const VarId s = kb.scalarVar("s", DataType::Int64, true);
  kb.openFor(s, kb.index(0), kb.index(splits), kb.index(1), /*unroll=*/false);
  for (size_t i = 0; i < sums.size(); ++i) {
    const ExprId total = kb.elementwise(OpKind::Add, sum_type, {kb.cast(kb.ref(sums[i]), sum_type),
                                                                 kb.cast(kb.load(partials, slot(kb.ref(s), i)), sum_type)});
    kb.assign(sums[i], kb.cast(total, acc_type_));
  }
  kb.close();
  kb.close();
  kb.openIf(first_thread);
  kb.store(arrived, group_id, kb.constantInt(0, DataType::Int32));
  kb.close();
}

}  // namespace braze::scheduler
