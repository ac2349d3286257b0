// The value of any tensor of a segment at a symbolic index, built as kernel IR by composing the index
// maps of the ops between it and the tensors the kernel reads (design: "a kernel iterates over an
// output's index space, and every tensor it reads is indexed by composing the index maps"). Slices,
// pads, cats, reshapes, broadcasts and gathers become index arithmetic; elementwise ops become
// expressions bound to local variables.
//
// Vectorization: code for a chunk of `width` consecutive elements along the innermost dim is built
// once, for a symbolic lane. An index component is `base + lane` while that stays exact; a load
// whose offset is then `base + lane` with `base` a multiple of width (and an aligned pointer) is one
// vector load before the lane loop; a load that does not depend on the lane is one scalar load
// before it; anything else is a scalar load per lane.
#pragma once

#include "kernel/kernel_ir.h"
#include "passes/bind_shapes.h"
#include "support/by_id.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace braze::scheduler {

// The lowerings build kernel IR: its names are the scheduler folder's vocabulary.
using namespace kernel;

// The extent vectorized lanes walk along: the last dim of size > 1 (1 when there is none).
int64_t innerExtent(const std::vector<int64_t>& sizes);

struct Idx {
  ExprId base = -1;
  bool lane = false;  // the index is base + lane
};

// A plain reduction (sum, prod, max, min, any, all) that combines at most this many elements into each
// result can be computed where its result is read, by any kernel's ValueBuilder: its elements unrolled,
// as torch.compile unrolls small reductions (the pointwise check says where that costs few loads). GQA's
// backward sums each KV head's gradient over its query heads (4 to 16 in the common models) and
// concatenates the sums with the query gradient: one pointwise kernel, where a reduction kernel would
// write the sums for another kernel to read.
constexpr int64_t kMaxElementsReducedPerElement = 16;
bool reducedPerElement(const Expr& reduction, const BoundShapes& bound);

// Bytes a row kept in shared memory holds per value of a tensor of `dtype`: a bf16 or f16 value as stored
// (two bytes; it was loaded so, and converts back exactly), any other in its compute type. A bf16 logits
// row of a 50k vocabulary then fits a block's shared memory (100 KB), where as floats it would not.
int64_t keptValueBytes(DataType dtype);

// Remembers loads across the passes of a persistent kernel (the row kept in registers): each load
// is stored in an array indexed by the chunk, filled by the first pass that needs it.
struct LoadCache {
  std::vector<Stmt>* declarations = nullptr;  // where the arrays are declared (before the passes)
  ExprId chunk = -1;                          // the chunk loop's index
  int64_t chunks = 0;
  std::unordered_set<TensorId> tensors;       // the tensors kept: those with an element per row element
  // In shared memory instead of registers (rows too large for the register file): one array for the
  // block, where a thread's slot s is element s * threads + thread, so a warp's accesses are contiguous
  // (no two threads in one bank but on one word). Every thread reads back only what it wrote: no barrier
  // is needed. Only loads are kept there, so a bf16 or f16 array of values as stored holds them exactly.
  bool shared = false;
  ExprId thread = -1;   // the thread's linear index in the block
  int64_t threads = 1;
};

// Called with every load's tensor and element offset (for a vectorized index, the lane's offset:
// base + lane * stride); a value it returns is used instead of the load. The transpose lowering uses
// it to record the loads of an output point and to read staged tensors from shared memory instead.
using LoadInterceptor = std::function<std::optional<ExprId>(TensorId tensor, ExprId offset)>;

// The scalar input whose launch argument a kernel reads for `scalar` (the input itself, or a cast of it
// by the definition or by an op), or nullptr where the scalar's value is a literal in the code.
const Val* launchArgumentSource(const Val* scalar);

class ValueBuilder {
 public:
  // `params`: the segment's inputs and the tensor parameters they are read from.
  ValueBuilder(KernelBuilder& kb, const BoundShapes& bound, const std::vector<const Expr*>& exprs,
               std::unordered_map<const Val*, TensorId> params);

