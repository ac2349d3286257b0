// The transpose lowering: shared-memory tiles, so that an input read across the output's inner dim
// (a permute that moves the innermost dim, or an input whose stride-1 dim is not its last) is read
// coalesced, and the outputs are still stored coalesced and vectorized.
//
// Each output group (the outputs of one shape) iterates over its own index space, cut into tiles of
// tile_a x tile_b points over dims a and b (b: the output's inner dim; a: the dim the transposed
// loads are contiguous along), one block per tile and value of the other dims. A block works in two
// phases around one barrier:
//   1. threads consecutive along a load every staged access at each point of the tile into the
//      access's shared tile: consecutive threads read consecutive addresses;
//   2. threads consecutive along b compute the outputs at each point, reading the staged accesses
//      from the shared tiles and loading everything else as a pointwise kernel would, and store.
// Both phases index the point through the same variables (assigned differently by each), so the
// ValueBuilder builds the very same offset expression for a load in both: phase 1 loads the offsets
// the probe recorded, and phase 2 replaces a load by a shared read exactly when its (tensor, offset)
// is one of them. Correctness does not depend on the strides the probe measured (a reshape or pad
// makes them local); they only decide which loads are worth staging.
//
// A group made by one cat of costly inputs (cat_pieces.h: GQA's backward) is built by the cat's inputs:
// each point stages and computes only the input it falls in, and the inputs share the shared tiles.
//
// Outputs always store along their own inner dim: an output transposed with respect to another
// (y = x.T beside z = x + 1) has another shape, hence its own group and tiling. The price is that an
// input feeding both groups is read once per group. Independent parts that stage nothing run beside the
// tiles as pointwise parts, in blocks of their own (splitTranspose).
#include "support/error.h"
#include "scheduler/cat_pieces.h"
#include "scheduler/independent_parts.h"
#include "scheduler/load_probe.h"
#include "scheduler/pointwise/entry.h"
#include "scheduler/transpose/entry.h"
#include "scheduler/transpose/heuristics.h"
#include "ir/strided_layout.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

