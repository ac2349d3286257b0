// The kernel IR: one kernel as its two consumers (the CUDA emitter and the CPU simulator) need it.
// Typed scalar expressions (interned, so equal index arithmetic is one node), statements (let, for,
// if, loads and stores, vector loads and stores, block reductions, barriers, and the warp-level matrix
// statements: mma.sync, cp.async with its commit and wait, ldmatrix, and the warpgroup's wgmma with its
// fences, commit and wait), tensor parameters with
// the layout the kernel was specialized for, and a fixed launch shape. Kernels are specialized on
// sizes and strides (like torch.compile with static shapes): index arithmetic folds to constants,
// except for the counts a lowering leaves open (the row count of a reduction, the element count of a
// pointwise kernel) and the fusion's scalar inputs: those are launch arguments, so shapes and scalar
// values differing only there share one source.
#pragma once

#include "ir/data_type.h"
#include "kernel/mma_fragments.h"
#include "kernel/wgmma.h"
#include "ir/op_kind.h"
#include "ir/val.h"
#include "ir/strided_layout.h"
#include "support/by_id.h"
#include "support/shared_vector.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <unordered_map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace braze::kernel {

using ExprId = int32_t;
using VarId = int32_t;
using TensorId = int32_t;

enum class EKind : uint8_t {
  ConstInt,     // index or integer constant (i)
  ConstFloat,   // floating constant (f)
  ConstBool,    // (i)
  VarRef,       // a local scalar or loop variable (var)
  ThreadIdx,    // threadIdx.{x,y} (axis in i)
  BlockIdx,     // blockIdx.{x,y}
  // Index and predicate arithmetic on `index` values (and bools).
  Add, Sub, Mul, Div, Mod, Min, Lt, Le, Eq, And, Or, Not, Select,
  Xor,          // bitwise exclusive or of two non-negative index values (a swizzled shared tile's chunk)
  BitAnd,       // bitwise and of two non-negative index values (the low bits of a slot)
  Elementwise,  // an OpKind on compute values (op), result of Val dtype `dtype`
  Cast,         // a compute value of dtype `from` to `dtype`
  IndexToValue, // an index value as a value of `dtype` (iota, gathers' index as data)
  ValueToIndex, // an integer value used as an index
  Load,         // tensor[offset] converted to its compute type (tensor, a = offset)
  LocalRead,    // array[a] (a thread's local array, or the block's shared array)
  Argument,     // a scalar passed at launch: kernel.arguments[ref]
  RandomUnit,   // a Double of Philox (ir/random_numbers.h) at (seed, offset, i) (Int64 values): op Uniform
                // gives uniformUnit, op Normal standardNormal
  Fma,          // a * b + c of Float values, rounded once: where the kernel's own order of summation stands
                // (a GEMV's dot products), not an op of the fusion, which rounds each op's result
  CheckedIndex, // an integer value args[0] (as read, before it narrows to an index) that must lie in [0, args[1]):
                // outside, the kernel records it in its index-error record (kernel/index_errors.h) under site
                // code i, and the index is 0
  WarpUniform,  // an index args[0] that every lane of a warp holds alike, taken from lane 0 (__shfl_sync): the
                // compiler then knows that branches on it do not diverge (a warp-specialized block's roles)
  OrderKey,     // an index in [0, 2^32) that orders as the Float value args[0] does: larger for larger, NaN
                // above every number, -0 the same as +0 (a radix select's digits)
  ClusterRank,  // the block's place in its cluster (%cluster_ctarank): blockIdx.x % Kernel::cluster
};

