// The matmul lowering, two schedules. Both read operand values through the ValueBuilder (so a cast,
// dequantize or broadcast feeding an operand is computed as it is loaded, and transposed operands are
// read through their strides), and put each output value through the epilogue (bias, the elementwise
// ops after the matmul, the output's dtype) before storing it.
// - mma: block b of the grid takes one batch's block tile of the output; its warps each a warp tile of
//   tiles_m x tiles_n mma tiles. Walking K an mma's depth at a time, each lane loads its fragment values
//   of A and B straight from global memory, zero outside the matrices, and issues the warp's mmas. The
//   operands are not staged in shared memory: a block reads A and B tiles several times from L1/L2.
// - GEMV (a few rows): a warp per gemv_cols output columns; its lanes walk K in chunks of gemv_vector
//   elements (one 16-byte load of B's weights per column), multiply by every row of A and keep a sum
//   per row and column, then the warp adds its lanes' sums.
#include "support/error.h"
#include "kernel/shared_tiles.h"
#include "scheduler/load_probe.h"
#include "scheduler/lower.h"
#include "scheduler/matmul/heuristics.h"

namespace braze::kernel {
namespace {

const Expr& matmulOf(const SegmentToLower& segment) {
  for (const Expr* e : segment.exprs) {
    if (opInfo(e->kind()).category == OpCategory::Matmul) return *e;
  }
  BRAZE_UNREACHABLE("matmul segment {} has no matmul", segment.id);
}

struct Shape {
  std::vector<int64_t> batch_sizes;
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

Shape shapeOf(const SegmentToLower& segment) {
  const Expr& mm = matmulOf(segment);
  const auto& out = segment.bound->sizesOf(mm.output(0));
  const auto& a = segment.bound->sizesOf(mm.input(0));
  Shape s;
  s.batch_sizes.assign(out.begin(), out.end() - 2);
  for (int64_t d : s.batch_sizes) s.batch *= d;
  s.m = out[out.size() - 2];
  s.n = out.back();
  s.k = a.back();
  return s;
}

// An index expression linear in the lane's group g = lane / 4 and its place t = lane % 4, equal to
// `position(lane)` for every lane (the fragment tables are linear in g and t).
ExprId laneLinear(KernelBuilder& kb, ExprId g, ExprId t, const std::function<int(int lane)>& position) {
  const int base = position(0);
  const int per_g = position(4) - base, per_t = position(1) - base;
  return kb.add(kb.index(base), kb.add(kb.mul(g, kb.index(per_g)), kb.mul(t, kb.index(per_t))));
}

// How an operand is read: every load it makes, probed at a symbolic point of its index space. It reads
// "along K" when each load moves by 0 or 1 element per step of k; `largest` is the tensor with the most
// elements among its loads (the weights, under any dequantize), with its element size and strides
// along K and along M / N.
struct OperandReads {
  bool k_contiguous = true;
  int64_t element_bytes = 2;
  int64_t largest_k_stride = 0, largest_mn_stride = 0;
};

OperandReads probeOperand(const LoweringContext& ctx, const Val* operand, size_t k_dim, size_t mn_dim) {
  const auto& sizes = ctx.bound.sizesOf(operand);
  Kernel scratch;
  scratch.tensors = ctx.kernel.tensors;
  scratch.index64 = true;
  KernelBuilder kb(scratch);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  SymbolicPoint point{sizes, std::vector<VarId>(sizes.size(), -1), -1, 1, -1};
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1) point.vars[d] = kb.scalarVar("p", DataType::Int64, true);
  }
  OperandReads reads;
  int64_t largest = -1, largest_k = -1;
  for (const ProbedLoad& load : probeLoads(kb, vb, point, {operand})) {
    const int64_t along_k = load.strides ? (*load.strides)[k_dim] : -1;
    if (along_k != 0 && along_k != 1) reads.k_contiguous = false;
    const TensorParam& param = scratch.tensors[load.tensor];
    const int64_t numel = param.layout.numel();
    if (along_k == 1 && numel > largest_k) {
      largest_k = numel;
      reads.element_bytes = sizeOf(param.dtype);
    }
    if (numel > largest) {
      largest = numel;
      reads.largest_k_stride = along_k;
      reads.largest_mn_stride = load.strides ? (*load.strides)[mn_dim] : -1;
    }
  }
  return reads;
}

// An operand's K dim and M / N dim: A is [.., m, k], a matmul's B [.., k, n], a linear's weight [n, k].
std::pair<size_t, size_t> operandDims(const LoweringContext& ctx, const Val* operand, bool k_last) {
  const size_t nd = ctx.bound.sizesOf(operand).size();
  return k_last ? std::pair{nd - 1, nd - 2} : std::pair{nd - 2, nd - 1};
}

// Whether `val` is a stored tensor seen through views only: every op between it and the segment's
// inputs is a meta op (permute, broadcast, expand, squeeze, slice, reshape).
bool viewOfInput(const std::vector<const Expr*>& exprs, const Val* val) {
  for (const Expr* e : exprs) {
    for (const Val* out : e->outputs()) {
      if (out != val) continue;
      if (opInfo(e->kind()).category != OpCategory::Meta) return false;
      for (const Val* in : e->inputs()) {
        if (in->isTensor() && !viewOfInput(exprs, in)) return false;
      }
      return true;
    }
  }
  return true;  // defined by no expr of the segment: one of its inputs
}

// The one element of one tensor the kernel reads for `operand` at `index` (an operand that is a view of
// a stored tensor): the tensor and the element offset. The ValueBuilder's statements go to `target`.
std::pair<TensorId, ExprId> storedElement(KernelBuilder& kb, ValueBuilder& vb, const Val* operand,
                                          const std::vector<Idx>& index, std::vector<Stmt>* target) {
  std::pair<TensorId, ExprId> found{-1, -1};
  int loads = 0;
  vb.beginChunk(target, target, 1, -1);
  vb.setLoadInterceptor([&](TensorId tensor, ExprId offset) -> std::optional<ExprId> {
    ++loads;
    found = {tensor, offset};
    const DataType dtype = kb.kernel().tensors[tensor].dtype;
    return isFloating(dtype) ? kb.constant(0.0, dtype) : kb.constantInt(0, dtype);
  });
  kb.pushTarget(target);
  vb.valueAt(operand, index);
  kb.popTarget();
  vb.setLoadInterceptor(nullptr);
  return loads == 1 ? found : std::pair<TensorId, ExprId>{-1, -1};
}

// Whether an operand can be copied into shared tiles as it is stored, and the order of the tile rows: a
// view (meta ops only) of one tensor of the mma's operand dtype, 16-byte aligned, read at offsets affine
// in the operand's index, contiguous along K (k-major) or, for 16-bit values, along M / N (mn-major),
// every other stride and the first element a whole number of 16-byte chunks. `k_last`: its last dim is
// K (A, a linear's weight).
std::optional<TileOrder> tileOrder(const LoweringContext& ctx, const Val* operand, DataType dtype, bool k_last) {
  if (!viewOfInput(ctx.segment.exprs, operand)) return std::nullopt;
  const auto& sizes = ctx.bound.sizesOf(operand);
  const size_t nd = sizes.size();
  if (nd < 2) return std::nullopt;
  Kernel scratch;
  scratch.tensors = ctx.kernel.tensors;
  scratch.index64 = true;
  KernelBuilder kb(scratch);
  ValueBuilder vb(kb, ctx.bound, ctx.segment.exprs, ctx.inputs);
  std::vector<Stmt> dropped;
  TensorId tensor = -1;
  // The offset at constant coordinates (folded to a constant), or nullopt.
  auto offsetAt = [&](const std::vector<int64_t>& coords) -> std::optional<int64_t> {
    std::vector<Idx> index;
    for (int64_t c : coords) index.push_back({kb.index(c), false});
    const auto [t, offset] = storedElement(kb, vb, operand, index, &dropped);
    if (t < 0 || (tensor >= 0 && t != tensor)) return std::nullopt;
    tensor = t;
    return kb.constValue(offset);
  };
  const std::vector<int64_t> origin_coords(nd, 0);
  const std::optional<int64_t> origin = offsetAt(origin_coords);
  if (!origin) return std::nullopt;
  std::vector<int64_t> strides(nd, 0), corner(nd, 0);
  int64_t corner_offset = *origin;
  for (size_t d = 0; d < nd; ++d) {
    if (sizes[d] <= 1) continue;
    std::vector<int64_t> step = origin_coords, last = origin_coords;
    step[d] = 1;
    last[d] = sizes[d] - 1;
    const std::optional<int64_t> one = offsetAt(step), end = offsetAt(last);
    if (!one || !end || *end != *origin + (sizes[d] - 1) * (*one - *origin)) return std::nullopt;
    strides[d] = *one - *origin;
    corner[d] = sizes[d] - 1;
    corner_offset += (sizes[d] - 1) * strides[d];
  }
  if (offsetAt(corner) != corner_offset) return std::nullopt;
  const TensorParam& param = scratch.tensors[tensor];
  const int64_t chunk = 16 / sizeOf(dtype);
  if (param.dtype != dtype || param.alignment_bytes % 16 != 0 || *origin % chunk != 0) return std::nullopt;
  const size_t k_dim = k_last ? nd - 1 : nd - 2, mn_dim = k_last ? nd - 2 : nd - 1;
  std::optional<TileOrder> order;
  size_t contiguous = k_dim;
  if (strides[k_dim] == 1 && sizes[k_dim] > 1) {
    order = TileOrder::KMajor;
  } else if (strides[mn_dim] == 1 && sizes[mn_dim] > 1 && sizeOf(dtype) == 2) {
    order = TileOrder::MnMajor;
    contiguous = mn_dim;
  } else {
    return std::nullopt;
  }
  for (size_t d = 0; d < nd; ++d) {
    if (d != contiguous && sizes[d] > 1 && strides[d] % chunk != 0) return std::nullopt;
  }
  return order;
}

}  // namespace

