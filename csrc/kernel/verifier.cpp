#include "kernel/verifier.h"

#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace braze::kernel {
namespace {

class KernelVerifier {
 public:
  explicit KernelVerifier(const Kernel& k) : k_(k) {}

  void run() {
    check(k_.block[0] >= 1 && k_.block[1] >= 1 && k_.threadsPerBlock() <= 1024, "a block of {}x{} threads",
          k_.block[0], k_.block[1]);
    check(k_.grid[0] >= 0 && k_.grid[1] >= 0 && k_.grid[0] <= 2147483647 && k_.grid[1] <= 65535,
          "a grid of {}x{} blocks (at most 2^31-1 x 65535)", k_.grid[0], k_.grid[1]);
    check(k_.cluster >= 1 && k_.cluster <= 8 && k_.grid[0] % k_.cluster == 0 &&
              (k_.cluster == 1 || (k_.warp_size == 32 && k_.threadsPerBlock() % 32 == 0)),
          "clusters of {} blocks in a grid of {} along x (1 to 8 blocks of whole 32-lane warps, dividing the grid)",
          k_.cluster, k_.grid[0]);
    checkParameterNames();
    for (size_t e = 0; e < k_.exprs.size(); ++e) checkExpr(static_cast<ExprId>(e));
    for (const KVar& v : k_.vars) {
      if (v.kind != VarKind::SharedArray) continue;
      check(v.shared_offset % 16 == 0 && v.shared_offset + v.size * sizeOf(v.dtype) <= k_.shared_bytes,
            "shared array {} at byte {} ({} x {}) outside the block's {} bytes", v.name, v.shared_offset, v.size,
            toString(v.dtype), k_.shared_bytes);
    }
    block(k_.body);
  }

 private:
  template <typename... Args>
  void check(bool ok, fmt::format_string<Args...> what, Args&&... args) const {
    if (!ok) {
      throwError(ErrorKind::Internal, __FILE__, __LINE__,
                 fmt::format("kernel {}: {}", k_.name, fmt::format(what, std::forward<Args>(args)...)));
    }
  }

  // Tensors and scalar arguments are the kernel's parameters: a repeated name does not compile, and a
  // var of a parameter's name would hide it from the code after its declaration (which would compile).
  void checkParameterNames() const {
    std::unordered_set<std::string_view> names;
    for (const TensorParam& p : k_.tensors) check(names.insert(p.name).second, "two parameters named {}", p.name);
    for (const ScalarArgument& a : k_.arguments) check(names.insert(a.name).second, "two parameters named {}", a.name);
    for (const KVar& v : k_.vars) check(names.count(v.name) == 0, "a var named {} hides the parameter", v.name);
  }

  void checkExpr(ExprId id) {
    const KExpr& e = k_.exprs[id];
    // Interned: operands exist before the expressions that use them.
    for (ExprId a : e.args) check(a >= 0 && a < id, "expression {} uses expression {}, not made before it", id, a);
    switch (e.kind) {
      case EKind::VarRef:
      case EKind::LocalRead:
        check(e.ref >= 0 && e.ref < static_cast<int32_t>(k_.vars.size()), "expression {} reads var {}", id, e.ref);
        check(k_.vars[e.ref].kind != VarKind::Mbarriers, "expression {} reads mbarriers {} as values", id,
              k_.vars[e.ref].name);
        break;
      case EKind::Load:
        check(e.ref >= 0 && e.ref < static_cast<int32_t>(k_.tensors.size()), "expression {} loads tensor {}", id, e.ref);
        break;
      case EKind::Argument:
        check(e.ref >= 0 && e.ref < static_cast<int32_t>(k_.arguments.size()), "expression {} reads argument {}",
              id, e.ref);
        break;
      case EKind::CheckedIndex:
        check(k_.index_errors && k_.tensors[*k_.index_errors].index_errors,
              "expression {} checks an index, but the kernel has no index-error record", id);
        break;
      case EKind::ClusterRank: check(k_.cluster > 1, "expression {} reads the cluster rank of a kernel without clusters", id); break;
      default: break;
    }
  }