// An expression's operands: four inline (index arithmetic takes two, select and fma three), a longer
// list on the heap. Lowering builds and interns every expression it considers (about two thousand for
// a layer-norm backward plan), most of them found already interned: a heap list each showed up as
// allocation in profiles of planning a new signature.
class ExprArgs {
 public:
  ExprArgs() = default;
  ExprArgs(std::initializer_list<ExprId> ids) { assign(ids.begin(), ids.end()); }
  ExprArgs(const std::vector<ExprId>& ids) { assign(ids.data(), ids.data() + ids.size()); }  // NOLINT: implicit
  ExprArgs(const ExprArgs& other) { assign(other.begin(), other.end()); }
  ExprArgs& operator=(const ExprArgs& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  ExprArgs(ExprArgs&& other) noexcept { *this = std::move(other); }
  ExprArgs& operator=(ExprArgs&& other) noexcept {
    if (this == &other) return *this;
    size_ = other.size_;
    inline_ = other.inline_;
    heap_ = std::move(other.heap_);
    other.size_ = 0;
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const ExprId* begin() const { return size_ > kInline ? heap_.data() : inline_.data(); }
  const ExprId* end() const { return begin() + size_; }
  ExprId* begin() { return size_ > kInline ? heap_.data() : inline_.data(); }
  ExprId* end() { return begin() + size_; }
  ExprId operator[](size_t i) const { return begin()[i]; }
  ExprId& operator[](size_t i) { return begin()[i]; }
  void push_back(ExprId id) {
    if (size_ == kInline) heap_.assign(inline_.begin(), inline_.end());
    if (size_ >= kInline) {
      heap_.push_back(id);
    } else {
      inline_[size_] = id;
    }
    ++size_;
  }
  bool operator==(const ExprArgs& other) const { return std::equal(begin(), end(), other.begin(), other.end()); }

 private:
  static constexpr size_t kInline = 4;
  void assign(const ExprId* first, const ExprId* last) {
    size_ = 0;
    heap_.clear();
    for (; first != last; ++first) push_back(*first);
  }
  std::array<ExprId, kInline> inline_{};
  size_t size_ = 0;
  std::vector<ExprId> heap_;  // every operand, when there are more than kInline
};

struct KExpr {
  EKind kind = EKind::ConstInt;
  DataType dtype = DataType::Int64;  // the value's dtype; index values are Int64 with index = true
  bool index = false;
  OpKind op = OpKind::Add;   // Elementwise
  DataType from = DataType::Null;  // Cast
  int64_t i = 0;             // ConstInt/ConstBool value; ThreadIdx/BlockIdx axis
  double f = 0;              // ConstFloat
  int32_t ref = -1;          // VarRef/LocalRead: var; Load: tensor; Argument: argument
  ExprArgs args;  // operands
};

// Mbarriers: `size` mbarrier objects (8 bytes each) in the block's shared memory, at shared_offset: the
// phases TMA copies complete and threads wait on (SKind::Mbarrier*).
enum class VarKind : uint8_t { Scalar, LocalArray, SharedArray, Mbarriers };

struct KVar {
  std::string name;
  DataType dtype = DataType::Float;
  bool index = false;
  VarKind kind = VarKind::Scalar;
  int64_t size = 0;  // arrays
  int64_t shared_offset = 0;  // SharedArray: byte offset in the block's dynamic shared memory
  // A shared array holding its values as stored in global memory (bf16 bits, int8 bytes) rather than
  // in their compute type: what cp.async copies into and ldmatrix reads.
  bool storage = false;
};

enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, Any, All };
std::string_view toString(ReduceOp op);
// The elementwise op that combines two partial results of a reduction (sum -> add, max -> maximum).
OpKind combineOf(ReduceOp op);

enum class SKind : uint8_t {
  Let,        // var = a (declares)
  Assign,     // var = a
  Declare,    // declares an array var (a shared array: its pointer into the block's shared memory)
  LocalWrite, // var[a] = b (local or shared array)
  For,        // for var in [a, b) step c (unrolled when `unroll`)
  If,         // if a { body } else { orelse }
  Store,      // tensor[a] = b (converted to the tensor's storage type)
  VecLoad,    // var[b .. b+width) = tensor[a .. a+width)   (one `width`-element aligned access)
  VecStore,   // tensor[a .. a+width) = var[b .. b+width)
  BlockReduce,// var = reduce(op, var) over the threads that share the other thread index (axis)
  Barrier,
  Fence,      // makes this thread's global writes visible to the other blocks before what follows
  AtomicAdd,  // declares var = the old value of tensor[a] (an Int32 tensor), which becomes tensor[a] + b
  // declares var = the old value of target[a] (a shared Int32 array held as stored: an int in the emitted
  // code), which becomes target[a] + b. Such adds
  // to one element from several threads between two barriers are not a race; any other access is.
  SharedAtomicAdd,
  Mma,        // var (D) = mma_operands A B + C, local arrays holding each lane's fragments (mma_fragments.h); every
              // lane of the warp takes part
  // Asynchronous copies into shared memory (sm_80 on): var[b .. b+width) = tensor[a .. a+width), of
  // which only the first c bytes are read (c in [0, width bytes]), the rest zero-filled; width bytes is
  // 4, 8 or 16, both addresses aligned to it. The copy lands at some point before the cp.async wait that
  // covers its group: reading the elements earlier is an error (the simulator reports it).
  CpAsync,
  CpAsyncCommit,  // closes this thread's group of the cp.asyncs issued since the last commit
  CpAsyncWait,    // waits until at most `width` of this thread's committed groups are still in flight
  // ldmatrix.m8n8 (b16 units): each lane of the warp gives, at a, the element index in shared array
  // mma_operands[0] of one 16-byte matrix row (lane l: row l % 8 of matrix l / 8; `width` matrices, 1,
  // 2 or 4); lane l receives from matrix j the 4 bytes of row l / 4 at byte 4 (l % 4), into var[b + j *
  // per + i], per = 4 bytes in elements. `transpose` (16-bit elements only): it receives the elements of
  // column l / 4 at rows 2 (l % 4) and 2 (l % 4) + 1 instead.
  Ldmatrix,
  // wgmma.mma_async (sm_90a, kernel/wgmma.h): each warpgroup (four consecutive warps) of the block
  // adds the product of a 64 x 16 A and a 16 x `width` B, both read from shared memory where the
  // operands' descriptions (wgmma_operands) put them, starting at element a of shared array
  // mma_operands[0] and element b of mma_operands[1], to its accumulators var (width / 2 Float values per
  // thread). Asynchronous: the shared elements are read, and the accumulators written, at some point
  // before the wgmma wait that covers its group; touching either earlier is an error.
  Wgmma,
  WgmmaFence,   // orders this thread's earlier register accesses (var: the accumulators, or -1) before the
                // wgmmas that follow
  WgmmaCommit,  // closes the warpgroup's group of the wgmmas issued since the last commit
  WgmmaWait,    // waits until at most `width` of the warpgroup's committed groups are still in flight (var:
                // the accumulators they write, or -1)
  // Makes this thread's shared memory writes (stores, landed cp.asyncs) visible to the asynchronous
  // proxy that wgmma reads through (fence.proxy.async.shared::cta): needed between them and the barrier
  // after which a wgmma reads them.
  ProxyFence,
  // Mbarriers (sm_90): mbarrier var[a] made ready for `width` arrivals per phase, its phase 0 open. One
  // thread initializes; a barrier must follow before any other thread uses it.
  MbarrierInit,
  // This thread arrives on mbarrier var[a] and adds b bytes to what its current phase waits for: the
  // phase completes once every arrival is in and that many bytes of TMA copies have landed. With c (an
  // index, c >= 0): the mbarrier var[a] of the cluster's block of rank c instead (distributed shared
  // memory; b is then 0), as a block tells the others that a stage they copy into is free.
  MbarrierArriveExpectTx,
  // Waits until the phase of mbarrier var[a] with parity b (0 or 1) has completed: the copies it counted
  // are then visible to this thread.
  MbarrierWait,
  // A TMA load (cp.async.bulk.tensor.2d, or .3d for a map with a batch dim): the box of tensor `tensor`
  // (TensorParam::tma) at element column b and row c (and batch e of a 3D map), out-of-range elements as
  // zeros, into shared array var from element a (a storage array; rows of the box one after the other,
  // each 128-byte row swizzled like a wgmma operand where the box is swizzled). It completes its bytes on
  // mbarrier mma_operands[0][d]; its elements may be read only after a wait on the phase that counted them.
  // With `multicast` (a mask of cluster ranks), the box lands at the same place in the shared memory of
  // each block of the cluster it names, completing its bytes on each one's mbarrier mma_operands[0][d].
  TmaLoad,
  // setmaxnreg (sm_90a): this warpgroup's registers per thread become `width` (a multiple of 8 in [24,
  // 256]); `axis` 1 raises them (waiting for registers another warpgroup gave back), 0 lowers them. Every
  // thread of the warpgroup executes it, none with wgmmas in flight.
  SetMaxNReg,
  // var[b .. b+width) = target[a .. a+width): one `width`-element aligned read (1 to 16 bytes) of shared
  // array `target`, held as stored (what cp.asyncs filled), into a local array of compute values.
  SharedVecLoad,
  // Every thread of every block of the cluster (Kernel::cluster) arrives and waits (barrier.cluster, release
  // and acquire): what the cluster's blocks did before it, mbarrier inits included, is visible to all of
  // them after it. One must follow the inits of mbarriers other blocks arrive on or copy to, and one must
  // end a kernel whose blocks do so, so that no block exits while another still writes its shared memory.
  ClusterBarrier,
};

struct Stmt {
  SKind kind = SKind::Let;
  VarId var = -1;
  TensorId tensor = -1;
  ExprId a = -1, b = -1, c = -1;
  ExprId d = -1;              // TmaLoad: the mbarrier's index
  ExprId e = -1;              // TmaLoad: the batch coordinate of a 3D map (-1 for a 2D one)
  int32_t width = 1;
  bool unroll = false;
  int32_t axis = 0;           // BlockReduce: 0 reduces across threadIdx.x, 1 across threadIdx.y
  bool transpose = false;     // Ldmatrix
  // If: the branches run at once (a warp-specialized block's roles), each free to wait on mbarriers the
  // other arrives on. The simulator interleaves them, switching where one waits; a GPU's warps run apart.
  bool concurrent = false;
  ReduceOp reduce = ReduceOp::Sum;
  MmaShape mma_shape = MmaShape::M16N8K16;
  std::array<VarId, 3> mma_operands{-1, -1, -1};  // Mma: the A, B and C fragment arrays
  int32_t b_offset = 0;       // Mma: the B fragment's first element in its array (one array for two n-tiles)
  std::array<WgmmaOperand, 2> wgmma_operands{};  // Wgmma: how A and B lie in shared memory
  VarId target = -1;          // SharedAtomicAdd: the shared array added to
  int32_t multicast = 0;      // TmaLoad: bit r names the cluster's block of rank r; 0: this block only
  std::vector<Stmt> body{}, orelse{};
};

// The type kernels hold a value of `dtype` in: Float for Half/BFloat16/Float/fp8, Double, Int64 for
// every integer type, Bool.
DataType computeTypeOf(DataType dtype);

struct TensorParam {
  std::string name;       // "T3"
  DataType dtype = DataType::Float;
  bool output = false;
  const Val* val = nullptr;      // the segment's input or output it stands for
  const Val* storage = nullptr;  // whose buffer is passed: val, or the fusion input an alias view reads
  StridedLayout layout;      // what the kernel indexes: sizes, strides and offset in elements from the bound pointer
  int64_t alignment_bytes = 16;
  // Scratch memory of the kernel itself (grid reduction partials and semaphores): no Val, sized by
  // `layout`, allocated by whoever launches. `zeroed`: must be all zeros at the first launch; the kernel
  // leaves it zeroed again, so one allocation serves every launch.
  bool workspace = false;
  bool zeroed = false;
  // A workspace the segment's next kernel reads (a finishing pass over partial results): the launcher
  // binds every kernel of one segment that names a shared workspace alike to the same memory.
  bool shared = false;
  // The device's index-error record (kernel/index_errors.h) that checked indices report to: no Val,
  // one Int64 word, bound by whoever launches.
  bool index_errors = false;
  // Read by TMA loads too (SKind::TmaLoad): the tensor's memory seen as the tensor map `map` ([rows,
  // columns] or [batch, rows, columns], columns contiguous, in elements from the bound pointer: the
  // tensor's own layout, or a view of it such as a matmul operand's matrices) in boxes of one batch's
  // `box_rows` x `box_columns` elements, 128-byte swizzled where `swizzle` (box_columns then fills exactly
  // 128 bytes). The kernel takes the map as a parameter of its own, after the scalar arguments; whoever
  // launches encodes it for the bound pointer (kernel/tensor_map.h), and TMA reads that map.
  struct TmaBox {
    int64_t box_rows = 0, box_columns = 0;
    bool swizzle = false;
    StridedLayout map;
  };
  std::optional<TmaBox> tma = std::nullopt;
};

// A scalar parameter of the kernel, after the tensor parameters, with this launch's value: an index the
// source leaves open (idx_t), or a scalar input of the fusion (its dtype's compute type).
struct ScalarArgument {
  std::string name;
  bool index = true;
  DataType dtype = DataType::Int64;  // not an index: the value's dtype
  ScalarValue value = int64_t{0};
  // The fusion's scalar input it carries, if one: a launch may pass that input's value of its own run.
  const Val* input = nullptr;
};

struct Kernel {
  std::string name;
  std::vector<TensorParam> tensors;
  std::vector<ScalarArgument> arguments;
  // The code: shared by a kernel's copies (a relaunch's, a plan's) until one writes it.
  SharedVector<KExpr> exprs;
  SharedVector<KVar> vars;
  SharedVector<Stmt> body;
  std::array<int64_t, 2> grid{1, 1};
  std::array<int64_t, 2> block{1, 1};
  // Blocks per thread block cluster (sm_90), consecutive along the grid's x (a multiple of it): they run at
  // once, on one GPC, and may arrive on each other's mbarriers and copy into each other's shared memory
  // (SKind::ClusterBarrier, remote arrivals, multicast TMA loads). 1: no clusters.
  int64_t cluster = 1;
  bool index64 = false;     // 64-bit index arithmetic (some tensor has 2^31 elements or more)
  int64_t warp_size = 32;   // lanes per warp (wavefront) of the device it was lowered for
  int64_t vectorize = 1;    // elements per vector access along the innermost dim
  int64_t shared_bytes = 0; // dynamic shared memory per block: the SharedArray vars, 16-byte aligned
  // The heuristics, one line, without the grid: the comment that heads the source (which is the
  // compiled-kernel cache's key, so it holds nothing a launch of the same code may change).
  std::string summary;
  // Uses instructions of the arch-specific target (wgmma: sm_90a), whose cubin runs on that arch only.
  bool arch_specific = false;
  // Whether index values read from tensors are checked (KernelBuilder::checkedIndex); false trusts
  // them, for speed (HeuristicTuning::index_checks). The parameter of the index-error record, where the
  // kernel checks some.
  bool check_indices = true;
  std::optional<TensorId> index_errors;