namespace braze::scheduler {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The last dim of size > 1 (-1 when none): the output's inner dim.
int64_t lastNonTrivialDim(const std::vector<int64_t>& sizes, int64_t before) {
  for (int64_t d = before - 1; d >= 0; --d) {
    if (sizes[d] > 1) return d;
  }
  return -1;
}

// Read across b: moving along the output's inner dim jumps in memory (neither the next element nor
// the same one), so consecutive threads along b would read scattered addresses.
bool acrossB(const ProbedLoad& load, int64_t b) {
  return load.strides.has_value() && (*load.strides)[b] != 0 && (*load.strides)[b] != 1;
}

// The loads a tile over (a, b) can fix, best first: across b and contiguous along a. Wider elements
// first, since they move the most bytes per point; otherwise in the order the outputs read them.
std::vector<ProbedLoad> stageable(const Kernel& k, const std::vector<ProbedLoad>& loads, int64_t a, int64_t b) {
  std::vector<ProbedLoad> found;
  if (a < 0) return found;
  for (const ProbedLoad& load : loads) {
    if (acrossB(load, b) && (*load.strides)[a] == 1) found.push_back(load);
  }
  std::stable_sort(found.begin(), found.end(), [&](const ProbedLoad& x, const ProbedLoad& y) {
    return sizeOf(k.tensors[x.tensor].dtype) > sizeOf(k.tensors[y.tensor].dtype);
  });
  return found;
}

// One output group as the probe sees it: its tile dims and what could be staged (or why nothing).
struct GroupChoice {
  int64_t dim_a = -1, dim_b = -1;
  std::vector<int64_t> candidate_bytes;  // shared bytes per element of each stageable load, best first
  std::vector<int64_t> stored_bytes;     // the same, held as stored
  std::string why_not;
};

GroupChoice chooseDims(const Kernel& k, const std::vector<ProbedLoad>& loads, const std::vector<int64_t>& sizes) {
  GroupChoice c;
  const int64_t rank = static_cast<int64_t>(sizes.size());
  c.dim_b = lastNonTrivialDim(sizes, rank);
  if (c.dim_b < 0) {
    c.why_not = "the output has at most one element";
    return c;
  }
  // a: the dim along which the loads read across b are contiguous, weighted by their bytes.
  std::map<int64_t, int64_t> weight;
  for (const ProbedLoad& load : loads) {
    const TensorParam& t = k.tensors[load.tensor];
    if (!load.strides) {
      if (c.why_not.empty()) c.why_not = fmt::format("{} is read through a gather (its offset is loaded data)", t.name);
      continue;
    }
    if (!acrossB(load, c.dim_b)) continue;
    bool contiguous = false;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != c.dim_b && sizes[d] > 1 && (*load.strides)[d] == 1) {
        weight[d] += sizeOf(t.dtype);
        contiguous = true;
      }
    }
    if (!contiguous) {
      c.why_not = fmt::format("{} is read with stride {} along the output's inner dim {} and stride 1 along no other",
                              t.name, (*load.strides)[c.dim_b], c.dim_b);
    }
  }
  int64_t best = 0;
  for (const auto& [d, w] : weight) {
    if (w > best) {
      best = w;
      c.dim_a = d;
    }
  }
  for (const ProbedLoad& load : stageable(k, loads, c.dim_a, c.dim_b)) {
    c.candidate_bytes.push_back(sizeOf(computeTypeOf(k.tensors[load.tensor].dtype)));
    c.stored_bytes.push_back(keptValueBytes(k.tensors[load.tensor].dtype));
  }
  if (c.candidate_bytes.empty()) {
    if (c.why_not.empty()) c.why_not = "no input is read across the output's inner dim";
    // Tiled without staging (another group of the kernel is transposed): rows along the next dim.
    c.dim_a = lastNonTrivialDim(sizes, c.dim_b);
  }
  return c;
}

// The loads that computing the group's outputs at `point` makes, per input of the cat that splits the
// group (cat_pieces.h: each element computes the input it falls in), or one list when none does.
std::vector<std::vector<ProbedLoad>> probePieces(KernelBuilder& kb, ValueBuilder& vb, const SymbolicPoint& point,
                                                 const std::vector<const Val*>& outputs, const Expr* cat,
                                                 const BoundShapes& bound) {
  if (cat == nullptr) return {probeLoads(kb, vb, point, outputs)};
  std::vector<std::vector<ProbedLoad>> pieces(cat->inputs().size());
  for (size_t input = 0; input < cat->inputs().size(); ++input) {
    if (bound.sizesOf(cat->input(input))[cat->attrs().getInt("dim")] == 0) continue;  // no element falls in it
    vb.choosePiece(cat, input);
    pieces[input] = probeLoads(kb, vb, point, outputs);
  }
  vb.clearPiece();
  return pieces;
}

// The symbolic point of a group's index space: a var per dim of size > 1.
SymbolicPoint pointOf(KernelBuilder& kb, const std::vector<int64_t>& sizes, int64_t b, int64_t width, VarId lane) {
  SymbolicPoint point{sizes, std::vector<VarId>(sizes.size(), -1), b, width, lane};
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1) point.vars[d] = kb.scalarVar("p", DataType::Int64, true);
  }
  return point;
}

class TileLowering {
 public:
  TileLowering(LoweringContext& ctx, KernelBuilder& kb, ValueBuilder& vb, const TransposeParams& params)
      : ctx_(ctx), kb_(kb), vb_(vb), vec_(params.vectorize), threads_(params.threads) {
    lane_ = kb_.scalarVar("lane", DataType::Int64, true);
  }