  // The vars an expression reads (memoized: expressions form a DAG).
  const std::vector<VarId>& varsOf(ExprId id) {
    if (auto it = vars_of_.find(id); it != vars_of_.end()) return it->second;
    std::vector<VarId> vars;
    const KExpr& e = k_.exprs[id];
    if (e.kind == EKind::VarRef || e.kind == EKind::LocalRead) vars.push_back(e.ref);
    for (ExprId a : e.args) {
      for (VarId v : varsOf(a)) vars.push_back(v);
    }
    std::sort(vars.begin(), vars.end());
    vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
    return vars_of_.emplace(id, std::move(vars)).first->second;
  }

  void uses(ExprId id, const char* where) {
    if (id < 0) return;
    check(id < static_cast<ExprId>(k_.exprs.size()), "{} uses expression {}, which does not exist", where, id);
    for (VarId v : varsOf(id)) {
      check(defined_.count(v) != 0, "{} reads {} where it is not defined", where, k_.vars[v].name);
    }
  }

  // A var holds values of its dtype's kind: the simulator keeps floats and integers apart (a Bool `true`
  // written into a Float accumulator would read as 0 there), and C++ would convert where it does not.
  void holds(VarId v, ExprId value, const char* where) {
    if (v < 0 || value < 0 || value >= static_cast<ExprId>(k_.exprs.size())) return;
    const KVar& var = k_.vars.at(v);
    const KExpr& e = k_.exprs[value];
    check(var.index == e.index && isFloating(var.dtype) == isFloating(e.dtype),
          "{} stores a {}{} value in {}, a {}{}", where, e.index ? "index " : "", toString(e.dtype), var.name,
          var.index ? "index " : "", toString(var.dtype));
  }

  void define(VarId v, VarKind kind, const char* where) {
    check(v >= 0 && v < static_cast<VarId>(k_.vars.size()), "{} defines var {}, which does not exist", where, v);
    check(k_.vars[v].kind == kind, "{} defines {} as the wrong kind of var", where, k_.vars[v].name);
    defined_.insert(v);
  }

  void writes(TensorId t, const char* where) {
    check(t >= 0 && t < static_cast<TensorId>(k_.tensors.size()), "{} writes tensor {}, which does not exist", where, t);
    const TensorParam& p = k_.tensors[t];
    check(p.output || p.workspace, "{} writes {}, an input of the kernel", where, p.name);
  }

  void vector(const Stmt& s, const char* where) {
    const int64_t bytes = s.width * sizeOf(k_.tensors.at(s.tensor).dtype);
    check(s.width >= 1 && (s.width & (s.width - 1)) == 0 && bytes <= 16, "{} of {} x {} is not a 1-16 byte power of two",
          where, s.width, toString(k_.tensors[s.tensor].dtype));
  }

  void block(const std::vector<Stmt>& stmts) {
    const auto outer = defined_;  // what this block defines ends with it
    for (const Stmt& s : stmts) one(s);
    defined_ = outer;
  }