MatmulParams chooseMatmul(LoweringContext& ctx) {
  const Expr& mm = matmulOf(ctx.segment);
  const Shape s = shapeOf(ctx.segment);
  const DataType operand = mm.input(0)->dtype();
  MatmulProblem problem{s.batch, s.m, s.n, s.k, operand};
  const bool linear = mm.kind() == OpKind::Linear;
  const auto [b_k, b_mn] = operandDims(ctx, mm.input(1), linear);
  const OperandReads b_reads = probeOperand(ctx, mm.input(1), b_k, b_mn);
  problem.b_k_contiguous = b_reads.k_contiguous;
  problem.b_element_bytes = b_reads.element_bytes;
  problem.a_tile = tileOrder(ctx, mm.input(0), operand, true);
  problem.b_tile = tileOrder(ctx, mm.input(1), operand, linear);
  return matmulHeuristics(ctx.device, problem);
}

namespace {

class MatmulLowering {
 public:
  MatmulLowering(LoweringContext& ctx, const MatmulParams& p)
      : ctx_(ctx),
        p_(p),
        mm_(matmulOf(ctx.segment)),
        linear_(mm_.kind() == OpKind::Linear),
        a_(mm_.input(0)),
        b_(mm_.input(1)),
        bias_(linear_ && mm_.inputs().size() > 2 ? mm_.input(2) : nullptr),
        result_(mm_.output(0)),
        s_(shapeOf(ctx.segment)),
        acc_type_(mmaAccumulator(p.gemv ? shapeFor(a_->dtype()) : p.shape, a_->dtype())),
        kb_(ctx.kernel),
        vb_(kb_, ctx.bound, ctx.segment.exprs, ctx.inputs) {
    ctx.kernel.summary = p.toString();
  }