  // Lowers one group in blocks [first_block, first_block + p.blocks); returns the loads it staged.
  int64_t group(const OutputGroup& g, const TransposeGroupParams& p, int64_t first_block, bool guarded) {
    sizes_ = g.sizes;
    a_ = p.dim_a;
    b_ = p.dim_b;
    tile_a_ = p.tile_a;
    chunks_ = p.tile_b / vec_;
    rotate_ = std::max<int64_t>(1, ctx_.device.warp_size / chunks_);
    const int64_t tiles_b = ceilDiv(sizes_[b_], p.tile_b);
    const int64_t tiles_a = a_ >= 0 ? ceilDiv(sizes_[a_], tile_a_) : 1;
    const ExprId block = kb_.blockIdx(0);
    if (guarded) {
      kb_.openIf(kb_.land(kb_.le(kb_.index(first_block), block), kb_.lt(block, kb_.index(first_block + p.blocks))));
    }
    // Blocks walk b fastest, then a, then the other dims (row-major): neighbouring blocks share rows.
    const ExprId local = kb_.sub(block, kb_.index(first_block));
    qb0_ = kb_.letValue("qb0", kb_.mul(kb_.mod(local, kb_.index(tiles_b)), kb_.index(chunks_)));
    pa0_ = a_ >= 0 ? kb_.letValue("pa0", kb_.mul(kb_.mod(kb_.div(local, kb_.index(tiles_b)), kb_.index(tiles_a)),
                                                 kb_.index(tile_a_)))
                   : kb_.index(0);
    const ExprId batch = kb_.div(local, kb_.index(tiles_a * tiles_b));
    point_ = SymbolicPoint{sizes_, std::vector<VarId>(sizes_.size(), -1), b_, vec_, lane_};
    int64_t stride = 1;
    for (int64_t d = static_cast<int64_t>(sizes_.size()) - 1; d >= 0; --d) {
      if (sizes_[d] <= 1 || d == a_ || d == b_) continue;
      point_.vars[d] = kb_.scalarVar(fmt::format("p{}", d), DataType::Int64, true);
      kb_.let(point_.vars[d], kb_.mod(kb_.div(batch, kb_.index(stride)), kb_.index(sizes_[d])));
      stride *= sizes_[d];
    }
    // The tile's two coordinates: declared here, assigned by each phase.
    if (a_ >= 0) {
      point_.vars[a_] = kb_.scalarVar("pa", DataType::Int64, true);
      kb_.let(point_.vars[a_], kb_.index(0));
    }
    point_.vars[b_] = kb_.scalarVar("qb", DataType::Int64, true);
    kb_.let(point_.vars[b_], kb_.index(0));

    // Split by a cat's inputs: each element stages and computes the input it falls in, its tiles shared
    // with the other inputs' (a point falls in one input, so no slot is written twice).
    cat_ = splittingCat(ctx_.segment.exprs, g.outputs, ctx_.bound);
    conditions_.reset();
    if (cat_ != nullptr) conditions_ = vb_.pieceConditions(*cat_, g.outputs[0], point_.index(kb_));
    if (!conditions_) cat_ = nullptr;
    const std::vector<std::vector<ProbedLoad>> pieces = probePieces(kb_, vb_, point_, g.outputs, cat_, ctx_.bound);
    staged_.clear();
    std::map<DataType, std::vector<VarId>> tiles;
    int64_t most = 0;
    for (size_t piece = 0; piece < pieces.size(); ++piece) {
      std::vector<ProbedLoad> chosen = stageable(kb_.kernel(), pieces[piece], a_, b_);
      chosen.resize(std::min<size_t>(chosen.size(), static_cast<size_t>(p.staged)));
      most = std::max(most, static_cast<int64_t>(chosen.size()));
      std::map<DataType, size_t> used;
      for (const ProbedLoad& load : chosen) {
        const DataType dtype = kb_.kernel().tensors[load.tensor].dtype;
        std::vector<VarId>& pool = tiles[dtype];
        const size_t j = used[dtype]++;
        if (j == pool.size()) {
          const int64_t points = tile_a_ * p.tile_b;
          const bool as_stored = p.tiles_as_stored && keptValueBytes(dtype) < sizeOf(computeTypeOf(dtype));
          pool.push_back(as_stored ? kb_.sharedStorageArray("tile", dtype, points)
                                   : kb_.arrayVar("tile", dtype, points, VarKind::SharedArray));
          kb_.declare(pool.back());
        }
        staged_.push_back({load.tensor, load.offset, pool[j], piece});
      }
    }
    if (!staged_.empty()) {
      loadTiles();
      kb_.barrier();
    }
    computeOutputs(g);
    if (guarded) kb_.close();
    return most;
  }