  void one(const Stmt& s) {
    switch (s.kind) {
      case SKind::Let:
        uses(s.a, "a let");
        define(s.var, VarKind::Scalar, "a let");
        holds(s.var, s.a, "a let");
        break;
      case SKind::Assign:
        uses(s.a, "an assignment");
        check(defined_.count(s.var) != 0, "assignment to {} before it is defined", k_.vars.at(s.var).name);
        holds(s.var, s.a, "an assignment");
        break;
      case SKind::Declare:
        check(s.var >= 0 && s.var < static_cast<VarId>(k_.vars.size()) && k_.vars[s.var].kind != VarKind::Scalar,
              "a declaration of var {}, which is not an array", s.var);
        defined_.insert(s.var);
        break;
      case SKind::LocalWrite:
        uses(s.a, "an array write");
        uses(s.b, "an array write");
        if (!k_.vars.at(s.var).storage) holds(s.var, s.b, "an array write");
        check(defined_.count(s.var) != 0, "a write to array {} before its declaration", k_.vars.at(s.var).name);
        check(k_.vars[s.var].kind != VarKind::Mbarriers, "a write to mbarriers {} as values", k_.vars[s.var].name);
        break;
      case SKind::For:
        uses(s.a, "a loop bound");
        uses(s.b, "a loop bound");
        uses(s.c, "a loop step");
        {
          const auto outer = defined_;
          define(s.var, VarKind::Scalar, "a loop");
          block(s.body);
          defined_ = outer;
        }
        break;
      case SKind::If:
        uses(s.a, "a condition");
        // One level of branches at once: the simulator interleaves two, not a tree of them.
        check(!s.concurrent || !in_concurrent_, "branches that run at once inside such branches");
        {
          const bool outer = in_concurrent_;
          in_concurrent_ = in_concurrent_ || s.concurrent;
          block(s.body);
          block(s.orelse);
          in_concurrent_ = outer;
        }
        break;
      case SKind::Store: uses(s.a, "a store"); uses(s.b, "a store"); writes(s.tensor, "a store"); break;
      case SKind::VecLoad:
        uses(s.a, "a vector load");
        uses(s.b, "a vector load");
        check(s.tensor >= 0 && s.tensor < static_cast<TensorId>(k_.tensors.size()), "a vector load of tensor {}",
              s.tensor);
        check(defined_.count(s.var) != 0, "a vector load into array {} before its declaration", k_.vars.at(s.var).name);
        vector(s, "a vector load");
        break;
      case SKind::VecStore:
        uses(s.a, "a vector store");
        uses(s.b, "a vector store");
        writes(s.tensor, "a vector store");
        check(defined_.count(s.var) != 0, "a vector store from array {} before its declaration",
              k_.vars.at(s.var).name);
        vector(s, "a vector store");
        break;
      case SKind::BlockReduce:
        check(defined_.count(s.var) != 0, "a block reduction of {} before it is defined", k_.vars.at(s.var).name);
        check(s.axis == 0 || s.axis == 1, "a block reduction over axis {}", s.axis);
        break;
      case SKind::Barrier:
      case SKind::Fence: break;
      case SKind::ClusterBarrier: check(k_.cluster > 1, "a cluster barrier in a kernel without clusters"); break;
      case SKind::AtomicAdd:
        uses(s.a, "an atomic add");
        uses(s.b, "an atomic add");
        writes(s.tensor, "an atomic add");
        define(s.var, VarKind::Scalar, "an atomic add");
        break;
      case SKind::SharedVecLoad: {
        uses(s.a, "a shared vector load");
        uses(s.b, "a shared vector load");
        check(s.target >= 0 && s.target < static_cast<int32_t>(k_.vars.size()) && defined_.count(s.target) != 0 &&
                  k_.vars[s.target].kind == VarKind::SharedArray && k_.vars[s.target].storage,
              "a shared vector load from var {}, not a declared shared array held as stored", s.target);
        check(defined_.count(s.var) != 0 && k_.vars.at(s.var).kind == VarKind::LocalArray &&
                  k_.vars[s.var].dtype == k_.vars[s.target].dtype,
              "a shared vector load into {}, not a declared local array of the shared array's dtype",
              k_.vars.at(s.var).name);
        // Constant positions are checked against both arrays; others the simulator checks as it runs.
        for (const auto& [position, array] : {std::pair{s.b, s.var}, std::pair{s.a, s.target}}) {
          const KExpr& at = k_.exprs.at(position);
          check(at.kind != EKind::ConstInt || (at.i >= 0 && at.i + s.width <= k_.vars[array].size),
                "a shared vector load of {} at {}[{}] past its end", s.width, k_.vars[array].name,
                at.kind == EKind::ConstInt ? at.i : -1);
        }
        const int64_t bytes = s.width * sizeOf(k_.vars[s.target].dtype);
        check(s.width >= 1 && (s.width & (s.width - 1)) == 0 && bytes <= 16 && divisibility(k_, s.a) % s.width == 0,
              "a shared vector load of {} x {} at {}: not a 1-16 byte power of two at a multiple of it", s.width,
              toString(k_.vars[s.target].dtype), s.a);
        break;
      }
      case SKind::SharedAtomicAdd:
        uses(s.a, "a shared atomic add");
        uses(s.b, "a shared atomic add");
        check(s.target >= 0 && s.target < static_cast<int32_t>(k_.vars.size()) && defined_.count(s.target) != 0 &&
                  k_.vars[s.target].kind == VarKind::SharedArray && k_.vars[s.target].storage &&
                  k_.vars[s.target].dtype == DataType::Int32,
              "a shared atomic add into var {}, not a declared shared Int32 array held as stored", s.target);
        if (s.var >= 0) define(s.var, VarKind::Scalar, "a shared atomic add");
        break;
      case SKind::Mma: mma(s); break;
      case SKind::CpAsync: {
        uses(s.a, "a cp.async");
        uses(s.b, "a cp.async");
        uses(s.c, "a cp.async");
        const KVar& v = k_.vars.at(s.var);
        check(defined_.count(s.var) != 0 && v.kind == VarKind::SharedArray && v.storage,
              "a cp.async into {}, which is not a declared shared array of stored values", v.name);
        check(s.tensor >= 0 && s.tensor < static_cast<TensorId>(k_.tensors.size()) &&
                  k_.tensors[s.tensor].dtype == v.dtype,
              "a cp.async into {} ({}) from a tensor of another dtype", v.name, toString(v.dtype));
        const int64_t bytes = s.width * sizeOf(v.dtype);
        check(bytes == 4 || bytes == 8 || bytes == 16, "a cp.async of {} bytes (4, 8 or 16 are copied)", bytes);
        break;
      }
      case SKind::CpAsyncCommit: break;
      case SKind::CpAsyncWait: check(s.width >= 0, "a cp.async wait for {} groups", s.width); break;
      case SKind::Ldmatrix: ldmatrix(s); break;
      case SKind::Wgmma: wgmma(s); break;
      case SKind::WgmmaFence:
      case SKind::WgmmaCommit:
      case SKind::ProxyFence: break;
      case SKind::WgmmaWait: check(s.width >= 0, "a wgmma wait for {} groups", s.width); break;
      case SKind::MbarrierInit:
        mbarrier(s.var, s.a, "an mbarrier init");
        check(s.width >= 1, "an mbarrier initialized for {} arrivals", s.width);
        break;
      case SKind::MbarrierArriveExpectTx:
      case SKind::MbarrierWait:
        mbarrier(s.var, s.a, "an mbarrier arrive or wait");
        uses(s.b, "an mbarrier arrive or wait");
        if (s.kind == SKind::MbarrierArriveExpectTx && s.c >= 0) {
          uses(s.c, "an arrival on another block's mbarrier");
          const KExpr& bytes = k_.exprs.at(s.b);
          check(k_.cluster > 1 && bytes.kind == EKind::ConstInt && bytes.i == 0,
                "an arrival on mbarrier {} of another block of the cluster: in a kernel with clusters, with no "
                "transaction bytes",
                k_.vars.at(s.var).name);
        }
        break;
      case SKind::TmaLoad: tmaLoad(s); break;
      case SKind::SetMaxNReg:
        check(s.width >= 24 && s.width <= 256 && s.width % 8 == 0,
              "setmaxnreg to {} registers (a multiple of 8 in [24, 256])", s.width);
        check(k_.warp_size == 32 && k_.threadsPerBlock() % 128 == 0,
              "setmaxnreg in a kernel of {} threads per block (whole warpgroups of 32-lane warps)", k_.threadsPerBlock());
        break;
    }
  }