  int64_t threadsPerBlock() const { return block[0] * block[1]; }
};

// The scalar arguments as a launch passes them: one 8-byte word each, the kernel parameter pointing at
// its word. A parameter narrower than 8 bytes (a 32-bit idx_t, a float, a bool) reads the low bytes,
// which hold its value on a little-endian host (every host CUDA supports).
std::vector<uint64_t> argumentWords(const Kernel& kernel);
// One argument's word for `value` (argumentWords of its own value, or a run's value of its input).
uint64_t argumentWord(const ScalarArgument& argument, const ScalarValue& value);
// The inverse: the arguments' values from the words a launch passed (one per argument).
std::vector<ScalarValue> decodeArgumentWords(const Kernel& kernel, const uint64_t* words);

// Per expression of `kernel`, whether a statement uses it (directly or as an operand's operand). Lowering
// interns expressions it then leaves unused; the emitted source names only the reached ones, and nothing
// about the kernel's code depends on the others.
std::vector<bool> reachedExpressions(const Kernel& kernel);

// The arch NVRTC compiles `kernel` for on a device of arch `device_arch` ("sm_90" -> "sm_90a" for a
// kernel using arch-specific instructions).
std::string compileArch(const Kernel& kernel, const std::string& device_arch);

// The summary with this launch's grid and index arguments: what explain and the dumps print.
std::string launchSummary(const Kernel& kernel);

// Builds a kernel's expressions and statements: interns expressions, folds constant index math,
// and appends statements to the innermost open block.
// The largest power of two (up to 2^20) known to divide index expression `id` of `kernel`. `bound`, when
// given, returns the value a scalar var is assigned once (looked through), or nothing.
int64_t divisibility(const Kernel& kernel, ExprId id, const std::function<std::optional<ExprId>(VarId)>& bound = {});

class KernelBuilder {
 public:
  explicit KernelBuilder(Kernel& kernel) : k_(kernel) {}
  Kernel& kernel() { return k_; }
  const KExpr& expr(ExprId id) const { return k_.exprs[id]; }

