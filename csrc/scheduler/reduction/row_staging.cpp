// The walk over row groups of the inner-outer and staged kernels, and the staging of rows in shared
// memory (ReductionParams::staged), in the staged inner persistent kernel and the inner-outer one. A
// block walks row groups blockIdx.x, + grid, ...; before the passes over one group, each thread issues
// the cp.asyncs of its own chunks of the next group's row data into the other of two shared-memory
// stages, then waits for the copies of the current group (issued one iteration earlier) and runs the
// passes on them. So the next rows' loads are in flight while this group is reduced, where a kernel
// keeping rows in registers issues no load between its first pass and its last. A thread reads back
// only the chunks it copied, so the stages need no block barrier: the wait on its own copies is
// enough, and a stage is refilled by the thread that read it, after reading it.
#include "scheduler/reduction/row_launch.h"
#include "scheduler/reduction/row_lowering.h"
#include "support/error.h"

#include <algorithm>

namespace braze::scheduler {
namespace {

// The cp.asyncs of one chunk of `vec` elements of `bytes` each: pieces of 16 bytes, or one of 4 or 8.
struct ChunkCopies {
  int64_t piece = 1;   // elements per cp.async
  int64_t count = 1;   // cp.asyncs per chunk
};
std::optional<ChunkCopies> chunkCopies(int64_t vec, int64_t bytes) {
  const int64_t chunk = vec * bytes;
  if (chunk % 4 != 0 || (chunk > 16 && chunk % 16 != 0)) return std::nullopt;
  const int64_t piece_bytes = std::min<int64_t>(chunk, 16);
  return ChunkCopies{piece_bytes / bytes, chunk / piece_bytes};
}

// Whether every chunk of `vec` row elements of `param` (of the domain's shape, dims `reduced` reduced)
// is cp.asyncs of whole aligned runs: along the row's innermost dim of more than one element, stride 1
// (vectors); every other stride, the offset and the pointer's alignment multiples of a copy.
bool copiesWhole(const TensorParam& param, const std::vector<int64_t>& reduced, int64_t vec) {
  const int64_t bytes = sizeOf(param.dtype);
  const auto copies = chunkCopies(vec, bytes);
  if (!copies || param.alignment_bytes % (copies->piece * bytes) != 0 || param.layout.offset % copies->piece != 0) {
    return false;
  }
  const StridedLayout& layout = param.layout;
  int64_t walked = -1;  // the innermost reduced dim of more than one element
  for (auto d = static_cast<int64_t>(layout.sizes.size()); d-- > 0 && walked < 0;) {
    const bool is_reduced = std::find(reduced.begin(), reduced.end(), d) != reduced.end();
    if (is_reduced && layout.sizes[static_cast<size_t>(d)] > 1) walked = d;
  }
  for (size_t d = 0; d < layout.sizes.size(); ++d) {
    if (layout.sizes[d] <= 1) continue;
    const bool lanes = static_cast<int64_t>(d) == walked && vec > 1;
    if (lanes ? layout.strides[d] != 1 : layout.strides[d] % copies->piece != 0) return false;
  }
  return true;
}

}  // namespace

std::vector<const Val*> RowLowering::stagedRowInputs(int64_t vec) const {
  std::vector<const Val*> staged = keptRowInputs(false);
  std::erase_if(staged, [&](const Val* val) {
    return !copiesWhole(ctx_.kernel.tensors[ctx_.inputs.at(val)], domain_.dims, vec);
  });
  return staged;
}

void RowLowering::lowerRowGroupWalk() {
  BRAZE_ASSERT(params_.inner && params_.splits == 1, "segment {}: a walk over row groups of an outer or split reduction",
               ctx_.segment.id);
  beginRowGroupWalk();
  std::vector<Stmt> declarations, passes;
  if (params_.staged) {
    declareStages(&declarations);
  } else if (params_.persistent) {
    keepRows(&declarations);
  }
  kb_.pushTarget(&passes);
  declareTotals();
  openRowGroupWalk(params_.grid);
  prefetchRows();  // the per-row inputs (a norm backward's mean and rstd)
  for (const Expr* e : facts_.reductions) reduce(*e);
  epilogue();
  kb_.close();
  finishTotals();
  kb_.popTarget();
  finishKernel(declarations, passes, {params_.grid, 1}, params_.toString());
}

void RowLowering::declareStages(std::vector<Stmt>* declarations) {
  const int64_t vec = params_.vectorize;
  // The row data comes from the stages; costly values computed from it (softmax's exp) are still kept
  // in registers across the passes.
  vb_.setLoadCache(LoadCache{declarations, kb_.ref(chunk_var_), params_.chunks, {}});
  // A stage holds each thread row's chunks in the row's order, a row every chunks x threads_x x vec
  // elements: a chunk lands where the pass over it reads it.
  stage_elements_ = params_.threads_y * params_.chunks * params_.threads_x * vec;
  for (const Val* val : stagedRowInputs(vec)) {
    const TensorId t = ctx_.inputs.at(val);
    const VarId array = kb_.sharedStorageArray("stage", ctx_.kernel.tensors[t].dtype, 2 * stage_elements_);
    kb_.pushTarget(declarations);
    kb_.declare(array);
    kb_.popTarget();
    stages_.emplace(t, array);
  }
  vb_.setLoadInterceptor([this](TensorId t, ExprId) { return stagedValue(t); });
}

void RowLowering::openRowGroupWalk(int64_t blocks_value) {
  // The row groups and the grid are launch arguments: another row count runs the same kernel.
  const ExprId blocks = kb_.extent("blocks", blocks_value);
  const ExprId groups = kb_.extent("row_groups", rowGroups(params_));
  // Staged: iteration i reads stage i % 2 and fills the other, i counted beside the loop (a division by
  // the blocks, a launch argument, would cost a row group some twenty instructions).
  const VarId iteration = params_.staged ? kb_.scalarVar("iteration", DataType::Int64, true) : -1;
  if (params_.staged) {
    copyRowGroup(kb_.blockIdx(0), kb_.index(0));
    kb_.let(iteration, kb_.index(0));
  }
  const VarId group = kb_.scalarVar("group", DataType::Int64, true);
  kb_.openFor(group, kb_.blockIdx(0), groups, blocks, false);
  if (params_.staged) {
    stage_ = kb_.letValue("stage", kb_.bitAnd(kb_.ref(iteration), kb_.index(1)));
    kb_.assign(iteration, kb_.add(kb_.ref(iteration), kb_.index(1)));
    copyRowGroup(kb_.letValue("next_group", kb_.add(kb_.ref(group), blocks)), kb_.sub(kb_.index(1), stage_));
    kb_.cpAsyncWait(1);  // this iteration's group, committed one group of copies earlier, has landed
  }
  row_ = kb_.letValue("row", kb_.add(kb_.mul(kb_.ref(group), kb_.index(params_.threads_y)), kb_.threadIdx(1)));
  kept_base_ = row_;
  row_ok_ = kb_.lt(row_, kb_.extent("rows", params_.problem.rows));
}

void RowLowering::copyRowGroup(ExprId group, ExprId stage) {
  const int64_t vec = params_.vectorize;
  const ExprId row = kb_.letValue("copy_row", kb_.add(kb_.mul(group, kb_.index(params_.threads_y)), kb_.threadIdx(1)));
  const ExprId row_ok = kb_.lt(row, kb_.extent("rows", params_.problem.rows));
  const ExprId saved_base = kept_base_;
  kept_base_ = row;
  const ExprId stage_base = threadStageStart(stage);
  const VarId chunk = kb_.scalarVar("cc", DataType::Int64, true);
  kb_.openFor(chunk, kb_.index(0), kb_.index(params_.chunks), kb_.index(1), /*unroll=*/true);
  const ExprId col = kb_.mul(kb_.add(kb_.mul(kb_.ref(chunk), kb_.index(params_.threads_x)), kb_.threadIdx(0)),
                             kb_.index(vec));
  // Only chunks some pass reads are copied: inside a row that exists (the passes skip the others).
  kb_.openIf(kb_.land(row_ok, kb_.lt(col, kb_.index(row_length_))));
  const std::vector<Idx> index = domainIndex(col, vec > 1);
  for (const auto& [tensor, array] : stages_) {
    const TensorParam& param = kb_.kernel().tensors[tensor];
    const int64_t bytes = sizeOf(param.dtype);
    const ChunkCopies copies = *chunkCopies(vec, bytes);
    int64_t coefficient = 0;
    const ExprId base = vb_.flatOffset(param.layout, index, &coefficient);
    BRAZE_ASSERT((vec == 1 || coefficient == 1) && kb_.divisibility(base) % copies.piece == 0,
                 "staged rows: {}'s chunk of {} elements is not one aligned run in memory", param.name, vec);
    for (int64_t i = 0; i < copies.count; ++i) {
      const int64_t first = i * copies.piece;
      kb_.cpAsync(array, kb_.add(stage_base, kb_.add(col, kb_.index(first))), tensor,
                  first == 0 ? base : kb_.add(base, kb_.index(first)), static_cast<int>(copies.piece),
                  kb_.index(copies.piece * bytes));
    }
  }
  kb_.close();
  kb_.close();
  kb_.cpAsyncCommit();  // one group per row group, empty where nothing was copied
  kept_base_ = saved_base;
}

std::optional<ExprId> RowLowering::stagedValue(TensorId tensor) {
  const auto it = stages_.find(tensor);
  if (it == stages_.end() || staged_col_ < 0) return std::nullopt;
  return vb_.sharedChunkValue(it->second, kb_.add(threadStageStart(stage_), staged_col_));
}

ExprId RowLowering::threadStageStart(ExprId stage) {
  return kb_.add(kb_.mul(stage, kb_.index(stage_elements_)),
                 kb_.mul(kb_.threadIdx(1), kb_.index(stage_elements_ / params_.threads_y)));
}

}  // namespace braze::scheduler