  void mma();
  void gemv();

 private:
  // One operand's ring of shared tiles (staged schedule).
  struct Staging {
    const Val* operand = nullptr;
    TileOrder order = TileOrder::KMajor;
    bool async = true;           // cp.async of the stored bytes, or loaded and computed in registers
    bool walk_k = true;          // registers: a chunk of `width` elements runs along K (else along M / N)
    int64_t width = 1;
    bool k_last = true;          // the operand's last dim is K
    int64_t rows = 0, row_elements = 0, chunks = 0;  // a tile: rows of row_elements (chunks of 16 bytes)
    int64_t mn = 0, mn_extent = 0;  // the tile's M or N span and the problem's extent
    ExprId mn_base = -1;         // the block's first m or n
    VarId tiles = -1;            // stages x rows x row_elements, as stored
  };
  Staging staging(const Val* operand, TileOrder order, bool async, bool k_last, int64_t mn, int64_t mn_extent,
                  ExprId mn_base);
  // The element index of tile element (row, chunk, element in the chunk) in stage `stage`.
  ExprId tileIndex(const Staging& t, ExprId stage, ExprId row, ExprId chunk);
  // K slice `slice` of the operand into stage `stage`, spread over the block's threads: cp.asyncs, or
  // (storeSlice) values computed in registers and written to the tile.
  void copySlice(const Staging& t, ExprId slice, ExprId stage);
  void storeSlice(const Staging& t, ExprId slice, ExprId stage);
  // Element kk (along K) of tile row `row` in stage `stage` (k-major tiles).
  ExprId tileElement(const Staging& t, ExprId stage, ExprId row, ExprId kk);
  // The lane's ldmatrix of the fragment at (m or n, k) = (mn0, k0) of the block's tile in `stage`.
  void loadFragment(const Staging& t, const LdmatrixPattern& pattern, VarId fragment, ExprId stage, ExprId mn0,
                    int64_t k0);

  static MmaShape shapeFor(DataType operand) {
    return operand == DataType::BFloat16 || operand == DataType::Half ? MmaShape::M16N8K16 : MmaShape::M16N8K32;
  }

  // Block index bb of the batch: the batch dims' indices.
  void setBatch(ExprId bb) { batch_index_ = vb_.unflatten(bb, false, s_.batch_sizes); }

  // An operand's index: its own batch dims (aligned right, size 1 broadcast), then its two matrix dims.
  std::vector<Idx> operandIndex(const Val* operand, Idx r, Idx c) {
    const auto& sizes = ctx_.bound.sizesOf(operand);
    const int64_t nb = static_cast<int64_t>(s_.batch_sizes.size());
    std::vector<Idx> index;
    const int64_t lead = static_cast<int64_t>(sizes.size()) - 2;
    for (int64_t j = 0; j < lead; ++j) {
      index.push_back(sizes[j] == 1 ? Idx{kb_.index(0), false} : batch_index_[j + (nb - lead)]);
    }
    index.push_back(r);
    index.push_back(c);
    return index;
  }
  ExprId valueOfA(Idx m, Idx k) { return vb_.valueAt(a_, operandIndex(a_, m, k)); }
  // B[k][n]; a linear's weight is [N, K], so B[k][n] is weight[n][k].
  ExprId valueOfB(Idx k, Idx n) { return vb_.valueAt(b_, linear_ ? operandIndex(b_, n, k) : operandIndex(b_, k, n)); }