 private:
  struct Staged {
    TensorId tensor;
    ExprId offset;
    VarId tile;
    size_t piece;  // the cat input whose elements load it (0 when no cat splits the group)
  };

  // Where tile point (la, lb = c * vec + lane) lives in a shared tile: b-major rows of tile_a
  // elements, each rotated by c * rotate. Phase 1 (a warp along a, one lb) touches consecutive
  // elements; phase 2 (a warp spanning `chunks` values of c and `rotate` rows of a) reaches 32
  // different banks thanks to the rotation, where a plain b-major layout would have every thread of
  // a row in the same bank. Padding a row would only spread phase 2's vector lanes.
  ExprId slot(ExprId la, ExprId c, ExprId lane) {
    const ExprId row = kb_.add(kb_.mul(c, kb_.index(vec_)), lane);
    const ExprId rotated = kb_.mod(kb_.add(la, kb_.mul(c, kb_.index(rotate_))), kb_.index(tile_a_));
    return kb_.add(kb_.mul(row, kb_.index(tile_a_)), rotated);
  }

  ExprId inside(ExprId la, ExprId c, int64_t passes, int64_t per_pass, int64_t extent, bool along_a) {
    ExprId in = kb_.lt(kb_.ref(point_.vars[b_]), kb_.index(sizes_[b_] / vec_));
    if (a_ >= 0) in = kb_.land(kb_.lt(kb_.ref(point_.vars[a_]), kb_.index(sizes_[a_])), in);
    // The last pass may reach past the tile when the passes do not divide it.
    if (passes * per_pass > extent) in = kb_.land(in, kb_.lt(along_a ? la : c, kb_.index(extent)));
    return in;
  }

  // Phase 1: consecutive threads take consecutive a (the staged loads' stride-1 dim); each thread
  // walks chunks of b, and the lanes of a chunk, loading every staged access into its tile.
  void loadTiles() {
    const int64_t rows = threads_ / tile_a_;  // chunks of b per pass
    const int64_t passes = ceilDiv(chunks_, rows);
    const ExprId tid = kb_.threadIdx(0);
    const ExprId la = kb_.letValue("la", kb_.mod(tid, kb_.index(tile_a_)));
    const ExprId first_chunk = kb_.letValue("lc", kb_.div(tid, kb_.index(tile_a_)));
    const VarId k = kb_.scalarVar("k", DataType::Int64, true);
    kb_.openFor(k, kb_.index(0), kb_.index(passes), kb_.index(1), /*unroll=*/true);
    const ExprId c = kb_.add(first_chunk, kb_.mul(kb_.ref(k), kb_.index(rows)));
    if (a_ >= 0) kb_.assign(point_.vars[a_], kb_.add(pa0_, la));
    kb_.assign(point_.vars[b_], kb_.add(qb0_, c));
    kb_.openIf(inside(la, c, passes, rows, chunks_, false));
    if (vec_ > 1) kb_.openFor(lane_, kb_.index(0), kb_.index(vec_), kb_.index(1), /*unroll=*/true);
    const ExprId lane = vec_ > 1 ? kb_.ref(lane_) : kb_.index(0);
    for (size_t first = 0; first < staged_.size();) {
      const size_t piece = staged_[first].piece;
      if (cat_ != nullptr) kb_.openIf((*conditions_)[piece]);
      for (; first < staged_.size() && staged_[first].piece == piece; ++first) {
        const Staged& s = staged_[first];
        kb_.localWrite(s.tile, slot(la, c, lane), kb_.load(s.tensor, s.offset));
      }
      if (cat_ != nullptr) kb_.close();
    }
    if (vec_ > 1) kb_.close();
    kb_.close();
    kb_.close();
  }