  void mbarrier(VarId var, ExprId at, const char* where) {
    uses(at, where);
    check(var >= 0 && var < static_cast<VarId>(k_.vars.size()) && k_.vars[var].kind == VarKind::Mbarriers &&
              defined_.count(var) != 0,
          "{} on var {}, which is not declared mbarriers", where, var);
  }

  // A declared shared array of the tensor's stored values, the box within TMA's limits (at most 256 per
  // dim, rows of a multiple of 16 bytes; a swizzled box 128 bytes wide, into a 1024-byte aligned pattern),
  // the tensor a 2D view with contiguous columns and 16-byte aligned rows.
  void tmaLoad(const Stmt& s) {
    for (ExprId e : {s.a, s.b, s.c}) uses(e, "a TMA load");
    check(s.multicast == 0 || (k_.cluster > 1 && s.multicast > 0 && s.multicast < (1 << k_.cluster)),
          "a TMA load multicast to cluster ranks {:#x} in clusters of {} blocks", s.multicast, k_.cluster);
    if (s.e >= 0) uses(s.e, "a TMA load");
    mbarrier(s.mma_operands[0], s.d, "a TMA load");
    check(k_.warp_size == 32, "a TMA load in a kernel for {}-lane wavefronts (TMA is NVIDIA's, sm_90)", k_.warp_size);
    check(s.tensor >= 0 && s.tensor < static_cast<TensorId>(k_.tensors.size()) && k_.tensors[s.tensor].tma.has_value(),
          "a TMA load of tensor {}, which has no TMA box", s.tensor);
    const TensorParam& t = k_.tensors[s.tensor];
    const KVar& v = k_.vars.at(s.var);
    check(defined_.count(s.var) != 0 && v.kind == VarKind::SharedArray && v.storage && v.dtype == t.dtype,
          "a TMA load of {} into {}, which is not a declared shared array of stored {} values", t.name, v.name,
          toString(t.dtype));
    const int64_t e = sizeOf(t.dtype), row_bytes = t.tma->box_columns * e;
    check(t.tma->box_rows >= 1 && t.tma->box_rows <= 256 && t.tma->box_columns >= 1 && t.tma->box_columns <= 256 &&
              row_bytes % 16 == 0,
          "{}'s TMA box of {}x{} (at most 256 per dim, rows a multiple of 16 bytes)", t.name, t.tma->box_rows,
          t.tma->box_columns);
    check(!t.tma->swizzle || (row_bytes == 128 && v.shared_offset % 1024 == 0),
          "{}'s swizzled TMA box rows are {} bytes into {} at shared byte {} (128 bytes, 1024-byte aligned)", t.name,
          row_bytes, v.name, v.shared_offset);
    check(v.shared_offset % 128 == 0, "a TMA load into {} at shared byte {} (128-byte aligned)", v.name, v.shared_offset);
    const StridedLayout& map = t.tma->map;
    const size_t rank = map.sizes.size();
    const bool strided = rank >= 2 && map.strides.size() == rank && map.strides[rank - 1] == 1 &&
                         std::all_of(map.strides.begin(), map.strides.end() - 1, [&](int64_t s) { return s * e % 16 == 0; });
    check((rank == 2 || rank == 3) && strided && map.offset * e % 16 == 0 && t.alignment_bytes % 16 == 0 &&
              std::all_of(map.sizes.begin(), map.sizes.end(), [](int64_t n) { return n >= 1; }),
          "{} is read by TMA as [{}] with strides [{}] from element {}: a 2D or 3D tensor with contiguous columns "
          "and 16-byte aligned rows, batches and start",
          t.name, fmt::join(map.sizes, ", "), fmt::join(map.strides, ", "), map.offset);
    check((s.e >= 0) == (rank == 3), "a TMA load of {} ({}D map) with{} a batch coordinate", t.name, rank,
          s.e >= 0 ? "" : "out");
  }

