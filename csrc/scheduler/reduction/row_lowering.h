// The reduction and inner-persistent lowerings: one loop structure over (row, reduced element).
// Inner: threads in x walk a row in vector chunks, a block holds threads_y rows; every reduction is a
// pass over the row followed by a block reduction across x; with `persistent`, loads are kept in
// registers (arrays indexed by the unrolled chunk), or in shared memory for larger rows, so only the
// first pass reads memory; `staged`, blocks walk row groups and copy each into shared memory by
// cp.async while the passes run on the one before. Outer: threads in x own (vectors of) kept elements, threads in y split the
// reduced ones, a block reduction across y combines. Statistics (var, var_mean, welford) take two
// passes: the mean, then squared deviations.
// Grid reduction (few rows): blocks in grid y each reduce a split of every row and write a partial;
// the last block of a row to arrive (an atomic counter) combines the partials and writes the results.
// The class is shared by lower.cpp (the kernel's structure, the element walk and the epilogue),
// row_passes.cpp (the passes that reduce a row, and the grid reduction) and row_staging.cpp (the walk
// over row groups and the staged rows).
#pragma once

#include "scheduler/inner_outer/entry.h"
#include "scheduler/inner_outer/heuristics.h"
#include "scheduler/reduction/domain_alignment.h"
#include "scheduler/reduction/reduce_values.h"
#include "scheduler/reduction/reduction_domain.h"
#include "scheduler/reduction/row_cats.h"
#include "scheduler/reduction/row_slices.h"

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace braze::scheduler {

// A row value as the lowering holds it: a scalar variable, or (outer reductions vectorized over the
// kept dims) a local array with one value per lane.
struct RowVar {
  VarId var = -1;
  int64_t lanes = 1;  // 1: a scalar
};

class RowLowering {
 public:
  // `inner_outer`: the segment also reduces over the rows (the inner-outer persistent scheduler): those
  // reductions are kept apart (outer_), their results and what is computed from them left to the finish.
  explicit RowLowering(LoweringContext& ctx, bool inner_outer = false);

  void lower(const ReductionParams& params);

  // Inner-outer: every block walks row groups blockIdx.x, + blocks, ... as the inner persistent
  // kernel walks its one row group, and each thread also sums, per outer reduction, the values of its
  // row elements (the same columns in every row) over the rows it walks. After the walk the sums go to a
  // shared workspace of partial_rows x row_length partials (a row per block, its thread rows added in
  // shared memory, or a row per thread row: inner_outer/partials.cpp), which the follow-up kernel
  // (inner_outer/finish) sums per column into the outer results.
  void lowerInnerOuter(const InnerOuterParams& io);

  InnerOuterParams chooseInnerOuter();

  ReductionParams choose(bool persistent_wanted) {
    return reductionHeuristics(ctx_.device, rowProblem(persistent_wanted));
  }

  ReductionProblem rowProblem(bool persistent_wanted);

 private:
  // The start of a kernel whose blocks walk row groups (inner-outer, staged): its block, the lane and
  // chunk variables, a row of threads along x per row.
  void beginRowGroupWalk();
  // The kernel's statements (the declarations, then the passes), grid, vector width (the parameters')
  // and summary.
  void finishKernel(std::vector<Stmt>& declarations, std::vector<Stmt>& passes, std::array<int64_t, 2> grid,
                    std::string summary);

  // The vector factors of the inputs the lanes walk (inner: along the row; outer: along the kept
  // elements), as the load probe sees them in the reductions' operands: an input read once per lane
  // group (a [rows, 1] mean or rstd in an inner reduction) is a scalar load before the lanes, and its
  // own layout (an odd row count) does not limit the vector. Inputs no probe sees count; a tensor seen
  // in no probe at all (every reduction fed by another) leaves every input counting.
  std::vector<int64_t> walkedInputFactors(int64_t* widest_bytes) const;

  // Whether blocks may reduce parts of a row: plain reductions only (statistics need the whole row's
  // mean first), none fed by another's result, and every output a per-row value or an element that
  // needs no reduction result.
  bool splittable() const;

  // A tensor with an element per element of the domain (x, not a weight broadcast over the rows): what
  // a persistent kernel keeps in registers. Others are small and stay in L1/L2.
  bool isRowData(const Val* val) const;
  // A tensor of an extra reduction's shape (another tensor's rows, walked apart from the domain's).
  bool isExtraShaped(const Val* val) const;
  // A tensor from which an inner reduction's kernel computes only per-row values (a cross entropy's
  // targets, picked with take_along_axis and compared with the ignored index): read once a row, never
  // walking it, so its dtype and alignment do not narrow the row's vectors. False where outer reductions
  // join (their finish walks columns).
  bool readPerRowOnly(const Val* val) const;

  // The input index of the reduction domain for this thread's kept element(s) and a reduced element.
  std::vector<Idx> domainIndex(ExprId reduced_base, bool reduced_lane);

  // The row-major linear index of the domain element: how full-size outputs are indexed.
  ExprId domainLinear(const std::vector<Idx>& index);

  // An outer reduction takes its reduced element count (the rows it sums: a batch times a sequence) and
  // each split's share of them at launch, so another batch size runs the same kernel. An inner one's
  // count is the row length, which its chunks and unrolling are built on: a constant.
  ExprId reducedCount() { return params_.inner ? kb_.index(row_length_) : kb_.extent("row_length", row_length_); }
  ExprId splitLength() {
    return params_.inner ? kb_.index(params_.split_length) : kb_.extent("split_length", params_.split_length);
  }

  // Runs `body(index)` for every reduced element this thread handles (of its split), in chunks of lanes.
  void forEachElement(const std::function<void(Chunk&, const std::vector<Idx>&)>& body);

  // A persistent kernel's loads of row data are kept (registers, or shared memory) in arrays declared
  // in `declarations`, for the passes after the first.
  void keepRows(std::vector<Stmt>* declarations);

  // A row kept in registers is read from memory once, and all of it at once: a pass of loads alone
  // precedes the first reduction. Left to the reduction's pass, each chunk's loads sit in a guarded block
  // with that chunk's arithmetic, which the compiler keeps in order: a round trip to memory per chunk
  // instead of one per row. An input with a value per row (a norm backward's mean and rstd) is loaded
  // once per row there too, instead of in every chunk of every pass. Only inputs that the passes read at
  // the domain's own index are taken (readAtDomainIndex), so the passes find each of them loaded.
  void prefetchRows();
  // The inputs the passes read at the domain's own index (readAtDomainIndex) that are row data of the
  // domain's shape (what is kept or staged), or (`per_row`) that have a value per row.
  std::vector<const Val*> keptRowInputs(bool per_row) const;

  // The kernel whose blocks walk row groups blockIdx.x, + grid, ... (row_staging.cpp), running the passes of
  // the inner kernel on each: staged (ReductionParams::staged), reading the row data from a shared-memory
  // stage that the previous iteration's copies filled; or with totals over the rows (as many blocks as
  // the SMs hold, whose partials the last block combines), keeping the rows as the inner kernel does.
  void lowerRowGroupWalk();
  // The stages' shared arrays (row_data's inputs that cp.async copies whole), in `declarations`, and the
  // reads of the passes from them.
  void declareStages(std::vector<Stmt>* declarations);
  // Opens the loop over row groups blockIdx.x, + blocks, ... (the inner-outer and staged kernels; the
  // caller closes it) and binds the row; a staged kernel's copies of the first group before it, and of
  // the next group, with the wait for the current one, in it.
  void openRowGroupWalk(int64_t blocks);
  // The kept row inputs whose every chunk of `vec` elements is whole aligned cp.asyncs (the others are
  // read from memory in each pass).
  std::vector<const Val*> stagedRowInputs(int64_t vec) const;
  // Issues this thread's cp.asyncs of row group `group`'s row data into stage `stage` (none where the
  // group is past the last), as one commit group.
  void copyRowGroup(ExprId group, ExprId stage);
  // A staged tensor's value in the current pass's chunk: its stage's element, or nullopt for any other.
  std::optional<ExprId> stagedValue(TensorId tensor);
  // Where this thread row's part of stage `stage` starts (every staged array alike): its row's column 0.
  ExprId threadStageStart(ExprId stage);

  // The outputs with an element per domain element that depend on no reduction (a GELU backward's
  // grad_in next to its bias grad): a kernel that streams the rows writes them in its first pass over
  // the elements, instead of reading the inputs again after the reductions. A persistent kernel keeps
  // its rows, so it writes every output in its last pass.
  std::vector<const Val*> prologueOutputs() const;
  bool isFullOutput(const Val* out) const {
    return bound_.numel(out) == domain_.full_numel && domain_.full_numel != rows_;
  }

  // Stores `outs` (each with an element per domain element) at the domain element `index`.
  void storeFullOutputs(Chunk& c, const std::vector<Idx>& index, const std::vector<const Val*>& outs);
  // Where `out` holds the domain element (or row) at `index` (domain dims, or kept dims for a per-row
  // output): `fallback` unless its dims are permuted.
  std::vector<Idx> permutedIndex(const Val* out, const std::vector<Idx>& index, bool per_row,
                                 std::vector<Idx> fallback);

  // Adds outer reduction `e`'s value at `index` (this thread's element of its current row) to the
  // thread's partial sum of that column in `sums`.
  void accumulateOuter(Chunk& c, const std::vector<Idx>& index, const Expr& e, VarId sums);

  // Grouped reductions (row_grouped_walk.cpp): opens the loop over items blockIdx.x, + blocks, ... and,
  // in it, the loop over the item's rows, threads_y at a time; binds the row and sets the item's sums to
  // the reductions' identity. closeGroupedItem closes the row loop, stores the item's sums (its partial
  // row of each of `sums`' workspaces), and closes the item loop.
  void openGroupedWalk(const InnerOuterParams& io);
  void closeGroupedItem(const std::vector<ThreadPartials>& sums, const std::vector<VarId>& shared);
  // Where every item is a whole group and the outputs computed from the grouped results read nothing
  // else: the outputs of those results' width, written by the item itself (the finish then has none of
  // them). Empty where the finish computes them from the items' partial rows.
  std::vector<const Val*> groupedOutputsWrittenByItems(const InnerOuterParams& io) const;
  // At an item's end: its thread rows' sums (`sums`, one per grouped reduction) added up (in `shared` where
  // the block has several), and the outputs computed from them stored at the group's columns.
  void writeGroupedOutputs(const std::vector<const Val*>& outputs, const std::vector<ThreadPartials>& sums,
                           const std::vector<VarId>& shared);
  // The row (its linear index over the row dims) of row `j` of group `group`.
  ExprId groupedRow(ExprId group, ExprId j);

  // The row value as an expression: the scalar, or the array's element for the current lane.
  ExprId rowValue(const RowVar& v) {
    return v.lanes == 1 ? kb_.ref(v.var) : kb_.localRead(v.var, kb_.ref(lane_));
  }
  ExprId laneValue(const RowVar& v, int64_t l) {
    return v.lanes == 1 ? kb_.ref(v.var) : kb_.localRead(v.var, kb_.index(l));
  }
  // Binds a per-row value once (scalars), or leaves a lane's expression to be evaluated where used.
  ExprId rowLet(const char* prefix, ExprId value) { return lanes_ == 1 ? kb_.letValue(prefix, value) : value; }

  RowVar newRowVar(DataType dtype, ExprId init);

  // Combines the lanes' values across the threads of the reduce axis (one block reduction per lane).
  void blockReduce(const RowVar& v, DataType dtype, ReduceOp op);

  using ValueAt = std::function<ExprId(const std::vector<Idx>&)>;
  // acc = combine over this thread's elements of value(index), then across the threads of a row.
  RowVar accumulate(DataType acc_type, ReduceOp op, const ValueAt& value) {
    return accumulateAll(acc_type, op, {value}).front();
  }
  // The same for several values in one pass over the elements, each into its own accumulator.
  std::vector<RowVar> accumulateAll(DataType acc_type, ReduceOp op, const std::vector<ValueAt>& values);

  // A plain reduction's accumulation: its output dtype, and the value accumulated at an index.
  struct Plain {
    DataType out, acc;
    ReduceOp op;
  };
  Plain plainOf(const Expr& e) const {
    const DataType out = e.output(0)->dtype();
    return {out, accumulatorType(out), reduceOpOf(e.kind())};
  }
  RowVar accumulatePlain(const Expr& e);

  void reduce(const Expr& e);

  TensorId addWorkspace(const std::string& name, DataType dtype, int64_t numel, bool zeroed) {
    return kb_.addTensor(workspaceParam(name, dtype, numel, zeroed));
  }

  // Every block reduces its split of each row to a partial per reduction; the last block of a row
  // group to arrive (counted by an atomic per blockIdx.x) combines all splits' partials, resets the
  // counter for the next launch, and writes the per-row outputs.
  void gridReduce();

  void epilogue();
  // Totals over the rows (row_totals.h, row_total_passes.cpp): each thread's sum of its rows' values
  // (declared before the rows are walked), a row's value added where its per-row results are written,
  // and after the walk the block's partial of each total, then the last block's combine of them and its
  // stores of what is computed from the totals.
  void declareTotals();
  void accumulateTotals(Chunk& c);
  void finishTotals();
  bool isRowCat(const Val* out) const {
    return std::any_of(cats_.begin(), cats_.end(), [&](const RowCat& cat) { return cat.output == out; });
  }

  LoweringContext& ctx_;
  const BoundShapes& bound_;
  KernelBuilder kb_;
  ValueBuilder vb_;
  CandidateFacts facts_;
  std::vector<const Expr*> outer_;              // inner-outer: the reductions over the rows
  std::vector<const Expr*> extra_;              // and over the same rows of other tensors
  std::vector<const Expr*> grouped_;            // and over some of the row dims (inner_outer/entry.h)
  RowGrouping grouping_;                        // the grouped reductions' (one for all)
  std::vector<VarId> grouped_acc_;              // per grouped reduction: this thread's sums of the item
  ExprId group_ = -1, slice_ = -1;              // the current item's group and slice
  ValSet after_outer_;  // their results and what is computed from them
  std::vector<RowCat> cats_;                    // outputs that concatenate per-row results (row_cats.h)
  std::vector<RowSlice> slices_;                // outputs that keep some rows of a value (row_slices.h)
  PermutedOutputs permuted_;                    // outputs stored at a permuted index (domain_alignment.h)
  std::vector<const Expr*> totals_;             // inner persistent: the totals over the rows (row_totals.h)
  ValSet after_totals_;                         // their results and what is computed from them
  std::vector<VarId> total_acc_;                // per total: this thread's sum of its rows' values
  std::vector<VarId> outer_acc_;                // per outer reduction: this thread's partial sums
  bool prologue_written_ = false;               // a pass over the elements has stored prologueOutputs()
  ReductionDomain domain_;
  std::vector<int64_t> kept_sizes_, reduced_sizes_;
  int64_t rows_ = 0, row_length_ = 0;
  ReductionParams params_;
  int64_t lanes_ = 1;  // kept elements per thread: the vectorize of an outer reduction, else 1
  VarId lane_ = -1, chunk_var_ = -1;
  ExprId row_ = -1, row_ok_ = -1, kept_base_ = -1, member_ = -1, split_ = -1;
  // Staged: the shared array of each staged tensor (both stages), the elements of one stage of it, the
  // current iteration's stage, and the pass's chunk column (-1 outside forEachElement).
  std::map<TensorId, VarId> stages_;
  int64_t stage_elements_ = 0;
  ExprId stage_ = -1, staged_col_ = -1;
};

}  // namespace braze::scheduler
