// The inner-outer kernel's walk where it has grouped reductions (inner_outer/entry.h: sums over some of
// the row dims, a position embedding's grad summed over the batch): the blocks walk items, each a slice
// of one group's rows, instead of row groups in row order, so an item's rows all add into the same
// results. Where an item is a whole group, it writes the outputs computed from its sums itself;
// otherwise its sums are stored as its partial row (group_slices x groups x row length), and the finish
// adds the slices per column and writes what is computed from the results.
#include "scheduler/inner_outer/entry.h"
#include "scheduler/reduction/row_lowering.h"
#include "support/error.h"

#include <algorithm>
#include <functional>

namespace braze::scheduler {

void RowLowering::openGroupedWalk(const InnerOuterParams& io) {
  const int64_t thread_rows = params_.threads_y;
  const ExprId blocks = kb_.extent("blocks", io.blocks);
  const ExprId items = kb_.extent("group_items", io.groupItems());
  const VarId item = kb_.scalarVar("item", DataType::Int64, true);
  kb_.openFor(item, kb_.blockIdx(0), items, blocks, false);
  const ExprId slices = kb_.index(io.group_slices);
  group_ = kb_.letValue("group", kb_.div(kb_.ref(item), slices));
  slice_ = kb_.letValue("slice", kb_.mod(kb_.ref(item), slices));
  for (size_t g = 0; g < grouped_.size(); ++g) {
    const Plain p = plainOf(*grouped_[g]);
    for (int64_t i = 0; i < params_.chunks * params_.vectorize; ++i) {
      kb_.localWrite(grouped_acc_[g], kb_.index(i), identity(kb_, p.op, p.acc));
    }
  }
  // Every thread row takes the same trips (the row passes' block reductions need the whole block); a
  // row past the slice's end is out of bounds, as a row past the last is in the row-order walk.
  const ExprId first = kb_.letValue("slice_first", kb_.mul(slice_, kb_.index(io.slice_rows)));
  const ExprId end = kb_.letValue("slice_end", kb_.min(kb_.add(first, kb_.index(io.slice_rows)),
                                                      kb_.index(grouping_.group_rows)));
  const VarId rows_at = kb_.scalarVar("group_rows_at", DataType::Int64, true);
  kb_.openFor(rows_at, first, end, kb_.index(thread_rows), false);
  const ExprId j = kb_.letValue("group_row", kb_.add(kb_.ref(rows_at), kb_.threadIdx(1)));
  row_ = kb_.letValue("row", groupedRow(group_, j));
  kept_base_ = row_;
  row_ok_ = kb_.lt(j, end);
}

ExprId RowLowering::groupedRow(ExprId group, ExprId j) {
  // The row dims split into those the grouping keeps (the group's index) and those it sums (j), each
  // with its stride among all the row dims.
  std::vector<int64_t> kept_sizes, kept_strides, summed_sizes, summed_strides;
  int64_t stride = 1;
  for (size_t d = kept_sizes_.size(); d-- > 0;) {
    const bool summed = grouping_.summed[d];
    std::vector<int64_t>& sizes = summed ? summed_sizes : kept_sizes;
    std::vector<int64_t>& strides = summed ? summed_strides : kept_strides;
    sizes.insert(sizes.begin(), kept_sizes_[d]);
    strides.insert(strides.begin(), stride);
    stride *= std::max<int64_t>(kept_sizes_[d], 1);
  }
  ExprId row = kb_.index(0);
  const auto add_dims = [&](ExprId linear, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
    const std::vector<Idx> index = vb_.unflatten(linear, false, sizes);
    for (size_t d = 0; d < index.size(); ++d) row = kb_.add(row, kb_.mul(index[d].base, kb_.index(strides[d])));
  };
  add_dims(group, kept_sizes, kept_strides);
  add_dims(j, summed_sizes, summed_strides);
  return row;
}

std::vector<const Val*> RowLowering::groupedOutputsWrittenByItems(const InnerOuterParams& io) const {
  if (io.group_slices != 1) return {};
  const int64_t width = grouping_.groups * row_length_;
  for (const Expr* r : extra_) {
    if (bound_.numel(r->output(0)) == width) return {};  // the finish computes that width
  }
  // The finish writes cats of the results (with inputs of their width) whole.
  std::vector<int64_t> widths{row_length_, width};
  for (const Expr* r : extra_) widths.push_back(bound_.numel(r->output(0)));
  if (!finishCats(ctx_.segment.exprs, ctx_.segment.outputs, ctx_.segment.inputs, after_outer_, widths, bound_).empty()) {
    return {};
  }
  // The values computed from the grouped results, and those computed from any other outer result.
  std::vector<const Expr*> others = outer_;
  others.insert(others.end(), extra_.begin(), extra_.end());
  const ValSet from_grouped = computedFrom(grouped_, ctx_.segment.exprs);
  const ValSet from_others = computedFrom(others, ctx_.segment.exprs);
  std::vector<const Val*> outputs;
  for (const Expr* e : ctx_.segment.exprs) {
    for (const Val* v : e->outputs()) {
      if (from_grouped.count(v) != 0 && from_others.count(v) != 0) return {};  // the finish has both results
    }
  }
  for (const Val* out : ctx_.segment.outputs) {
    if (from_grouped.count(out) != 0) outputs.push_back(out);
  }
  return outputs;
}

void RowLowering::writeGroupedOutputs(const std::vector<const Val*>& outputs, const std::vector<ThreadPartials>& sums,
                                      const std::vector<VarId>& shared) {
  const int64_t vec = params_.vectorize;
  const int64_t thread_rows = params_.threads_y;
  const ExprId group_start = kb_.mul(group_, kb_.index(row_length_));
  // Column `col` of the group: each grouped result from `total(g)`, then the outputs computed from them.
  const auto write_column = [&](ExprId col, const std::function<ExprId(size_t)>& total) {
    emitChunk(kb_, vb_, kb_.lt(col, kb_.index(row_length_)), 1, lane_, [&](Chunk& c) {
      for (size_t g = 0; g < grouped_.size(); ++g) {
        vb_.setResult(grouped_[g]->output(0), kb_.cast(total(g), plainOf(*grouped_[g]).out));
      }
      for (const Val* out : outputs) {
        const std::vector<Idx> at = vb_.unflatten(kb_.add(group_start, col), false, bound_.sizesOf(out));
        storeOutput(kb_, vb_, c, ctx_.outputs.at(out), at, vb_.valueAt(out, at));
      }
    });
  };
  const auto own_column = [&](int64_t l) {  // lane l of the thread's chunk: where its sums are
    return kb_.add(kb_.mul(kb_.add(kb_.mul(kb_.ref(chunk_var_), kb_.index(params_.threads_x)), kb_.threadIdx(0)),
                           kb_.index(vec)),
                   kb_.index(l));
  };
  const auto own_sum = [&](size_t g, int64_t l) {
    return kb_.localRead(sums[g].sums, kb_.add(kb_.mul(kb_.ref(chunk_var_), kb_.index(vec)), kb_.index(l)));
  };
  if (thread_rows == 1) {  // the thread's sums are its columns' results
    kb_.openFor(chunk_var_, kb_.index(0), kb_.index(params_.chunks), kb_.index(1), true);
    for (int64_t l = 0; l < vec; ++l) write_column(own_column(l), [&](size_t g) { return own_sum(g, l); });
    kb_.close();
    return;
  }
  // Several thread rows: each one's sums into its row of the shared arrays; then every thread of the
  // block takes consecutive columns (coalesced stores) and adds up the thread rows' sums of each.
  BRAZE_ASSERT(shared.size() == grouped_.size(), "grouped items of {} thread rows have {} shared arrays for {} sums",
               thread_rows, shared.size(), grouped_.size());
  shareThreadRowSums(kb_, sums, shared, params_, row_length_, chunk_var_);
  const int64_t threads = params_.threads_x * thread_rows;
  const ExprId thread = kb_.add(kb_.mul(kb_.threadIdx(1), kb_.index(params_.threads_x)), kb_.threadIdx(0));
  kb_.openFor(chunk_var_, kb_.index(0), kb_.index(ceilDiv(row_length_, threads)), kb_.index(1), false);
  const ExprId col = kb_.letValue("group_col", kb_.add(kb_.mul(kb_.ref(chunk_var_), kb_.index(threads)), thread));
  write_column(col, [&](size_t g) {
    const Plain p = plainOf(*grouped_[g]);
    ExprId total = kb_.localRead(shared[g], col);
    for (int64_t r = 1; r < thread_rows; ++r) {
      total = kb_.elementwise(combineOf(p.op), p.acc,
                              {total, kb_.localRead(shared[g], kb_.add(kb_.index(r * row_length_), col))});
    }
    return total;
  });
  kb_.close();
  kb_.barrier();  // the next item's thread rows write the arrays again
}

void RowLowering::closeGroupedItem(const std::vector<ThreadPartials>& sums, const std::vector<VarId>& shared) {
  kb_.close();  // the item's rows
  // Slice s of group k is row s x groups + k of row-length rows: the finish reads slice s as a row of
  // groups x row length columns.
  const ExprId partial_row = kb_.add(kb_.mul(slice_, kb_.index(grouping_.groups)), group_);
  storeGroupItem(kb_, sums, shared, params_, row_length_, chunk_var_, partial_row);
  kb_.close();  // the items
}

}  // namespace braze::scheduler