  // Phase 2: consecutive threads take consecutive chunks of b (the outputs' stride-1 dim); each
  // thread walks rows of a, computing and storing every output of the group at its chunk.
  void computeOutputs(const OutputGroup& g) {
    const int64_t rows = threads_ / chunks_;  // rows of a per pass
    const int64_t passes = ceilDiv(tile_a_, rows);
    const ExprId tid = kb_.threadIdx(0);
    const ExprId c = kb_.letValue("c", kb_.mod(tid, kb_.index(chunks_)));
    const ExprId first_row = kb_.letValue("r", kb_.div(tid, kb_.index(chunks_)));
    const VarId k = kb_.scalarVar("k", DataType::Int64, true);
    kb_.openFor(k, kb_.index(0), kb_.index(passes), kb_.index(1), /*unroll=*/true);
    const ExprId la = kb_.add(first_row, kb_.mul(kb_.ref(k), kb_.index(rows)));
    if (a_ >= 0) kb_.assign(point_.vars[a_], kb_.add(pa0_, la));
    kb_.assign(point_.vars[b_], kb_.add(qb0_, c));
    size_t piece = 0;  // the cat input being built
    vb_.setLoadInterceptor([&](TensorId tensor, ExprId offset) -> std::optional<ExprId> {
      for (const Staged& s : staged_) {
        if (s.tensor == tensor && s.offset == offset && s.piece == piece) {
          return kb_.localRead(s.tile, slot(la, c, vec_ > 1 ? kb_.ref(lane_) : kb_.index(0)));
        }
      }
      return std::nullopt;
    });
    emitChunk(kb_, vb_, inside(la, c, passes, rows, tile_a_, true), vec_, lane_, [&](Chunk& chunk) {
      const std::vector<Idx> index = point_.index(kb_);
      const auto store = [&](Chunk& sub, size_t input) {
        piece = input;
        for (const Val* out : g.outputs) storeOutput(kb_, vb_, sub, ctx_.outputs.at(out), index, vb_.valueAt(out, index));
      };
      if (cat_ == nullptr || !buildByPiece(kb_, vb_, chunk, *cat_, g.outputs[0], index, vec_, lane_, store)) {
        store(chunk, 0);
      }
    });
    vb_.setLoadInterceptor(nullptr);
    kb_.close();
  }

  LoweringContext& ctx_;
  KernelBuilder& kb_;
  ValueBuilder& vb_;
  const int64_t vec_;
  const int64_t threads_;
  VarId lane_ = -1;
  // The group being lowered.
  std::vector<int64_t> sizes_;
  int64_t a_ = -1, b_ = -1, tile_a_ = 1, chunks_ = 1, rotate_ = 1;
  ExprId qb0_ = -1, pa0_ = -1;  // the tile's first chunk of b and first index of a
  SymbolicPoint point_;
  std::vector<Staged> staged_;
  const Expr* cat_ = nullptr;  // the cat splitting the group, if any: then its inputs' conditions
  std::optional<std::vector<ExprId>> conditions_;
};