  // Starts a chunk: lane-invariant statements go to `pre`, the others to `body` (the lane loop's
  // body; the same list as `pre` when width is 1). Forgets the values of the previous chunk.
  void beginChunk(std::vector<Stmt>* pre, std::vector<Stmt>* body, int64_t width, ExprId lane);
  // With a register cache, values of costly ops (exp, log, division...) are kept in it too, so a later
  // pass reads softmax's exp(x - max) instead of computing it again.
  void setLoadCache(const LoadCache& cache) { cache_ = cache; }
  // The last pass over the row: what it computes is read by no later pass, so none of it is kept.
  void setLastPass() { last_pass_ = true; }
  // Where values shared by every element of a pass (a row's 1 / sqrt(var + eps), a reciprocal) are
  // computed: once, before the pass's chunk loop, instead of in each chunk. Null: in each chunk.
  void setHoistTarget(std::vector<Stmt>* target) {
    hoist_ = target;
    hoisted_.clear();
  }
  void clearLoadCache() {
    cache_ = LoadCache{};
    cached_.clear();
    cache_places_.clear();
    computed_cache_.clear();
  }
  void setLoadInterceptor(LoadInterceptor interceptor) { interceptor_ = std::move(interceptor); }
  // The current lane's element of the chunk of shared array `shared` (held as stored) that starts at
  // element `from`, a multiple of the chunk's width: the chunk is read with vector reads of up to 16
  // bytes before the lane loop, once per chunk. What an interceptor returns for a staged tensor.
  ExprId sharedChunkValue(VarId shared, ExprId from);

  ExprId valueAt(const Val* val, const std::vector<Idx>& index);
  // Where a lowering knows that the elements it builds fall in input `input` of `cat` (scheduler/
  // cat_pieces.h): the cat is that input alone, its other inputs neither computed nor selected between.
  void choosePiece(const Expr* cat, size_t input) { piece_ = {cat, input}; }
  void clearPiece() { piece_ = {nullptr, 0}; }
  // Per input of `cat`, the condition that `out`'s element `index` falls in it (false for an empty one);
  // `out` is the cat's output or made from it by meta ops. Nullopt where a condition depends on the lane:
  // a chunk's lanes may then fall in different inputs.
  std::optional<std::vector<ExprId>> pieceConditions(const Expr& cat, const Val* out, const std::vector<Idx>& index);
  // A reduction computed by the kernel: its value (per row) wherever it is read.
  void setResult(const Val* val, ExprId value) {
    results_[val] = value;
    if (!laneDependent(value)) markInvariant(value);
  }
  // A value that changes with each element a thread walks (a cumsum's running sum), read wherever `val`
  // is until set again: never taken for one shared by the thread's elements.
  void setWalkedValue(const Val* val, ExprId value) { results_[val] = value; }

  // Index helpers for the lowering.
  std::vector<Idx> unflatten(ExprId linear_base, bool lane, const std::vector<int64_t>& sizes);
  ExprId materialize(const Idx& i);  // base + lane as one expression
  ExprId flatOffset(const StridedLayout& layout, const std::vector<Idx>& index, int64_t* lane_coefficient);
  bool laneDependent(ExprId e);
  // Binds value to a new local in the right list (pre or body).
  ExprId bind(const char* prefix, ExprId value);
  int64_t width() const { return width_; }
  ExprId lane() const { return lane_; }