  ExprId index(int64_t value);
  ExprId boolean(bool value);
  ExprId constant(double value, DataType dtype);
  ExprId constantInt(int64_t value, DataType dtype);
  ExprId threadIdx(int axis);
  ExprId blockIdx(int axis);
  ExprId ref(VarId var);
  ExprId add(ExprId a, ExprId b);
  ExprId sub(ExprId a, ExprId b);
  ExprId mul(ExprId a, ExprId b);
  ExprId div(ExprId a, ExprId b);
  ExprId mod(ExprId a, ExprId b);
  ExprId min(ExprId a, ExprId b);
  ExprId lt(ExprId a, ExprId b);
  ExprId le(ExprId a, ExprId b);
  ExprId eq(ExprId a, ExprId b);
  ExprId land(ExprId a, ExprId b);
  ExprId lor(ExprId a, ExprId b);
  ExprId lnot(ExprId a);
  ExprId select(ExprId cond, ExprId a, ExprId b);
  ExprId bitXor(ExprId a, ExprId b);  // both non-negative
  ExprId bitAnd(ExprId a, ExprId b);  // both non-negative
  ExprId warpUniform(ExprId a);       // EKind::WarpUniform
  ExprId orderKey(ExprId value);      // EKind::OrderKey of a Float value
  ExprId clusterRank();               // EKind::ClusterRank
  ExprId elementwise(OpKind op, DataType dtype, ExprArgs args);
  ExprId cast(ExprId value, DataType to);
  ExprId fma(ExprId a, ExprId b, ExprId c);  // Float
  ExprId indexToValue(ExprId index, DataType dtype);
  ExprId valueToIndex(ExprId value);
  // `value` where it lies in [0, extent); elsewhere 0, and the kernel reports the value under `site`, a
  // message naming the op, the tensor and the dim (the first call adds the index-error record). Without
  // Kernel::check_indices, `value` as it is.
  ExprId checkedIndex(ExprId value, ExprId extent, const std::string& site);
  ExprId randomUnit(OpKind op, ExprId seed, ExprId offset, ExprId i);
  ExprId load(TensorId tensor, ExprId offset);
  ExprId localRead(VarId array, ExprId at);
  // An index the kernel receives at launch (value: this launch's): the source does not contain it.
  ExprId extent(std::string name, int64_t value);
  // A value of `dtype` the kernel receives at launch: the scalar input `input` of the fusion.
  ExprId scalarArgument(const Val* input, DataType dtype, ScalarValue value);

