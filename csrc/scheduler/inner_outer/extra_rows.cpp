// The inner-outer kernel's walk over an extra reduction's rows (the bias grad of the linear next to a
// norm: the same rows as the norm's, of another width). Every thread of the block takes its own columns
// of each row; a block walks a dozen rows or more, so their loads go out several rows at a time.
#include "scheduler/inner_outer/entry.h"
#include "scheduler/reduction/reduce_values.h"

namespace braze::scheduler {

void walkExtraRows(KernelBuilder& kb, ValueBuilder& vb, LoweringContext& ctx, const BoundShapes& bound,
                   const ExtraRowsWalk& walk, VarId lane) {
  const Expr& e = *walk.reduction;
  const ExtraOuterParams& ep = walk.params;
  const DataType out = e.output(0)->dtype();
  const DataType acc_type = accumulatorType(out);
  const ReduceOp op = reduceOpOf(e.kind());
  const std::vector<int64_t>& sizes = bound.sizesOf(e.input(0));
  const size_t reduced_dims = e.attrs().getInts("dims").size();
  const std::vector<int64_t> reduced(sizes.begin(), sizes.begin() + static_cast<int64_t>(reduced_dims));
  const std::vector<int64_t> kept(sizes.begin() + static_cast<int64_t>(reduced_dims), sizes.end());
  const int64_t vec = ep.vectorize;
  vb.clearLoadCache();  // other tensors than the rows': nothing of theirs is kept
  const VarId acc = kb.arrayVar("extra", acc_type, ep.chunks * vec);
  kb.declare(acc);
  for (int64_t i = 0; i < ep.chunks * vec; ++i) kb.localWrite(acc, kb.index(i), identity(kb, op, acc_type));
  const ExprId thread = kb.letValue(
      "thread", kb.add(kb.mul(kb.threadIdx(1), kb.index(walk.rows.threads_x)), kb.threadIdx(0)));
  const int64_t threads = walk.rows.threads_x * walk.rows.threads_y;
  const VarId row = kb.scalarVar("r", DataType::Int64, true);
  const VarId chunk = kb.scalarVar("c", DataType::Int64, true);
  auto column = [&] { return kb.mul(kb.add(kb.mul(kb.ref(chunk), kb.index(threads)), thread), kb.index(vec)); };
  // The block's rows are blockIdx.x + j * blocks for j < n; rows_in_flight of them per iteration of an
  // unrolled loop, whose loads go out together, then the last n % rows_in_flight one at a time. Every
  // row read is in range: no guard (a branch per row around its loads) stands between them.
  const ExprId step = kb.extent("blocks", walk.blocks);
  // The norm's rows are a launch argument; rows of its own a constant of the code, which the kernel is then
  // not relaunched at other sizes with (relaunchInnerOuter).
  int64_t own_rows = 1;
  for (int64_t size : reduced) own_rows *= size;
  const ExprId rows = ep.own_rows == 0 ? kb.extent("rows", walk.rows.problem.rows) : kb.index(own_rows);
  const ExprId block_rows =
      kb.letValue("block_rows", kb.div(kb.add(kb.sub(rows, kb.blockIdx(0)), kb.sub(step, kb.index(1))), step));
  const ExprId in_flight = kb.index(ep.rows_in_flight);
  const ExprId unrolled_rows = kb.letValue("unrolled_rows", kb.mul(kb.div(block_rows, in_flight), in_flight));
  auto sumRow = [&](ExprId j) {
    const ExprId r = kb.letValue("r", kb.add(kb.blockIdx(0), kb.mul(j, step)));
    kb.openFor(chunk, kb.index(0), kb.index(ep.chunks), kb.index(1), true);
    const ExprId col = column();
    emitChunk(kb, vb, kb.lt(col, kb.index(ep.columns)), vec, lane, [&](Chunk& c) {
      std::vector<Idx> index = vb.unflatten(r, false, reduced);
      for (Idx& i : vb.unflatten(col, vec > 1, kept)) index.push_back(i);
      const ExprId in = vb.valueAt(e.input(0), index);
      const ExprId v = reducedElement(kb, in, e.input(0)->dtype(), out);
      kb.pushTarget(vec > 1 ? &c.body : &c.pre);
      ExprId slot = kb.mul(kb.ref(chunk), kb.index(vec));
      if (vec > 1) slot = kb.add(slot, kb.ref(lane));
      kb.localWrite(acc, slot, kb.elementwise(combineOf(op), acc_type, {kb.localRead(acc, slot), v}));
      kb.popTarget();
    });
    kb.close();
  };
  const VarId u = kb.scalarVar("u", DataType::Int64, true);
  kb.openFor(row, kb.index(0), unrolled_rows, in_flight, false);
  kb.openFor(u, kb.index(0), in_flight, kb.index(1), true);
  sumRow(kb.add(kb.ref(row), kb.ref(u)));
  kb.close();
  kb.close();
  kb.openFor(row, unrolled_rows, block_rows, kb.index(1), false);
  sumRow(kb.ref(row));
  kb.close();
  const TensorId ws =
      kb.addTensor(workspaceParam(innerOuterPartialsName(walk.workspace), acc_type, walk.blocks * ep.columns, false));
  ctx.kernel.tensors[ws].shared = true;
  kb.openFor(chunk, kb.index(0), kb.index(ep.chunks), kb.index(1), true);
  storeChunkOfSums(kb, ws, acc_type, acc, kb.mul(kb.ref(chunk), kb.index(vec)),
                   kb.mul(kb.blockIdx(0), kb.index(ep.columns)), column(), vec, ep.columns);
  kb.close();
}

}  // namespace braze::scheduler