std::variant<TransposeParams, std::string> chooseTiles(LoweringContext& ctx) {
  const std::vector<OutputGroup> groups = groupOutputs(ctx);
  // Probe each group in a scratch kernel: choosing the tile needs the loads, and the real kernel
  // must stay untouched in case it falls back to the pointwise lowering.
  Kernel scratch;
  scratch.tensors = ctx.kernel.tensors;
  scratch.index64 = ctx.kernel.index64;
  KernelBuilder skb(scratch);
  ValueBuilder svb(skb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  TransposeProblem problem;
  VectorizeInput vin;
  vin.widest_dtype_bytes = 1;
  vin.inner_extent = 0;
  std::string why_not;
  bool any_candidate = false;
  for (const OutputGroup& g : groups) {
    const int64_t b = lastNonTrivialDim(g.sizes, static_cast<int64_t>(g.sizes.size()));
    // A tile needs a dim to walk; single-element outputs beside transposed ones are rare enough
    // for the pointwise kernel.
    if (g.numel == 1) return fmt::format("output {} has a single element", g.outputs[0]->name());
    // Split by a cat: the tile is chosen for the input that stages the most (each element stages the one
    // it falls in); the vector width, for every input's loads.
    std::vector<ProbedLoad> loads;
    GroupChoice choice;
    if (g.numel > 0 && b >= 0) {
      const Expr* cat = splittingCat(ctx.segment.exprs, g.outputs, ctx.bound);
      bool first = true;
      const SymbolicPoint point = pointOf(skb, g.sizes, b, 1, -1);
      for (std::vector<ProbedLoad>& piece : probePieces(skb, svb, point, g.outputs, cat, ctx.bound)) {
        GroupChoice piece_choice = chooseDims(scratch, piece, g.sizes);
        if (first || piece_choice.candidate_bytes.size() > choice.candidate_bytes.size()) choice = std::move(piece_choice);
        first = false;
        loads.insert(loads.end(), piece.begin(), piece.end());
      }
    } else {
      choice = chooseDims(scratch, loads, g.sizes);
    }
    if (why_not.empty()) why_not = choice.why_not;
    any_candidate = any_candidate || !choice.candidate_bytes.empty();
    problem.groups.push_back({g.sizes, choice.dim_a, choice.dim_b, choice.candidate_bytes, choice.stored_bytes});
    if (g.numel == 0 || b < 0) continue;
    // Phase 2 vectorizes along b: the outputs and the loads contiguous along b limit the width
    // (loads across b are per lane, or staged).
    vin.inner_extent = std::gcd(vin.inner_extent, g.sizes[b]);
    for (const Val* out : g.outputs) {
      vin.tensor_factors.push_back(vectorizeFactor(out->dtype(), ctx.kernel.tensors[ctx.outputs.at(out)].layout, 16));
      vin.widest_dtype_bytes = std::max(vin.widest_dtype_bytes, sizeOf(out->dtype()));
    }
    for (const ProbedLoad& load : loads) {
      if (!load.strides || (*load.strides)[b] != 1) continue;
      vin.tensor_factors.push_back(ctx.input_factors[load.tensor]);  // inputs are the first parameters
      vin.widest_dtype_bytes = std::max(vin.widest_dtype_bytes, sizeOf(scratch.tensors[load.tensor].dtype));
    }
  }
  if (!any_candidate) return why_not;
  problem.max_vectorize = kernelVectorize(vin);
  TransposeParams params = transposeHeuristics(ctx.device, problem);
  if (params.shared_bytes == 0) return std::string("no staged tile fits in shared memory");
  return params;
}

void lowerTiles(LoweringContext& ctx, const TransposeParams& chosen) {
  const std::vector<OutputGroup> groups = groupOutputs(ctx);
  TransposeParams params = chosen;  // the lowering records what it staged
  Kernel& k = ctx.kernel;
  KernelBuilder kb(k);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  TileLowering tiles(ctx, kb, vb, params);
  int64_t non_empty = 0;
  for (const TransposeGroupParams& p : params.groups) non_empty += p.blocks > 0 ? 1 : 0;
  int64_t first_block = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    TransposeGroupParams& p = params.groups[i];
    if (p.blocks == 0) continue;
    // What was staged: the probe at the kernel's vector width finds the same loads in practice.
    p.staged = tiles.group(groups[i], p, first_block, non_empty > 1);
    first_block += p.blocks;
  }
  params.shared_bytes = k.shared_bytes;
  k.grid = {params.grid, 1};
  k.block = {params.threads, 1};
  k.vectorize = params.vectorize;
  k.summary = params.toString();
}