  std::optional<int64_t> constValue(ExprId id) const;
  // The range an index value stays in, where it is known: constants, thread and block indices, loop
  // variables and lets of those, through + - * / % min and selects (index_bounds.cpp). Comparisons,
  // / and % fold with it, so a bounds test that always holds (a cat's piece over its whole range)
  // costs nothing. Launch arguments have no range: a kernel's code never depends on their values.
  struct Bounds {
    int64_t lo = 0, hi = 0;
  };
  std::optional<Bounds> bounds(ExprId id) const;
  // Fixes the kernel's block (Kernel::block) before its code is built, so threadIdx has the block's
  // range: a test of a thread's element against a length its threads always stay under folds away.
  void fixBlock(int64_t x, int64_t y);
  // The largest power of two (up to 2^20) known to divide the index value: what vectorized accesses need.
  int64_t divisibility(ExprId id) const;

  VarId scalarVar(std::string prefix, DataType dtype, bool is_index = false);
  VarId arrayVar(std::string prefix, DataType dtype, int64_t size, VarKind kind = VarKind::LocalArray);
  // A shared array of `size` values held as stored in global memory (KVar::storage), `alignment`-byte
  // aligned (at least 128; a wgmma operand's 128-byte swizzle repeats every 1024 bytes).
  VarId sharedStorageArray(std::string prefix, DataType dtype, int64_t size, int64_t alignment = 128);
  TensorId addTensor(TensorParam param);