  // Output (r, c) of the matmul from its accumulated value: plus linear's bias (in the accumulator's
  // domain, as the reference adds: float, or wrapping integers), rounded once to the result's dtype,
  // through the ops after it, stored where `inside`.
  void epilogue(ExprId inside, ExprId r, ExprId c, const std::function<ExprId()>& accumulated) {
    emitChunk(kb_, vb_, inside, 1, /*lane_var=*/-1, [&](Chunk& chunk) {
      ExprId value = accumulated();
      if (bias_ != nullptr) {
        const DataType sum = acc_type_ == DataType::Float ? DataType::Float : DataType::Int64;
        const std::vector<Idx> at = ctx_.bound.sizesOf(bias_).empty() ? std::vector<Idx>{} : std::vector<Idx>{{c, false}};
        value = kb_.elementwise(OpKind::Add, sum, {kb_.cast(value, sum), kb_.cast(vb_.valueAt(bias_, at), sum)});
      }
      vb_.setResult(result_, vb_.bind("mm", kb_.cast(value, result_->dtype())));
      std::vector<Idx> index = batch_index_;
      index.push_back({r, false});
      index.push_back({c, false});
      for (const Val* out : ctx_.segment.outputs) {
        storeOutput(kb_, vb_, chunk, ctx_.outputs.at(out), index, vb_.valueAt(out, index));
      }
    });
  }

  ExprId zeroOf(DataType dtype) { return isFloating(dtype) ? kb_.constant(0.0, dtype) : kb_.constantInt(0, dtype); }