// The segment's tiles and, beside them, the independent parts that stage nothing (a scaling of the queries
// beside the keys' transposing copy): those run as a pointwise kernel's parts in blocks of their own after
// the tiles, each with the vectors it has alone, where the tiles' vectors (one width for every group)
// would narrow them. No parts beside where every part stages, or where the segment writes an input in
// place (another part could read it).
struct TransposeSplit {
  SegmentToLower tiles;
  std::optional<SegmentToLower> beside;
};

TransposeSplit splitTranspose(const SegmentToLower& segment, const DeviceInfo& device) {
  if (!segment.output_views.empty()) return {segment, std::nullopt};
  const std::vector<SegmentToLower> parts = independentParts(segment);
  if (parts.size() == 1) return {segment, std::nullopt};
  std::vector<const SegmentToLower*> tiles, beside;
  for (const SegmentToLower& part : parts) {
    LoweringContext part_ctx = makeLoweringContext(part, device);
    (std::holds_alternative<TransposeParams>(chooseTiles(part_ctx)) ? tiles : beside).push_back(&part);
  }
  if (tiles.empty() || beside.empty()) return {segment, std::nullopt};
  return {partsTogether(segment, tiles), partsTogether(segment, beside)};
}

}  // namespace

std::variant<TransposeParams, std::string> chooseTranspose(LoweringContext& ctx) {
  const TransposeSplit split = splitTranspose(ctx.segment, ctx.device);
  if (!split.beside) return chooseTiles(ctx);
  LoweringContext tiles_ctx = makeLoweringContext(split.tiles, ctx.device);
  auto chosen = chooseTiles(tiles_ctx);
  if (auto* params = std::get_if<TransposeParams>(&chosen)) {
    LoweringContext beside_ctx = makeLoweringContext(*split.beside, ctx.device);
    params->beside = inBlocksOf(choosePointwise(beside_ctx), params->threads);
  }
  return chosen;
}

void lowerTranspose(LoweringContext& ctx, const TransposeParams& chosen) {
  if (!chosen.beside) {
    lowerTiles(ctx, chosen);
    return;
  }
  const TransposeSplit split = splitTranspose(ctx.segment, ctx.device);
  BRAZE_ASSERT(split.beside, "segment {}: heuristics for parts beside the tiles, none found", ctx.segment.id);
  TransposeParams tiles = chosen;
  tiles.beside.reset();
  lowerSideBySide(ctx, {split.tiles, *split.beside}, [&](LoweringContext& part_ctx, size_t i) {
    if (i == 0) {
      lowerTiles(part_ctx, tiles);
    } else {
      lowerPointwise(part_ctx, *chosen.beside);
    }
  });
  ctx.kernel.summary = chosen.toString();
}

}  // namespace braze::scheduler

namespace braze {

const SchedulerEntry& transposeScheduler() {
  static const SchedulerEntry entry{
      SchedulerKind::Transpose, "transpose", canScheduleTranspose, nullptr,
      [](scheduler::LoweringContext& ctx) {
        auto chosen = scheduler::chooseTranspose(ctx);
        if (const auto* params = std::get_if<TransposeParams>(&chosen)) return heuristicsOf(transposeScheduler(), *params);
        return heuristicsOf(pointwiseScheduler(), scheduler::choosePointwise(ctx),
                            fmt::format("transpose fell back to pointwise ({})", std::get<std::string>(chosen)));
      },
      [](scheduler::LoweringContext& ctx, const SegmentHeuristics& h) {
        scheduler::lowerTranspose(ctx, paramsOf<TransposeParams>(h));
      }};
  return entry;
}

}  // namespace braze
