// The inner-outer kernel's walk where it has grouped reductions (inner_outer/entry.h: sums over some of
// the row dims, a position embedding's grad summed over the batch): the blocks walk items, each a slice
// of one group's rows, instead of row groups in row order, so an item's rows all add into the same
// results. The item's sums are stored at its end as its partial row (group_slices x groups x row
// length); the finish adds the slices per column and writes what is computed from the results.
#include "scheduler/reduction/row_lowering.h"

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
    (summed ? summed_sizes : kept_sizes).insert((summed ? summed_sizes : kept_sizes).begin(), kept_sizes_[d]);
    (summed ? summed_strides : kept_strides).insert((summed ? summed_strides : kept_strides).begin(), stride);
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

void RowLowering::closeGroupedItem(const std::vector<ThreadPartials>& sums, const std::vector<VarId>& shared) {
  kb_.close();  // the item's rows
  // Slice s of group k is row s x groups + k of row-length rows: the finish reads slice s as a row of
  // groups x row length columns.
  const ExprId partial_row = kb_.add(kb_.mul(slice_, kb_.index(grouping_.groups)), group_);
  storeGroupItem(kb_, sums, shared, params_, row_length_, chunk_var_, partial_row);
  kb_.close();  // the items
}

}  // namespace braze::scheduler
