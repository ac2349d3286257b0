// The cats of column values the inner-outer finish writes (entry.h's finishCats).
#include "scheduler/inner_outer/entry.h"

#include <algorithm>

namespace braze {

std::vector<RowCat> finishCats(const std::vector<const Expr*>& exprs, const std::vector<const Val*>& outputs,
                               const std::vector<const Val*>& inputs, const ValSet& after_outer,
                               const std::vector<int64_t>& widths, const BoundShapes& bound) {
  auto column_wide = [&](const Val* v) {
    return std::find(widths.begin(), widths.end(), bound.numel(v)) != widths.end();
  };
  auto piece = [&](const Val* v) {
    const bool input = std::find(inputs.begin(), inputs.end(), v) != inputs.end();
    return column_wide(v) && (after_outer.count(v) != 0 || input);
  };
  std::vector<const Val*> candidates;
  for (const Val* out : outputs) {
    if (after_outer.count(out) != 0 && !column_wide(out)) candidates.push_back(out);
  }
  std::vector<RowCat> cats = findRowCats(exprs, candidates, piece, bound, RowCatForms{.casts = true});
  std::erase_if(cats, [&](const RowCat& cat) {
    const int64_t width = bound.numel(cat.parts.front().row_value);
    const bool one_width = std::all_of(cat.parts.begin(), cat.parts.end(),
                                       [&](const RowCatPart& p) { return bound.numel(p.row_value) == width; });
    const bool computed = std::any_of(cat.parts.begin(), cat.parts.end(),
                                      [&](const RowCatPart& p) { return after_outer.count(p.row_value) != 0; });
    return !one_width || !computed;
  });
  return cats;
}

}  // namespace braze