  LoweringContext& ctx_;
  const MatmulParams& p_;
  const Expr& mm_;
  const bool linear_;
  const Val *a_, *b_, *bias_, *result_;
  const Shape s_;
  const DataType acc_type_;
  KernelBuilder kb_;
  ValueBuilder vb_;
  std::vector<Idx> batch_index_;
};

void MatmulLowering::mma() {
  const MatmulParams& p = p_;
  const DataType operand = a_->dtype();
  const MmaDims dims = mmaDims(p.shape);
  KernelBuilder& kb = kb_;
  ValueBuilder& vb = vb_;
  const Shape& s = s_;
  ctx_.kernel.grid = {p.grid, 1};
  ctx_.kernel.block = {32 * p.warps_m * p.warps_n, 1};

  const ExprId block = kb.blockIdx(0);
  // Rasterization: blocks launched together take raster_group block rows and walk along N within them, so
  // the A rows and B columns they read are shared while both are in L2 (raster_group 1: row by row). The
  // last group of rows may be shorter.
  const int64_t tiles = p.blocks_m * p.blocks_n, group_tiles = p.raster_group * p.blocks_n;
  const ExprId bb = kb.letValue("bb", kb.div(block, kb.index(tiles)));
  const ExprId tile = kb.letValue("tile", kb.mod(block, kb.index(tiles)));
  const ExprId first_m = kb.mul(kb.div(tile, kb.index(group_tiles)), kb.index(p.raster_group));
  const ExprId group_m = kb.letValue("group_m", kb.min(kb.sub(kb.index(p.blocks_m), first_m), kb.index(p.raster_group)));
  const ExprId in_group = kb.mod(tile, kb.index(group_tiles));
  const ExprId bm = kb.letValue("bm", kb.add(first_m, kb.mod(in_group, group_m)));
  const ExprId bn = kb.letValue("bn", kb.div(in_group, group_m));
  const ExprId warp = kb.letValue("warp", kb.div(kb.threadIdx(0), kb.index(32)));
  const ExprId lane = kb.letValue("lane", kb.mod(kb.threadIdx(0), kb.index(32)));
  const ExprId g = kb.letValue("g", kb.div(lane, kb.index(4)));
  const ExprId t = kb.letValue("t", kb.mod(lane, kb.index(4)));
  const ExprId row0 = kb.letValue(
      "row0", kb.add(kb.mul(bm, kb.index(p.blockRows())), kb.mul(kb.div(warp, kb.index(p.warps_n)), kb.index(p.tiles_m * 16))));
  const ExprId col0 = kb.letValue(
      "col0", kb.add(kb.mul(bn, kb.index(p.blockCols())), kb.mul(kb.mod(warp, kb.index(p.warps_n)), kb.index(p.tiles_n * 8))));
  setBatch(bb);

  // Statements the ValueBuilder and this lowering add, in order, to the current block.
  auto inChunk = [&](const std::function<void()>& build) {
    std::vector<Stmt> pre;
    vb.beginChunk(&pre, &pre, 1, -1);
    kb.pushTarget(&pre);
    build();
    kb.popTarget();
    auto& target = kb.current();
    target.insert(target.end(), std::make_move_iterator(pre.begin()), std::make_move_iterator(pre.end()));
  };
  const ExprId zero = zeroOf(operand);

  std::vector<VarId> acc, fa, fb;
  for (int64_t i = 0; i < p.tiles_m * p.tiles_n; ++i) acc.push_back(kb.arrayVar("acc", acc_type_, dims.c_values));
  for (int64_t i = 0; i < p.tiles_m; ++i) fa.push_back(kb.arrayVar("fa", operand, dims.a_values));
  for (int64_t i = 0; i < p.tiles_n; ++i) fb.push_back(kb.arrayVar("fb", operand, dims.b_values));
  for (VarId v : acc) {
    kb.declare(v);
    for (int64_t i = 0; i < dims.c_values; ++i) kb.localWrite(v, kb.index(i), zeroOf(acc_type_));
  }
  for (VarId v : fa) kb.declare(v);
  for (VarId v : fb) kb.declare(v);

  auto mmas = [&] {
    for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
      for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
        const VarId d = acc[tm * p.tiles_n + tn];
        kb.mma(p.shape, d, fa[tm], fb[tn], d);
      }
    }
  };
  if (p.stages >= 2) {
    // Warp (wm, wn)'s first rows of A and columns of B within the block tile.
    const ExprId warp_m = kb.mul(kb.div(warp, kb.index(p.warps_n)), kb.index(p.tiles_m * 16));
    const ExprId warp_n = kb.mul(kb.mod(warp, kb.index(p.warps_n)), kb.index(p.tiles_n * 8));
    const Staging ta = staging(a_, p.a_order, p.a_async, true, p.blockRows(), s.m, kb.mul(bm, kb.index(p.blockRows())));
    const Staging tb =
        staging(b_, p.b_order, p.b_async, linear_, p.blockCols(), s.n, kb.mul(bn, kb.index(p.blockCols())));
    const int64_t slices = ceilDiv(s.k, p.block_k);
    // The first stages - 1 slices, a group each (empty past the last slice, so the count stays uniform).
    for (int64_t slice = 0; slice < p.stages - 1; ++slice) {
      if (slice < slices) {
        copySlice(ta, kb.index(slice), kb.index(slice));
        copySlice(tb, kb.index(slice), kb.index(slice));
      }
      kb.cpAsyncCommit();
    }
    const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
    kb.openFor(kt, kb.index(0), kb.index(slices), kb.index(1), /*unroll=*/false);
    // Slice kt has landed (this thread's copies), and every thread is past reading the stage refilled next.
    kb.cpAsyncWait(static_cast<int>(p.stages - 2));
    kb.barrier();
    const ExprId next = kb.add(kb.ref(kt), kb.index(p.stages - 1));
    kb.openIf(kb.lt(next, kb.index(slices)));
    const ExprId refill = kb.mod(next, kb.index(p.stages));
    copySlice(ta, next, refill);
    copySlice(tb, next, refill);
    kb.close();
    kb.cpAsyncCommit();
    const ExprId stage = kb.letValue("stage", kb.mod(kb.ref(kt), kb.index(p.stages)));
    const LdmatrixPattern pa = ldmatrixPatternA(p.a_order), pb = ldmatrixPatternB(p.b_order);
    for (int64_t ks = 0; ks < p.block_k / dims.k; ++ks) {
      for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
        loadFragment(ta, pa, fa[tm], stage, kb.add(warp_m, kb.index(tm * 16)), ks * dims.k);
      }
      for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
        loadFragment(tb, pb, fb[tn], stage, kb.add(warp_n, kb.index(tn * 8)), ks * dims.k);
      }
      mmas();
    }
    kb.close();
  } else {
    const VarId kk = kb.scalarVar("kk", DataType::Int64, /*is_index=*/true);
    kb.openFor(kk, kb.index(0), kb.index(s.k), kb.index(dims.k), /*unroll=*/false);
    for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
      inChunk([&] {
        for (int i = 0; i < dims.a_values; ++i) {
          const ExprId r = kb.add(kb.add(row0, kb.index(tm * 16)),
                                  laneLinear(kb, g, t, [&](int l) { return mmaAPosition(p.shape, l, i).row; }));
          const ExprId c = kb.add(kb.ref(kk), laneLinear(kb, g, t, [&](int l) { return mmaAPosition(p.shape, l, i).col; }));
          const ExprId valid = kb.land(kb.lt(r, kb.index(s.m)), kb.lt(c, kb.index(s.k)));
          const ExprId v = valueOfA({kb.min(r, kb.index(s.m - 1)), false}, {kb.min(c, kb.index(s.k - 1)), false});
          kb.localWrite(fa[tm], kb.index(i), kb.select(valid, v, zero));
        }
      });
    }
    for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
      inChunk([&] {
        for (int i = 0; i < dims.b_values; ++i) {
          const ExprId r = kb.add(kb.ref(kk), laneLinear(kb, g, t, [&](int l) { return mmaBPosition(p.shape, l, i).row; }));
          const ExprId c = kb.add(kb.add(col0, kb.index(tn * 8)),
                                  laneLinear(kb, g, t, [&](int l) { return mmaBPosition(p.shape, l, i).col; }));
          const ExprId valid = kb.land(kb.lt(r, kb.index(s.k)), kb.lt(c, kb.index(s.n)));
          const ExprId v = valueOfB({kb.min(r, kb.index(s.k - 1)), false}, {kb.min(c, kb.index(s.n - 1)), false});
          kb.localWrite(fb[tn], kb.index(i), kb.select(valid, v, zero));
        }
      });
    }
    mmas();
    kb.close();
  }

  for (int64_t tm = 0; tm < p.tiles_m; ++tm) {
    for (int64_t tn = 0; tn < p.tiles_n; ++tn) {
      for (int i = 0; i < dims.c_values; ++i) {
        const ExprId r = kb.add(kb.add(row0, kb.index(tm * 16)), laneLinear(kb, g, t, [&](int l) { return mmaCPosition(l, i).row; }));
        const ExprId c = kb.add(kb.add(col0, kb.index(tn * 8)), laneLinear(kb, g, t, [&](int l) { return mmaCPosition(l, i).col; }));
        const ExprId inside = kb.land(kb.lt(r, kb.index(s.m)), kb.lt(c, kb.index(s.n)));
        epilogue(inside, r, c, [&] { return kb.localRead(acc[tm * p.tiles_n + tn], kb.index(i)); });
      }
    }
  }
}

