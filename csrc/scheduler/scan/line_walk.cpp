#include "scheduler/scan/line_walk.h"

namespace braze::scheduler {

std::vector<int64_t> lineSizesOf(const std::vector<int64_t>& sizes, size_t dim) {
  std::vector<int64_t> line_sizes = sizes;
  if (!sizes.empty()) line_sizes.erase(line_sizes.begin() + static_cast<int64_t>(dim));
  return line_sizes;
}

LineWalk openLineWalk(Kernel& k, KernelBuilder& kb, ValueBuilder& vb, const ScanParams& params,
                      const std::vector<int64_t>& sizes, size_t dim) {
  LineWalk walk;
  walk.dim = dim;
  walk.has_dim = !sizes.empty();
  const std::vector<int64_t> line_sizes = lineSizesOf(sizes, dim);
  for (int64_t s : line_sizes) walk.lines *= s;
  k.grid = {params.grid, 1};
  k.block = {params.block, 1};
  k.summary = params.toString();
  walk.line = kb.letValue("line", kb.add(kb.mul(kb.blockIdx(0), kb.index(params.block)), kb.threadIdx(0)));
  kb.openIf(kb.lt(walk.line, kb.index(walk.lines)));
  walk.position = vb.unflatten(walk.line, false, line_sizes);
  return walk;
}

std::vector<Idx> lineIndex(const LineWalk& walk, ExprId at) {
  std::vector<Idx> index = walk.position;
  if (walk.has_dim) index.insert(index.begin() + static_cast<int64_t>(walk.dim), Idx{at, false});
  return index;
}

void walkSteps(KernelBuilder& kb, ValueBuilder& vb, int64_t extent, const std::function<void(Chunk&, ExprId)>& body) {
  const VarId step = kb.scalarVar("k", DataType::Int64, /*is_index=*/true);
  const VarId lane = kb.scalarVar("lane", DataType::Int64, /*is_index=*/true);
  kb.openFor(step, kb.index(0), kb.index(extent), kb.index(1), /*unroll=*/false);
  emitChunk(kb, vb, kb.boolean(true), 1, lane, [&](Chunk& c) { body(c, kb.ref(step)); });
  kb.close();
}

}  // namespace braze::scheduler
