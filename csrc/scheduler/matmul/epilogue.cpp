// The matmul's epilogue: each accumulator through linear's bias and the ops after the result, stored in
// every output of the segment, at the result's own index or where the output's index maps put it.
#include "scheduler/matmul/lowering.h"

#include "support/error.h"

#include <utility>

namespace braze::scheduler {

void MatmulLowering::epilogue(ExprId inside, ExprId r, ExprId c, int64_t width, const std::function<ExprId(ExprId lane)>& accumulated) {
  struct Store {
    const Val* out;
    std::vector<Idx> index;
  };
  std::vector<Idx> own = batch_index_;
  own.push_back({r, false});
  own.push_back({c, width > 1});
  std::vector<ExprId> result_index;
  for (const Idx& i : own) result_index.push_back(i.base);
  std::vector<Store> everywhere;
  std::vector<std::pair<Store, ExprId>> partly;
  for (const Val* out : ctx_.segment.outputs) {
    const std::vector<const Expr*>& chain = chains_.at(out);
    if (chain.empty()) {
      everywhere.push_back({out, own});
      continue;
    }
    BRAZE_ASSERT(width == 1, "matmul epilogue: output {} is reached through index maps; stores of {} need its own index",
                 out->name(), width);
    OutputPlace place = placeThrough(kb_, vb_, ctx_.bound, chain, result_index);
    if (place.inside < 0) {
      everywhere.push_back({out, std::move(place.index)});
    } else {
      partly.push_back({Store{out, std::move(place.index)}, place.inside});
    }
  }
  const VarId lane_var = width > 1 ? kb_.scalarVar("l", DataType::Int64, /*is_index=*/true) : -1;
  auto emit = [&](ExprId predicate, const std::vector<Store>& stores) {
    emitChunk(kb_, vb_, predicate, width, lane_var, [&](Chunk& chunk) {
      ExprId value = accumulated(width > 1 ? kb_.ref(lane_var) : -1);
      if (bias_ != nullptr) {
        const DataType sum = acc_type_ == DataType::Float ? DataType::Float : DataType::Int64;
        const std::vector<Idx> at = ctx_.bound.sizesOf(bias_).empty() ? std::vector<Idx>{} : std::vector<Idx>{{c, width > 1}};
        value = kb_.elementwise(OpKind::Add, sum, {kb_.cast(value, sum), kb_.cast(vb_.valueAt(bias_, at), sum)});
      }
      vb_.setResult(result_, vb_.bind("mm", kb_.cast(value, result_->dtype())));
      for (const Store& s : stores) storeOutput(kb_, vb_, chunk, ctx_.outputs.at(s.out), s.index, vb_.valueAt(s.out, s.index));
    });
  };
  if (!everywhere.empty()) emit(inside, everywhere);
  for (const auto& [store, kept] : partly) emit(kb_.land(inside, kept), {store});
}

bool MatmulLowering::outputsMapped() const {
  for (const Val* out : ctx_.segment.outputs) {
    if (!chains_.at(out).empty()) return true;
  }
  return false;
}

}  // namespace braze::scheduler