MatmulLowering::Staging MatmulLowering::staging(const Val* operand, TileOrder order, bool async, bool k_last,
                                                int64_t mn, int64_t mn_extent, ExprId mn_base) {
  Staging t;
  t.operand = operand;
  t.order = order;
  t.async = async;
  t.k_last = k_last;
  if (!async) {
    // Chunks of 16 bytes of the operand along the dim its largest input is contiguous in (K for a
    // linear's weights, N for a row-major B), where that dim's extent is whole chunks; else one element.
    const auto [k_dim, mn_dim] = operandDims(ctx_, operand, k_last);
    const OperandReads reads = probeOperand(ctx_, operand, k_dim, mn_dim);
    t.walk_k = reads.largest_k_stride == 1 || reads.largest_mn_stride != 1;
    const int64_t chunk = 16 / sizeOf(operand->dtype());
    const int64_t walk_stride = t.walk_k ? reads.largest_k_stride : reads.largest_mn_stride;
    t.width = walk_stride == 1 && (t.walk_k ? s_.k : mn_extent) % chunk == 0 ? chunk : 1;
  }
  t.mn = mn;
  t.mn_extent = mn_extent;
  t.mn_base = mn_base;
  // k-major: a row per m (or n) of block_k elements; mn-major: a row per k of the block's m (or n) span.
  t.rows = order == TileOrder::KMajor ? mn : p_.block_k;
  t.row_elements = order == TileOrder::KMajor ? p_.block_k : mn;
  t.chunks = t.row_elements * sizeOf(operand->dtype()) / 16;
  t.tiles = kb_.sharedStorageArray(operand == a_ ? "tile_a" : "tile_b", operand->dtype(), p_.stages * t.rows * t.row_elements);
  kb_.declare(t.tiles);
  return t;
}

ExprId MatmulLowering::tileIndex(const Staging& t, ExprId stage, ExprId row, ExprId chunk) {
  KernelBuilder& kb = kb_;
  const int64_t per_chunk = t.row_elements / t.chunks;
  const ExprId rotated = kb.mod(kb.add(chunk, kb.div(row, kb.index(rowsPerRotation(t.chunks)))), kb.index(t.chunks));
  return kb.add(kb.mul(stage, kb.index(t.rows * t.row_elements)),
                kb.add(kb.mul(row, kb.index(t.row_elements)), kb.mul(rotated, kb.index(per_chunk))));
}

ExprId MatmulLowering::tileElement(const Staging& t, ExprId stage, ExprId row, ExprId kk) {
  const int64_t per_chunk = t.row_elements / t.chunks;
  return kb_.add(tileIndex(t, stage, row, kb_.div(kk, kb_.index(per_chunk))), kb_.mod(kk, kb_.index(per_chunk)));
}

void MatmulLowering::storeSlice(const Staging& t, ExprId slice, ExprId stage) {
  KernelBuilder& kb = kb_;
  const int64_t threads = ctx_.kernel.threadsPerBlock();
  // The tile as chunks of `width` elements along the walked dim: `across` indexes the other dim.
  const int64_t walk_extent = t.walk_k ? p_.block_k : t.mn;
  const int64_t per_line = walk_extent / t.width, units = (t.walk_k ? t.mn : p_.block_k) * per_line;
  const VarId lane_var = kb.scalarVar("l", DataType::Int64, /*is_index=*/true);
  for (int64_t first = 0; first < units; first += threads) {
    const ExprId q = kb.add(kb.threadIdx(0), kb.index(first));
    const ExprId across = kb.div(q, kb.index(per_line)), along = kb.mul(kb.mod(q, kb.index(per_line)), kb.index(t.width));
    // The chunk's first tile row and K element in the slice, and its first global k and m / n.
    const ExprId row0 = t.walk_k ? across : along, kk0 = t.walk_k ? along : across;
    const ExprId k0 = kb.add(kb.mul(slice, kb.index(p_.block_k)), kk0), mn0 = kb.add(t.mn_base, row0);
    const ExprId inside = kb.land(kb.lt(k0, kb.index(s_.k)), kb.lt(mn0, kb.index(t.mn_extent)));
    const ExprId used = units % threads != 0 && first + threads > units ? kb.lt(q, kb.index(units)) : -1;
    const bool vector = t.width > 1;
    emitChunk(kb, vb_, used >= 0 ? kb.land(used, inside) : inside, t.width, lane_var, [&](Chunk& c) {
      const Idx k = {k0, vector && t.walk_k}, mn = {mn0, vector && !t.walk_k};
      const ExprId value = t.k_last ? vb_.valueAt(t.operand, operandIndex(t.operand, mn, k))
                                    : vb_.valueAt(t.operand, operandIndex(t.operand, k, mn));
      kb.pushTarget(vector ? &c.body : &c.pre);
      const ExprId lane = vector ? kb.ref(lane_var) : kb.index(0);
      kb.localWrite(t.tiles,
                    tileElement(t, stage, t.walk_k ? row0 : kb.add(row0, lane), t.walk_k ? kb.add(kk0, lane) : kk0),
                    value);
      kb.popTarget();
    });
    // Past M, N or K: zeros.
    kb.openIf(used >= 0 ? kb.land(used, kb.lnot(inside)) : kb.lnot(inside));
    for (int64_t i = 0; i < t.width; ++i) {
      const ExprId row = t.walk_k ? row0 : kb.add(row0, kb.index(i)), kk = t.walk_k ? kb.add(kk0, kb.index(i)) : kk0;
      kb.localWrite(t.tiles, tileElement(t, stage, row, kk), zeroOf(t.operand->dtype()));
    }
    kb.close();
  }
}

