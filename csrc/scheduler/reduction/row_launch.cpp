#include "scheduler/reduction/row_launch.h"

#include "scheduler/inner_outer/entry.h"
#include "scheduler/lowering_context.h"

#include <string>
#include <utility>
#include <vector>

namespace braze::scheduler {
namespace {

struct LaunchValues {
  std::vector<std::pair<std::string, int64_t>> arguments;   // index arguments by name
  std::vector<std::pair<std::string, int64_t>> workspaces;  // elements by workspace name
};

template <typename Named>
const int64_t* valueNamed(const std::vector<std::pair<std::string, int64_t>>& values, const Named& name) {
  for (const auto& [n, v] : values) {
    if (n == name) return &v;
  }
  return nullptr;
}

// Gives `k` the values: every open index argument (not a scalar input's) and every workspace must have
// one, or the kernel has a launch value this relaunch does not know.
bool setValues(Kernel& k, const LaunchValues& values) {
  for (const ScalarArgument& a : k.arguments) {
    if (a.index && a.input == nullptr && valueNamed(values.arguments, a.name) == nullptr) return false;
  }
  for (const TensorParam& t : k.tensors) {
    if (t.workspace && valueNamed(values.workspaces, t.name) == nullptr) return false;
  }
  for (ScalarArgument& a : k.arguments) {
    if (a.index && a.input == nullptr) a.value = *valueNamed(values.arguments, a.name);
  }
  for (TensorParam& t : k.tensors) {
    if (t.workspace) t.layout = StridedLayout::rowMajor({*valueNamed(values.workspaces, t.name)});
  }
  return true;
}

// Both inner reductions without a grid split, of one row length: an outer reduction's code has the row
// count in it, a grid split's workspaces are per row.
bool sameRows(const ReductionParams& lowered_at, const ReductionParams& p) {
  return p.inner && lowered_at.inner && p.splits == 1 && lowered_at.splits == 1 && p.staged == lowered_at.staged &&
         p.problem.row_length == lowered_at.problem.row_length;
}

// `rows` scaled by to / from, where they are a whole number of `from`.
std::optional<int64_t> scaledRows(int64_t rows, int64_t from, int64_t to) {
  if (from <= 0 || rows % from != 0) return std::nullopt;
  return rows / from * to;
}

}  // namespace

std::optional<SegmentHeuristics> rowHeuristicsAtRows(const DeviceInfo& device, const SegmentHeuristics& chosen,
                                                     int64_t from, int64_t to) {
  // Parts beside the rows have sizes of their own, which the factor need not scale.
  if (!paramsOf<ReductionParams>(chosen).more_parts.empty()) return std::nullopt;
  ReductionProblem problem = paramsOf<ReductionParams>(chosen).problem;
  const std::optional<int64_t> rows = scaledRows(problem.rows, from, to);
  if (!problem.inner || !rows) return std::nullopt;
  problem.rows = *rows;
  return heuristicsOf(*chosen.lowering, reductionHeuristics(device, problem), chosen.fallback);
}

std::optional<SegmentHeuristics> innerOuterHeuristicsAtRows(const DeviceInfo& device, const SegmentHeuristics& chosen,
                                                            int64_t from, int64_t to) {
  // Parts beside the rows have sizes of their own, which the factor need not scale.
  if (!paramsOf<InnerOuterParams>(chosen).parts.empty()) return std::nullopt;
  InnerOuterProblem problem = paramsOf<InnerOuterParams>(chosen).problem;
  const std::optional<int64_t> rows = scaledRows(problem.rows.rows, from, to);
  // Grouped reductions: which row dims the factor scales (groups or rows per group) is not known here.
  // Extra reductions over rows of their own: whether the factor scales them is not known here either.
  const bool own_rows = std::any_of(problem.extras.begin(), problem.extras.end(),
                                    [](const ExtraOuterProblem& e) { return e.own_rows != 0; });
  if (!rows || problem.grouped.reductions > 0 || own_rows) return std::nullopt;
  problem.rows.rows = *rows;
  return heuristicsOf(*chosen.lowering, innerOuterHeuristics(device, problem), chosen.fallback);
}

int64_t rowGroups(const ReductionParams& params) { return ceilDiv(params.problem.rows, params.threads_y); }

bool relaunchRows(const SegmentHeuristics& lowered_at, const SegmentHeuristics& heuristics, std::span<Kernel> kernels) {
  const ReductionParams& p = paramsOf<ReductionParams>(heuristics);
  // A kernel of parts launches each part's blocks after the rows'.
  if (lowered_at.lowering != heuristics.lowering || kernels.size() != 1 || !p.more_parts.empty() ||
      !paramsOf<ReductionParams>(lowered_at).more_parts.empty() || !sameRows(paramsOf<ReductionParams>(lowered_at), p)) {
    return false;
  }
  // A staged kernel also takes its walk: the row groups and the blocks walking them; totals over the rows
  // a partial per block, and the count of blocks arrived.
  LaunchValues values{{{"rows", p.problem.rows}, {"row_groups", rowGroups(p)}, {"blocks", p.grid}}, {{"totals_arrived", 1}}};
  for (const TensorParam& t : kernels[0].tensors) {
    if (t.workspace && t.name.starts_with("row_totals")) values.workspaces.emplace_back(t.name, p.grid);
  }
  if (!setValues(kernels[0], values)) return false;
  kernels[0].grid = {p.grid, p.splits};
  return true;
}

bool relaunchInnerOuter(const SegmentHeuristics& lowered_at, const SegmentHeuristics& heuristics,
                        std::span<Kernel> kernels) {
  const InnerOuterParams& io = paramsOf<InnerOuterParams>(heuristics);
  // A kernel with parts beside its rows launches each part's blocks after the rows'.
  if (lowered_at.lowering != heuristics.lowering || kernels.size() != 2 || !io.parts.empty() ||
      !paramsOf<InnerOuterParams>(lowered_at).parts.empty()) {
    return false;
  }
  // A grouped walk's code has the groups' strides among the rows in it.
  if (io.problem.grouped.reductions > 0) return false;
  const InnerOuterParams& at = paramsOf<InnerOuterParams>(lowered_at);
  if (!sameRows(at.inner, io.inner) || at.extras.size() != io.extras.size()) return false;
  for (size_t x = 0; x < io.extras.size(); ++x) {
    if (at.extras[x].columns != io.extras[x].columns || at.extras[x].rows_in_flight != io.extras[x].rows_in_flight ||
        at.extras[x].own_rows != 0 || io.extras[x].own_rows != 0) {
      return false;
    }
  }
  LaunchValues values;
  values.arguments = {{"rows", io.inner.problem.rows},
                      {"row_groups", rowGroups(io.inner)},
                      {"blocks", io.blocks},
                      {"partial_rows", io.partial_rows}};
  // The outer reductions' partial sums (partial_rows x the row length each), then the extra ones'
  // (blocks x their columns), as the kernel names them.
  size_t workspaces = 0;
  for (const TensorParam& t : kernels[0].tensors) workspaces += t.workspace ? 1 : 0;
  if (workspaces < io.extras.size()) return false;
  const size_t outer = workspaces - io.extras.size();
  for (size_t o = 0; o < workspaces; ++o) {
    values.workspaces.emplace_back(innerOuterPartialsName(o), o < outer ? io.partial_rows * io.inner.problem.row_length
                                                                        : io.blocks * io.extras[o - outer].columns);
  }
  if (!setValues(kernels[0], values) || !setValues(kernels[1], values)) return false;
  kernels[0].grid = {io.blocks, 1};
  return true;
}

}  // namespace braze::scheduler