 private:
  ExprId compute(const Expr& expr, const Val* out, const std::vector<Idx>& index);
  ExprId elementwiseOp(const Expr& expr, const Val* out, std::vector<ExprId> args);
  // x / s for an s that every element of the kernel shares: x times s's reciprocal.
  ExprId divideByInvariant(ExprId x, ExprId s);
  // The cache array for a costly value computed by a pass of a persistent kernel, if it is one.
  struct ComputedSlot {
    VarId array = -1;
    bool per_lane = false;
  };
  bool worthKeeping(const Val* val) const;
  // Whether e reads only constants, scalar arguments and values known to be invariant.
  bool invariantExpr(ExprId e);
  ExprId computedSlot(bool per_lane);
  ExprId loadAt(TensorId tensor, const std::vector<Idx>& index);
  // Whether loadAt reads the chunk at `base` (the lane's coefficient in the offset: `coefficient`) as
  // whole vectors.
  bool wholeVectors(const TensorParam& param, ExprId base, int64_t coefficient);
  // A chunk of `dtype` in accesses of at most 16 bytes: fn(first element, elements) for each.
  void forEachPiece(DataType dtype, const std::function<void(int64_t first, int piece)>& fn) const {
    const int64_t piece = std::max<int64_t>(std::min<int64_t>(width_, 16 / sizeOf(dtype)), 1);
    for (int64_t first = 0; first < width_; first += piece) fn(first, static_cast<int>(piece));
  }
  // The cache array for (tensor, key) holding `slots` values per thread; `fresh` when just declared.
  VarId cacheArray(TensorId tensor, ExprId key, int64_t slots, bool* fresh);
  ExprId cacheSlot(ExprId slot);
  std::vector<Idx> mapOperand(const Val* operand, const Val* out, const std::vector<Idx>& index);
  std::vector<Idx> mapMeta(const Expr& expr, const std::vector<Idx>& index);
  std::vector<Idx> mapReshape(const Expr& expr, const std::vector<Idx>& index);
  ExprId pad(const Expr& expr, const std::vector<Idx>& index);
  ExprId cat(const Expr& expr, const std::vector<Idx>& index);
  // A cat whose inputs each read one and the same kernel input through meta ops and unary ops only
  // (RoPE's rotate-half, cat(-x2, x1)): that input is loaded once, at the index of the cat input the
  // element falls in, and each cat input's unary ops are applied to the one value, instead of a load per
  // cat input. `branches`: each non-empty cat input, its index and where the element falls in it. None
  // where the inputs do not read one kernel input so (or loads are cached or intercepted).
  using CatPieces = std::vector<std::pair<const Val*, std::pair<std::vector<Idx>, ExprId>>>;
  std::optional<ExprId> catOfOneSource(const CatPieces& branches);
  // The kernel input `val` is read from through meta and unary ops alone, or null.
  const Val* soleSource(const Val* val) const;
  // The index into soleSource(val) of `val`'s element `index`.
  std::vector<Idx> sourceIndex(const Val* val, const std::vector<Idx>& index);
  // `val`'s element computed from `source`, its sole source's element at sourceIndex.
  ExprId fromSource(const Val* val, ExprId source);
  ExprId creation(const Expr& expr, const std::vector<Idx>& index);
  ExprId random(const Expr& expr, const std::vector<Idx>& index);
  ExprId indexing(const Expr& expr, const std::vector<Idx>& index);
  ExprId quantize(const Expr& expr, const std::vector<Idx>& index);
  // A reducedPerElement reduction's result at `index`: its elements combined in index order.
  ExprId reductionPerElement(const Expr& expr, const Val* out, const std::vector<Idx>& index);
  ExprId scalar(const Val* val);
  // The value of a CPU scalar input (ir/fusion.h cpuScalarInputOf): a launch argument each run fills.
  ExprId cpuScalar(const TensorView* input);
  // `i - offset` limited to [0, size) (0 outside) and whether it was inside: pads and cats read
  // only in-bounds addresses and then select.
  std::pair<Idx, ExprId> shifted(const Idx& i, int64_t offset, int64_t size);

  KernelBuilder& kb_;
  const BoundShapes& bound_;
  std::unordered_map<const Val*, const Expr*> defined_;
  std::unordered_map<const Val*, TensorId> params_;
  std::unordered_map<const Val*, ExprId> results_;
  // A value at an index: the val and its index's (base, lane) pairs.
  using ValueKey = std::pair<const Val*, std::vector<int64_t>>;
  struct ValueKeyHash {
    size_t operator()(const ValueKey& key) const;
  };
  std::unordered_map<ValueKey, ExprId, ValueKeyHash> memo_;
  struct Piece {
    const Expr* cat = nullptr;
    size_t input = 0;
  };
  Piece piece_;
  std::map<std::pair<TensorId, ExprId>, ExprId> vector_loads_;  // per chunk: (tensor, base) -> array var ref
  std::map<std::pair<VarId, ExprId>, VarId> shared_loads_;       // per chunk: (shared array, from) -> array
  std::map<std::pair<TensorId, ExprId>, VarId> cached_;          // across passes
  std::unordered_map<TensorId, ExprId> cache_places_;             // the one offset each kept tensor is cached at
  std::unordered_map<ValueKey, ComputedSlot, ValueKeyHash> computed_cache_;  // across passes
  // By expr id: expressions with one value for all the elements a kernel thread walks (scalars, per-row
  // results of a reduction, and elementwise ops of those); and whether an expression depends on the
  // lane (-1: not known yet). By var id: the vars holding lane-dependent values.
  std::vector<char> invariant_;
  std::vector<int8_t> lane_dependent_;
  std::vector<char> lane_vars_;
  bool isInvariant(ExprId e) const { return entryOr(invariant_, static_cast<size_t>(e), char{0}) != 0; }
  void markInvariant(ExprId e) { entryAt(invariant_, static_cast<size_t>(e), char{0}) = 1; }
  void markLaneVar(VarId v) { entryAt(lane_vars_, static_cast<size_t>(v), char{0}) = 1; }
  std::vector<Stmt>* pre_ = nullptr;
  std::vector<Stmt>* body_ = nullptr;
  int64_t width_ = 1;
  ExprId lane_ = -1;
  LoadCache cache_;
  bool last_pass_ = false;
  std::vector<Stmt>* hoist_ = nullptr;
  std::unordered_map<ExprId, ExprId> hoisted_;  // an invariant expression -> its variable before the loop
  LoadInterceptor interceptor_;
};

}  // namespace braze::scheduler