void MatmulLowering::copySlice(const Staging& t, ExprId slice, ExprId stage) {
  if (!t.async) {
    storeSlice(t, slice, stage);
    return;
  }
  KernelBuilder& kb = kb_;
  const int64_t threads = ctx_.kernel.threadsPerBlock();
  const int64_t total = t.rows * t.chunks;
  const int64_t element = sizeOf(t.operand->dtype()), per_chunk = 16 / element;
  const int64_t k_extent = s_.k;
  for (int64_t first = 0; first < total; first += threads) {
    const ExprId q = kb.add(kb.threadIdx(0), kb.index(first));
    const ExprId row = kb.div(q, kb.index(t.chunks)), chunk = kb.mod(q, kb.index(t.chunks));
    // The chunk's first (k, m or n) and how many of its elements lie inside the operand.
    ExprId k, mn, left;
    if (t.order == TileOrder::KMajor) {
      k = kb.add(kb.mul(slice, kb.index(p_.block_k)), kb.mul(chunk, kb.index(per_chunk)));
      mn = kb.add(t.mn_base, row);
      left = kb.select(kb.lt(mn, kb.index(t.mn_extent)), kb.sub(kb.index(k_extent), k), kb.index(0));
    } else {
      k = kb.add(kb.mul(slice, kb.index(p_.block_k)), row);
      mn = kb.add(t.mn_base, kb.mul(chunk, kb.index(per_chunk)));
      left = kb.select(kb.lt(k, kb.index(k_extent)), kb.sub(kb.index(t.mn_extent), mn), kb.index(0));
    }
    const ExprId bytes = kb.mul(kb.min(kb.index(per_chunk), kb.select(kb.lt(left, kb.index(0)), kb.index(0), left)),
                                kb.index(element));
    // Outside the operand nothing is read, but the address stays inside it (the last chunk start).
    const int64_t last_k = (k_extent - 1) / per_chunk * per_chunk;
    const ExprId kc = kb.min(k, kb.index(t.order == TileOrder::KMajor ? last_k : k_extent - 1));
    const ExprId mnc =
        kb.min(mn, kb.index(t.order == TileOrder::KMajor ? t.mn_extent - 1 : (t.mn_extent - 1) / per_chunk * per_chunk));
    const std::vector<Idx> index = t.k_last ? operandIndex(t.operand, {mnc, false}, {kc, false})
                                            : operandIndex(t.operand, {kc, false}, {mnc, false});
    std::vector<Stmt> lets;
    const auto [tensor, offset] = storedElement(kb, vb_, t.operand, index, &lets);
    BRAZE_ASSERT(tensor >= 0, "staged operand {} is not one stored tensor", t.operand->name());
    auto& target = kb.current();
    target.insert(target.end(), std::make_move_iterator(lets.begin()), std::make_move_iterator(lets.end()));
    const ExprId at = tileIndex(t, stage, row, chunk);
    if (total % threads != 0 && first + threads > total) kb.openIf(kb.lt(q, kb.index(total)));
    kb.cpAsync(t.tiles, at, tensor, offset, static_cast<int>(per_chunk), bytes);
    if (total % threads != 0 && first + threads > total) kb.close();
  }
}

void MatmulLowering::loadFragment(const Staging& t, const LdmatrixPattern& pattern, VarId fragment, ExprId stage,
                                  ExprId mn0, int64_t k0) {
  KernelBuilder& kb = kb_;
  const int64_t per_chunk = 16 / sizeOf(t.operand->dtype());
  // k-major tiles have a row per m or n and K along the row; mn-major ones a row per k.
  const bool k_major = t.order == TileOrder::KMajor;
  const ExprId row0 = k_major ? mn0 : kb.index(k0);
  const ExprId chunk0 = k_major ? kb.index(k0 / per_chunk) : kb.div(mn0, kb.index(per_chunk));
  const TilePlace source = ldmatrixSource(kb, pattern, kb.mod(kb.threadIdx(0), kb.index(32)));
  const ExprId row = kb.add(row0, source.row), chunk = kb.add(chunk0, source.chunk);
  kb.ldmatrix(fragment, kb.index(0), t.tiles, tileIndex(t, stage, row, chunk), pattern.matrices, pattern.transpose);
}