  // Statements go to the innermost open block.
  void let(VarId var, ExprId value);
  ExprId letValue(std::string prefix, ExprId value);  // a new scalar var holding value, as an expression
  // The value letValue bound `var` to (it is assigned nothing else), if it made var.
  std::optional<ExprId> boundValue(VarId var) const {
    const ExprId value = entryOr(bound_values_, static_cast<size_t>(var), ExprId{-1});  // var -1: none
    return value < 0 ? std::nullopt : std::optional<ExprId>(value);
  }
  void assign(VarId var, ExprId value);
  void declare(VarId array);
  void localWrite(VarId array, ExprId at, ExprId value);
  void store(TensorId tensor, ExprId offset, ExprId value);
  void vecLoad(VarId array, ExprId at, TensorId tensor, ExprId offset, int width);
  void vecStore(TensorId tensor, ExprId offset, VarId array, ExprId at, int width);
  void sharedVecLoad(VarId array, ExprId at, VarId shared, ExprId from, int width);
  void blockReduce(VarId var, ReduceOp op, int axis);
  void barrier();
  void fence();
  void atomicAdd(VarId old_value, TensorId tensor, ExprId offset, ExprId value);
  // SKind::SharedAtomicAdd; old_value -1: the old value is not kept.
  void sharedAtomicAdd(VarId old_value, VarId array, ExprId at, ExprId value);
  // d = a b + c on the warp's 16 x 8 tile; each a local array of the fragment's size (mmaDims).
  void mma(MmaShape shape, VarId d, VarId a, VarId b, VarId c, int32_t b_offset = 0);
  // shared[at .. at+width) = tensor[offset .. offset+width), `src_bytes` of it read, the rest zeros.
  void cpAsync(VarId shared, ExprId at, TensorId tensor, ExprId offset, int width, ExprId src_bytes);
  void cpAsyncCommit();
  void cpAsyncWait(int pending_groups);
  // fragment[at ..] = ldmatrix.x`matrices`(shared + row), row: this lane's row start (an element index).
  void ldmatrix(VarId fragment, ExprId at, VarId shared, ExprId row, int matrices, bool transpose);
  // acc += A B on each warpgroup's 64 x n tile (SKind::Wgmma), A and B starting at shared elements a_at
  // of a_tiles and b_at of b_tiles.
  void wgmma(VarId acc, int n, VarId a_tiles, ExprId a_at, const WgmmaOperand& a, VarId b_tiles, ExprId b_at,
             const WgmmaOperand& b);
  void wgmmaFence(VarId accumulators = -1);
  void wgmmaCommit();
  // `accumulators` (when given): the array the wgmmas write, held in place after the wait (their reads
  // stay after it in the emitted code).
  void wgmmaWait(int pending_groups, VarId accumulators = -1);
  void proxyFence();
  void mbarrierInit(VarId mbarriers, ExprId at, int arrivals);
  // `rank` >= 0: the mbarrier of the cluster's block of that rank (bytes 0).
  void mbarrierArriveExpectTx(VarId mbarriers, ExprId at, ExprId bytes, ExprId rank = -1);
  void clusterBarrier();
  void mbarrierWait(VarId mbarriers, ExprId at, ExprId parity);
  void setMaxNReg(int registers, bool increase);
  // shared[at ..] = the TMA box of `tensor` at (column, row), completing on mbarriers[barrier].
  // `batch`: the coordinate along a 3D map's batch dim (-1 for a 2D map); `multicast`: Stmt::multicast.
  void tmaLoad(VarId shared, ExprId at, TensorId tensor, ExprId column, ExprId row, VarId mbarriers, ExprId barrier,
               ExprId batch = -1, int32_t multicast = 0);
  // Opens a block: the statements added until the matching close() form its body.
  void openFor(VarId var, ExprId begin, ExprId end, ExprId step, bool unroll);
  void openIf(ExprId cond);
  void openConcurrentIf(ExprId cond);  // an if whose branches run at once (Stmt::concurrent)
  void openElse();  // switches the innermost open if to its else branch
  void close();
  // Sends statements to `target` until popTarget(): code built out of order (what goes before a
  // loop is found while building its body) is collected in detached lists and spliced later.
  void pushTarget(std::vector<Stmt>* target);
  void popTarget();
  std::vector<Stmt>& current();