  // Whole warpgroups; operands of one dtype wgmma takes in declared shared arrays at 1024-byte
  // multiples (mn-major for 16-bit ones only); accumulators of the mma's accumulator dtype, n / 2 per thread.
  void wgmma(const Stmt& s) {
    uses(s.a, "a wgmma");
    uses(s.b, "a wgmma");
    check(k_.warp_size == 32 && k_.threadsPerBlock() % 128 == 0, "wgmma needs whole warpgroups of 128 threads; the kernel has {}",
          k_.threadsPerBlock());
    const DataType operand = k_.vars.at(s.mma_operands[0]).dtype;
    const bool eight = sizeOf(operand) == 1;
    check(s.width >= 8 && s.width <= 256 && s.width % (eight && s.width > 32 ? 16 : 8) == 0,
          "wgmma.m64n{}k{}: n must be a multiple of 8 in [8, 256] (of 16 above 32 for 8-bit operands)", s.width,
          wgmmaK(sizeOf(operand)));
    for (int i = 0; i < 2; ++i) {
      const KVar& v = k_.vars.at(s.mma_operands[i]);
      check(v.kind == VarKind::SharedArray && v.storage && defined_.count(s.mma_operands[i]) != 0,
            "wgmma reads {}, which is not a declared shared array of stored values", v.name);
      check(wgmmaTakes(v.dtype) && v.dtype == operand, "wgmma of {} and {} operands (two of bf16, f16, s8, u8, e4m3fn or e5m2)",
            toString(operand), toString(v.dtype));
      check(!s.wgmma_operands[i].mn_major || wgmmaTakesMnMajor(v.dtype), "an mn-major wgmma operand of {} (16-bit only)",
            toString(v.dtype));
      check(v.shared_offset % 1024 == 0, "wgmma operand {} starts at shared byte {}, not a multiple of 1024 (its swizzle pattern)",
            v.name, v.shared_offset);
    }
    const DataType accumulator = mmaAccumulator(eight ? MmaShape::M16N8K32 : MmaShape::M16N8K16, operand);
    const KVar& d = k_.vars.at(s.var);
    check(d.kind == VarKind::LocalArray && d.dtype == accumulator && d.size == s.width / 2 && defined_.count(s.var) != 0,
          "wgmma.m64n{} accumulates into {}, which is not a declared local array of {} {} values", s.width, d.name, s.width / 2,
          toString(accumulator));
  }