void MatmulLowering::gemv() {
  const MatmulParams& p = p_;
  KernelBuilder& kb = kb_;
  ValueBuilder& vb = vb_;
  const Shape& s = s_;
  const int64_t width = p.gemv_vector;
  ctx_.kernel.grid = {p.grid, 1};
  ctx_.kernel.block = {32, p.gemv_warps};  // threadIdx.x: the lane, threadIdx.y: the warp

  const ExprId block = kb.blockIdx(0);
  const ExprId bn = kb.letValue("bn", kb.mod(block, kb.index(p.blocks_n)));
  setBatch(kb.letValue("bb", kb.div(block, kb.index(p.blocks_n))));
  const ExprId lane = kb.threadIdx(0);
  const ExprId col0 = kb.letValue("col0", kb.mul(kb.add(kb.mul(bn, kb.index(p.gemv_warps)), kb.threadIdx(1)),
                                                 kb.index(p.gemv_cols)));
  // Columns past N read column N - 1 (in bounds) and store nothing.
  std::vector<ExprId> cols;
  for (int64_t c = 0; c < p.gemv_cols; ++c) cols.push_back(kb.letValue("n", kb.min(kb.add(col0, kb.index(c)), kb.index(s.n - 1))));
  // A sum per row and column, in the accumulator's type (float, or int32 that wraps as mma's does).
  std::vector<VarId> sums;
  for (int64_t i = 0; i < s.m * p.gemv_cols; ++i) {
    sums.push_back(kb.scalarVar("sum", acc_type_));
    kb.let(sums.back(), zeroOf(acc_type_));
  }
  const DataType product_type = acc_type_ == DataType::Float ? DataType::Float : DataType::Int64;
  // Adds row m times column c at K index k (a chunk's lane, or one element) to their sums.
  auto accumulate = [&](Chunk& chunk, Idx k) {
    std::vector<ExprId> column;
    for (ExprId n : cols) column.push_back(kb.cast(valueOfB(k, {n, false}), product_type));
    for (int64_t m = 0; m < s.m; ++m) {
      const ExprId row = kb.cast(valueOfA({kb.index(m), false}, k), product_type);
      kb.pushTarget(k.lane ? &chunk.body : &chunk.pre);
      for (int64_t c = 0; c < p.gemv_cols; ++c) {
        const VarId sum = sums[m * p.gemv_cols + c];
        const ExprId product = kb.elementwise(OpKind::Mul, product_type, {row, column[c]});
        kb.assign(sum, kb.cast(kb.elementwise(OpKind::Add, product_type, {kb.cast(kb.ref(sum), product_type), product}),
                               acc_type_));
      }
      kb.popTarget();
    }
  };
  // Whole chunks of `width` K elements, lane l taking chunks l, l + 32, ... in steps of gemv_unroll
  // chunks, unrolled so that the steps' loads are in flight together; then the last K % width elements
  // one at a time.
  const int64_t chunks = s.k / width;
  const int64_t steps = ceilDiv(chunks, int64_t{32});
  const int64_t unroll = std::min(p.gemv_unroll, std::max<int64_t>(steps, 1));
  const VarId lane_var = kb.scalarVar("l", DataType::Int64, /*is_index=*/true);
  auto chunkStep = [&](ExprId step) {
    const ExprId chunk = kb.letValue("kc", kb.add(kb.mul(step, kb.index(32)), lane));
    const ExprId inside = chunks % 32 == 0 ? kb.constantInt(1, DataType::Bool) : kb.lt(chunk, kb.index(chunks));
    emitChunk(kb, vb, inside, width, lane_var,
              [&](Chunk& c) { accumulate(c, {kb.mul(chunk, kb.index(width)), width > 1}); });
  };
  if (steps >= unroll) {
    const VarId group = kb.scalarVar("kg", DataType::Int64, /*is_index=*/true);
    const VarId u = kb.scalarVar("ku", DataType::Int64, /*is_index=*/true);
    kb.openFor(group, kb.index(0), kb.index(steps / unroll * unroll), kb.index(unroll), /*unroll=*/false);
    kb.openFor(u, kb.index(0), kb.index(unroll), kb.index(1), /*unroll=*/true);
    chunkStep(kb.add(kb.ref(group), kb.ref(u)));
    kb.close();
    kb.close();
  }
  if (steps % unroll != 0) {
    const VarId step = kb.scalarVar("ks", DataType::Int64, /*is_index=*/true);
    kb.openFor(step, kb.index(steps / unroll * unroll), kb.index(steps), kb.index(1), /*unroll=*/true);
    chunkStep(kb.ref(step));
    kb.close();
  }
  const ExprId all = kb.constantInt(1, DataType::Bool);
  if (s.k % width != 0) {
    const VarId kt = kb.scalarVar("kt", DataType::Int64, /*is_index=*/true);
    kb.openFor(kt, kb.add(kb.index(chunks * width), lane), kb.index(s.k), kb.index(32), /*unroll=*/false);
    emitChunk(kb, vb, all, 1, -1, [&](Chunk& c) { accumulate(c, {kb.ref(kt), false}); });
    kb.close();
  }
  for (VarId sum : sums) kb.blockReduce(sum, ReduceOp::Sum, /*axis=*/0);
  // Lane 0 holds the warp's sums.
  for (int64_t m = 0; m < s.m; ++m) {
    for (int64_t c = 0; c < p.gemv_cols; ++c) {
      const ExprId n = kb.add(col0, kb.index(c));
      const ExprId inside = kb.land(kb.eq(lane, kb.index(0)), kb.lt(n, kb.index(s.n)));
      epilogue(inside, kb.index(m), n, [&] { return kb.ref(sums[m * p.gemv_cols + c]); });
    }
  }
}

}  // namespace

void lowerMatmul(LoweringContext& ctx, const MatmulParams& p) {
  MatmulLowering lowering(ctx, p);
  if (p.gemv) {
    lowering.gemv();
  } else {
    lowering.mma();
  }
}

}  // namespace braze::kernel