 private:
  ExprId intern(KExpr e);
  ExprId argument(ScalarArgument arg);
  ExprId binaryIndex(EKind kind, ExprId a, ExprId b);
  void push(Stmt s);
  // A statement of only a kind, a var and a width (barriers, fences, commits, waits, declarations).
  void pushBare(SKind kind, VarId var = -1, int32_t width = 1);
  // A statement on var with operands a and b (array writes, mbarrier statements).
  void pushOnVar(SKind kind, VarId var, ExprId a, ExprId b, int32_t width = 1);

  Kernel& k_;
  // The interned expressions by the hash of their fields: per hash, the newest id with it, in an
  // open-addressed table (linear probing, at most half full); per id, the next older one with its hash
  // (-1 ends the chain). Lowering interns every expression it builds, so a lookup allocates nothing and
  // compares fields only on a hash match.
  struct HashSlot {
    uint64_t hash = 0;
    ExprId newest = -1;  // -1: an empty slot
  };
  void growHashTable();
  std::vector<HashSlot> hash_table_;
  size_t hashes_ = 0;
  std::vector<ExprId> older_with_hash_;
  struct Open {
    Stmt* stmt;                 // the open For/If (null for a pushed target)
    std::vector<Stmt>* target;  // where its statements go
  };
  std::vector<Open> open_;
  std::map<std::string, int> name_counts_;
  // By var id: the bounds of lets of index values and loop variables; letValue's values (-1: none).
  std::vector<std::optional<Bounds>> var_bounds_;
  std::vector<ExprId> bound_values_;
  // By expr id: bounds() as computed while memo_epoch_ was current (setVarBounds starts a new epoch).
  mutable std::vector<std::optional<Bounds>> bounds_memo_;
  mutable std::vector<uint32_t> bounds_epoch_;
  uint32_t memo_epoch_ = 1;
  std::array<int64_t, 2> thread_limit_{1024, 1024};  // per axis of threadIdx: its largest value + 1
  void setVarBounds(VarId var, std::optional<Bounds> b);
  std::optional<std::pair<ExprId, ExprId>> splitMultiple(ExprId a, int64_t c) const;
  void refine(ExprId cond, ExprId value, Bounds& b) const;
  bool nonNegative(ExprId a) const;
};

}  // namespace braze::kernel