  void ldmatrix(const Stmt& s) {
    uses(s.a, "an ldmatrix");
    uses(s.b, "an ldmatrix");
    const KVar& from = k_.vars.at(s.mma_operands[0]);
    const KVar& to = k_.vars.at(s.var);
    check(k_.warp_size == 32 && k_.threadsPerBlock() % 32 == 0, "ldmatrix needs whole 32-lane warps");
    check(from.kind == VarKind::SharedArray && from.storage && defined_.count(s.mma_operands[0]) != 0,
          "ldmatrix reads {}, which is not a declared shared array of stored values", from.name);
    const bool sixteen = from.dtype == DataType::BFloat16 || from.dtype == DataType::Half;
    const bool eight = from.dtype == DataType::Int8 || from.dtype == DataType::UInt8 ||
                       from.dtype == DataType::Float8_e4m3fn || from.dtype == DataType::Float8_e5m2;
    check(sixteen || (eight && !s.transpose),
          "ldmatrix{} of {} values (bf16 or f16, or s8, u8, e4m3fn or e5m2 without .trans)",
          s.transpose ? ".trans" : "", toString(from.dtype));
    check(s.width == 1 || s.width == 2 || s.width == 4, "ldmatrix of {} matrices (1, 2 or 4)", s.width);
    const int64_t per = 4 / sizeOf(from.dtype);
    check(to.kind == VarKind::LocalArray && to.dtype == from.dtype && to.size >= s.width * per &&
              defined_.count(s.var) != 0,
          "ldmatrix into {}, which is not a declared local array of at least {} {} values", to.name, s.width * per,
          toString(from.dtype));
  }

  // Each fragment a declared local array of its size and dtype; a warp of 32 lanes, whole warps per block.
  void mma(const Stmt& s) {
    const MmaDims dims = mmaDims(s.mma_shape);
    const std::string shape(toString(s.mma_shape));
    check(k_.warp_size == 32 && k_.threadsPerBlock() % 32 == 0,
          "mma.{} needs whole 32-lane warps; the kernel has a warp of {} and {} threads per block", shape, k_.warp_size,
          k_.threadsPerBlock());
    const DataType operand = k_.vars.at(s.mma_operands[0]).dtype;
    const DataType accumulator = mmaAccumulator(s.mma_shape, operand);
    check(mmaTakes(s.mma_shape, operand), "mma.{} does not take operands of dtype {}", shape, toString(operand));
    const struct {
      VarId var;
      int64_t size;
      DataType dtype;
      const char* role;
      int64_t offset;
    } fragments[] = {{s.mma_operands[0], dims.a_values, operand, "A", 0},
                     {s.mma_operands[1], dims.b_values, operand, "B", s.b_offset},
                     {s.mma_operands[2], dims.c_values, accumulator, "C", 0},
                     {s.var, dims.c_values, accumulator, "D", 0}};
    // B's array may hold two n-tiles' fragments (one ldmatrix.x4 loads both): the mma reads from b_offset.
    check(s.b_offset == 0 || s.b_offset == dims.b_values, "mma.{}: B fragment offset {} is neither 0 nor {}", shape,
          s.b_offset, dims.b_values);
    for (const auto& f : fragments) {
      const KVar& v = k_.vars.at(f.var);
      const bool size_ok = f.offset == 0 && f.var != s.mma_operands[1] ? v.size == f.size
                                                                       : v.size == f.size || v.size == 2 * f.size;
      check(v.kind == VarKind::LocalArray && size_ok && v.dtype == f.dtype,
            "mma.{}: its {} fragment must be a local array of {} {} values, got {} ({} values of {})", shape, f.role,
            f.size, toString(f.dtype), v.name, v.size, toString(v.dtype));
      check(defined_.count(f.var) != 0, "mma.{}: its {} fragment {} is used before its declaration", shape, f.role,
            v.name);
    }
  }

  const Kernel& k_;
  std::unordered_set<VarId> defined_;
  bool in_concurrent_ = false;  // inside an if whose branches run at once
  std::unordered_map<ExprId, std::vector<VarId>> vars_of_;
};

}  // namespace

void verifyKernel(const Kernel& kernel) { KernelVerifier(kernel).run(); }

}  // namespace braze::kernel
