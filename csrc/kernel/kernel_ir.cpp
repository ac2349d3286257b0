#include "kernel/kernel_ir.h"
#include "kernel/index_errors.h"
#include "reference/pointwise_math.h"

#include "support/error.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <iterator>

namespace braze::kernel {

std::string_view toString(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Any: return "any";
    case ReduceOp::All: return "all";
  }
  return "?";
}

DataType computeTypeOf(DataType dtype) {
  BRAZE_ASSERT(dtype != DataType::Null, "computeTypeOf(Null)");
  if (isFloating(dtype)) return dtype == DataType::Double ? DataType::Double : DataType::Float;
  return isBool(dtype) ? DataType::Bool : DataType::Int64;
}

OpKind combineOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return OpKind::Add;
    case ReduceOp::Prod: return OpKind::Mul;
    case ReduceOp::Max: return OpKind::Maximum;
    case ReduceOp::Min: return OpKind::Minimum;
    case ReduceOp::Any: return OpKind::LogicalOr;
    case ReduceOp::All: return OpKind::LogicalAnd;
  }
  return OpKind::Add;
}

namespace {

uint64_t exprHash(const KExpr& e) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields, then a final mix
  auto mix = [&](uint64_t w) {
    h ^= w;
    h *= 1099511628211ull;
  };
  mix(static_cast<uint64_t>(e.kind) | static_cast<uint64_t>(e.dtype) << 8 | static_cast<uint64_t>(e.index) << 16 |
      static_cast<uint64_t>(e.op) << 24 | static_cast<uint64_t>(e.from) << 40);
  mix(static_cast<uint64_t>(e.i));
  mix(std::bit_cast<uint64_t>(e.f));
  mix(static_cast<uint64_t>(static_cast<uint32_t>(e.ref)));
  for (ExprId a : e.args) mix(static_cast<uint64_t>(static_cast<uint32_t>(a)));
  return h ^ (h >> 29);
}

// Equal as interning means: every field, the float by its bits (a NaN constant equals itself).
bool sameExpr(const KExpr& a, const KExpr& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.index == b.index && a.op == b.op && a.from == b.from &&
         a.i == b.i && std::bit_cast<uint64_t>(a.f) == std::bit_cast<uint64_t>(b.f) && a.ref == b.ref &&
         a.args == b.args;
}

}  // namespace

namespace {

void markReached(const std::vector<Stmt>& stmts, std::vector<bool>& reached) {
  for (const Stmt& s : stmts) {
    for (ExprId e : {s.a, s.b, s.c, s.d, s.e}) {
      if (e >= 0) reached[e] = true;
    }
    markReached(s.body, reached);
    markReached(s.orelse, reached);
  }
}

}  // namespace

std::vector<bool> reachedExpressions(const Kernel& kernel) {
  std::vector<bool> reached(kernel.exprs.size(), false);
  markReached(kernel.body, reached);
  // Operands are interned before what uses them: a descending pass reaches every operand.
  for (size_t i = kernel.exprs.size(); i-- > 0;) {
    if (!reached[i]) continue;
    for (ExprId a : kernel.exprs[i].args) reached[a] = true;
  }
  return reached;
}

ExprId KernelBuilder::intern(KExpr e) {
  const uint64_t hash = exprHash(e);
  if (2 * (hashes_ + 1) > hash_table_.size()) growHashTable();
  const size_t mask = hash_table_.size() - 1;
  size_t at = static_cast<size_t>(hash) & mask;
  while (hash_table_[at].newest >= 0 && hash_table_[at].hash != hash) at = (at + 1) & mask;
  HashSlot& slot = hash_table_[at];
  for (ExprId id = slot.newest; id >= 0; id = older_with_hash_[id]) {
    if (sameExpr(k_.exprs[id], e)) return id;
  }
  if (slot.newest < 0) {
    slot.hash = hash;
    ++hashes_;
  }
  const auto id = static_cast<ExprId>(k_.exprs.size());
  k_.exprs.mut().push_back(std::move(e));
  older_with_hash_.resize(k_.exprs.size(), -1);
  older_with_hash_[id] = slot.newest;
  slot.newest = id;
  return id;
}

void KernelBuilder::growHashTable() {
  std::vector<HashSlot> old = std::move(hash_table_);
  hash_table_.assign(std::max<size_t>(256, 2 * old.size()), HashSlot{});
  const size_t mask = hash_table_.size() - 1;
  for (const HashSlot& slot : old) {
    if (slot.newest < 0) continue;
    size_t at = static_cast<size_t>(slot.hash) & mask;
    while (hash_table_[at].newest >= 0) at = (at + 1) & mask;
    hash_table_[at] = slot;
  }
}

std::optional<int64_t> KernelBuilder::constValue(ExprId id) const {
  const KExpr& e = k_.exprs[id];
  if (e.kind == EKind::ConstInt || e.kind == EKind::ConstBool) return e.i;
  return std::nullopt;
}

ExprId KernelBuilder::index(int64_t value) {
  KExpr e;
  e.kind = EKind::ConstInt;
  e.index = true;
  e.i = value;
  return intern(e);
}

ExprId KernelBuilder::boolean(bool value) {
  KExpr e;
  e.kind = EKind::ConstBool;
  e.dtype = DataType::Bool;
  e.i = value;
  return intern(e);
}

ExprId KernelBuilder::constant(double value, DataType dtype) {
  if (!isFloating(dtype)) return constantInt(static_cast<int64_t>(value), dtype);
  KExpr e;
  e.kind = EKind::ConstFloat;
  e.dtype = dtype;
  // The value the dtype holds (a Float 0.05 is 0.0500000007...): what the emitted literal is, and what the
  // simulator must compute with, as the reference does.
  e.f = reference::roundToType(value, dtype);
  return intern(e);
}

ExprId KernelBuilder::constantInt(int64_t value, DataType dtype) {
  if (isFloating(dtype)) return constant(static_cast<double>(value), dtype);
  if (isBool(dtype)) return boolean(value != 0);
  KExpr e;
  e.kind = EKind::ConstInt;
  e.dtype = dtype;
  e.i = value;
  return intern(e);
}

ExprId KernelBuilder::threadIdx(int axis) {
  KExpr e;
  e.kind = EKind::ThreadIdx;
  e.index = true;
  e.i = axis;
  return intern(e);
}

ExprId KernelBuilder::blockIdx(int axis) {
  KExpr e;
  e.kind = EKind::BlockIdx;
  e.index = true;
  e.i = axis;
  return intern(e);
}

ExprId KernelBuilder::clusterRank() {
  KExpr e;
  e.kind = EKind::ClusterRank;
  e.index = true;
  return intern(e);
}

ExprId KernelBuilder::ref(VarId var) {
  const KVar& v = k_.vars[var];
  KExpr e;
  e.kind = EKind::VarRef;
  e.dtype = v.dtype;
  e.index = v.index;
  e.ref = var;
  return intern(e);
}

ExprId KernelBuilder::argument(ScalarArgument arg) {
  int32_t slot = 0;
  while (slot < static_cast<int32_t>(k_.arguments.size()) && k_.arguments[slot].name != arg.name) ++slot;
  if (slot == static_cast<int32_t>(k_.arguments.size())) {
    k_.arguments.push_back(arg);
  } else {
    // The name is the Val's (or the lowering's count's): the same value, which may be a NaN (no ==).
    BRAZE_ASSERT(k_.arguments[slot].dtype == arg.dtype && k_.arguments[slot].index == arg.index,
                 "kernel argument {} bound as two types", arg.name);
  }
  KExpr e;
  e.kind = EKind::Argument;
  e.index = arg.index;
  e.dtype = arg.index ? DataType::Int64 : arg.dtype;
  e.ref = slot;
  return intern(e);
}

ExprId KernelBuilder::extent(std::string name, int64_t value) {
  return argument({std::move(name), true, DataType::Int64, value});
}

ExprId KernelBuilder::scalarArgument(const Val* input, DataType dtype, ScalarValue value) {
  return argument({input->name(), false, dtype, value, input});
}

ExprId KernelBuilder::binaryIndex(EKind kind, ExprId a, ExprId b) {
  KExpr e;
  e.kind = kind;
  const bool predicate = kind == EKind::Lt || kind == EKind::Le || kind == EKind::Eq || kind == EKind::And ||
                         kind == EKind::Or;
  e.dtype = predicate ? DataType::Bool : DataType::Int64;
  e.index = !predicate;
  e.args = {a, b};
  return intern(e);
}

// Index arithmetic folds constants and identities, so that specialized kernels print and simulate
// only the arithmetic that depends on a thread, a block or a loop.
ExprId KernelBuilder::add(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return index(*ca + *cb);
  if (ca && *ca == 0) return b;
  if (cb && *cb == 0) return a;
  return binaryIndex(EKind::Add, a, b);
}

ExprId KernelBuilder::sub(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return index(*ca - *cb);
  if (cb && *cb == 0) return a;
  if (a == b) return index(0);
  return binaryIndex(EKind::Sub, a, b);
}

ExprId KernelBuilder::mul(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return index(*ca * *cb);
  if ((ca && *ca == 0) || (cb && *cb == 0)) return index(0);
  if (ca && *ca == 1) return b;
  if (cb && *cb == 1) return a;
  return binaryIndex(EKind::Mul, a, b);
}

// a in [0, c): a / c is 0 and a % c is a.
namespace {
bool below(const std::optional<KernelBuilder::Bounds>& a, std::optional<int64_t> c) {
  return a && c && a->lo >= 0 && a->hi < *c;
}
}  // namespace

// a = x + y with x >= 0 a multiple of g and y in [0, g), g a power of two dividing c (an index
// unflattened, shifted inside its dim, then flattened again): x and y, so that a / c = x / c and
// a % c = x % c + y (which is y when g = c).
std::optional<std::pair<ExprId, ExprId>> KernelBuilder::splitMultiple(ExprId a, int64_t c) const {
  const KExpr& e = k_.exprs[a];
  if (e.kind != EKind::Add || c <= 0) return std::nullopt;
  for (int first : {0, 1}) {
    const ExprId x = e.args[first], y = e.args[1 - first];
    const auto bx = bounds(x);
    // divisibility knows powers of two: g is the largest dividing both x and c.
    if (bx && bx->lo >= 0 && below(bounds(y), std::min(divisibility(x), c & -c))) return std::make_pair(x, y);
  }
  return std::nullopt;
}

bool KernelBuilder::nonNegative(ExprId a) const {
  const auto b = bounds(a);
  return b && b->lo >= 0;
}

ExprId KernelBuilder::div(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  BRAZE_ASSERT(!cb || *cb != 0, "kernel index division by zero");
  if (ca && cb) return index(*ca / *cb);
  if (cb && *cb == 1) return a;
  if (ca && *ca == 0) return a;
  if (below(bounds(a), cb)) return index(0);
  if (cb && *cb > 0) {
    // A copy, not a reference: the builders called below intern, and may move k_.exprs.
    const KExpr e = k_.exprs[a];
    if (e.kind == EKind::Mul) {
      // (x * k) / c = x * (k / c) when c divides k, and x / (c / k) when k divides c (x >= 0).
      if (auto k = constValue(e.args[1]); k && *k > 0) {
        if (*k % *cb == 0) return mul(e.args[0], index(*k / *cb));
        if (*cb % *k == 0 && nonNegative(e.args[0])) return div(e.args[0], index(*cb / *k));
      }
    }
    if (e.kind == EKind::Div && nonNegative(e.args[0])) {  // (x / d) / c = x / (d c) for x >= 0
      if (auto d = constValue(e.args[1]); d && *d > 0 && *d <= (int64_t{1} << 31) && *cb <= (int64_t{1} << 31)) {
        return div(e.args[0], index(*d * *cb));
      }
    }
    if (auto parts = splitMultiple(a, *cb)) return div(parts->first, b);
  }
  return binaryIndex(EKind::Div, a, b);
}

ExprId KernelBuilder::mod(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  BRAZE_ASSERT(!cb || *cb != 0, "kernel index modulo by zero");
  if (ca && cb) return index(*ca % *cb);
  if (cb && *cb == 1) return index(0);
  if (ca && *ca == 0) return a;
  if (below(bounds(a), cb)) return a;
  if (cb && *cb > 0) {
    const KExpr e = k_.exprs[a];  // a copy: see div
    if (e.kind == EKind::Mul) {
      // (x * k) % c = 0 when c divides k, and (x % (c / k)) * k when k divides c (x >= 0).
      if (auto k = constValue(e.args[1]); k && *k > 0) {
        if (*k % *cb == 0) return index(0);
        if (*cb % *k == 0 && nonNegative(e.args[0])) return mul(mod(e.args[0], index(*cb / *k)), e.args[1]);
      }
    }
    if (auto parts = splitMultiple(a, *cb)) {
      const bool whole = divisibility(parts->first) % *cb == 0;
      return whole ? parts->second : add(mod(parts->first, b), parts->second);
    }
  }
  return binaryIndex(EKind::Mod, a, b);
}

ExprId KernelBuilder::min(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return index(std::min(*ca, *cb));
  return binaryIndex(EKind::Min, a, b);
}

ExprId KernelBuilder::bitXor(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return index(*ca ^ *cb);
  if (ca && *ca == 0) return b;
  if (cb && *cb == 0) return a;
  return binaryIndex(EKind::Xor, a, b);
}

ExprId KernelBuilder::bitAnd(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return index(*ca & *cb);
  if ((ca && *ca == 0) || (cb && *cb == 0)) return index(0);
  return binaryIndex(EKind::BitAnd, a, b);
}

ExprId KernelBuilder::lt(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return boolean(*ca < *cb);
  if (auto ba = bounds(a), bb = bounds(b); ba && bb) {
    if (ba->hi < bb->lo) return boolean(true);
    if (ba->lo >= bb->hi) return boolean(false);
  }
  return binaryIndex(EKind::Lt, a, b);
}

ExprId KernelBuilder::le(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return boolean(*ca <= *cb);
  if (auto ba = bounds(a), bb = bounds(b); ba && bb) {
    if (ba->hi <= bb->lo) return boolean(true);
    if (ba->lo > bb->hi) return boolean(false);
  }
  return binaryIndex(EKind::Le, a, b);
}

ExprId KernelBuilder::eq(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca && cb) return boolean(*ca == *cb);
  return binaryIndex(EKind::Eq, a, b);
}

ExprId KernelBuilder::land(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca) return *ca ? b : boolean(false);
  if (cb) return *cb ? a : boolean(false);
  if (a == b) return a;
  return binaryIndex(EKind::And, a, b);
}

ExprId KernelBuilder::lor(ExprId a, ExprId b) {
  auto ca = constValue(a), cb = constValue(b);
  if (ca) return *ca ? boolean(true) : b;
  if (cb) return *cb ? boolean(true) : a;
  return binaryIndex(EKind::Or, a, b);
}

ExprId KernelBuilder::orderKey(ExprId value) {
  BRAZE_ASSERT(expr(value).dtype == DataType::Float && !expr(value).index, "an order key of a non-Float value");
  KExpr e;
  e.kind = EKind::OrderKey;
  e.dtype = DataType::Int64;
  e.index = true;
  e.args = {value};
  return intern(e);
}

ExprId KernelBuilder::warpUniform(ExprId a) {
  if (constValue(a)) return a;
  KExpr e;
  e.kind = EKind::WarpUniform;
  e.dtype = DataType::Int64;
  e.index = true;
  e.args = {a};
  return intern(e);
}

ExprId KernelBuilder::lnot(ExprId a) {
  if (auto ca = constValue(a)) return boolean(!*ca);
  KExpr e;
  e.kind = EKind::Not;
  e.dtype = DataType::Bool;
  e.args = {a};
  return intern(e);
}

ExprId KernelBuilder::select(ExprId cond, ExprId a, ExprId b) {
  if (auto c = constValue(cond)) return *c ? a : b;
  if (a == b) return a;
  KExpr e;
  e.kind = EKind::Select;
  e.dtype = k_.exprs[a].dtype;
  e.index = k_.exprs[a].index;
  e.args = {cond, a, b};
  return intern(e);
}

ExprId KernelBuilder::fma(ExprId a, ExprId b, ExprId c) {
  KExpr e;
  e.kind = EKind::Fma;
  e.dtype = DataType::Float;
  e.args = {a, b, c};
  return intern(e);
}

ExprId KernelBuilder::elementwise(OpKind op, DataType dtype, ExprArgs args) {
  KExpr e;
  e.kind = EKind::Elementwise;
  e.op = op;
  e.dtype = dtype;
  e.args = std::move(args);
  return intern(e);
}

ExprId KernelBuilder::cast(ExprId value, DataType to) {
  const KExpr& v = k_.exprs[value];
  if (v.dtype == to && !v.index) return value;
  KExpr e;
  e.kind = EKind::Cast;
  e.from = v.dtype;
  e.dtype = to;
  e.args = {value};
  return intern(e);
}

ExprId KernelBuilder::randomUnit(OpKind op, ExprId seed, ExprId offset, ExprId i) {
  BRAZE_ASSERT(op == OpKind::Uniform || op == OpKind::Normal, "randomUnit({})", opName(op));
  KExpr e;
  e.kind = EKind::RandomUnit;
  e.op = op;
  e.dtype = DataType::Double;
  e.args = {seed, offset, i};
  return intern(e);
}

ExprId KernelBuilder::indexToValue(ExprId idx, DataType dtype) {
  KExpr e;
  e.kind = EKind::IndexToValue;
  e.dtype = dtype;
  e.args = {idx};
  return intern(e);
}

ExprId KernelBuilder::valueToIndex(ExprId value) {
  if (k_.exprs[value].index) return value;
  KExpr e;
  e.kind = EKind::ValueToIndex;
  e.index = true;
  e.args = {value};
  return intern(e);
}

ExprId KernelBuilder::checkedIndex(ExprId value, ExprId extent, const std::string& site) {
  if (!k_.check_indices) return valueToIndex(value);
  if (!k_.index_errors) {
    TensorParam record;
    record.name = "index_errors";
    record.dtype = DataType::Int64;
    record.layout = StridedLayout::rowMajor({kIndexErrorWords});
    record.alignment_bytes = 8;
    record.index_errors = true;
    k_.index_errors = addTensor(std::move(record));
  }
  KExpr e;
  e.kind = EKind::CheckedIndex;
  e.index = true;
  e.i = indexCheckSite(site);
  e.args = {value, extent};  // the value as read (64 bits): checked before it narrows to idx_t
  return intern(e);
}

ExprId KernelBuilder::load(TensorId tensor, ExprId offset) {
  KExpr e;
  e.kind = EKind::Load;
  e.dtype = k_.tensors[tensor].dtype;
  e.ref = tensor;
  e.args = {offset};
  return intern(e);
}

ExprId KernelBuilder::localRead(VarId array, ExprId at) {
  KExpr e;
  e.kind = EKind::LocalRead;
  e.dtype = k_.vars[array].dtype;
  e.ref = array;
  e.args = {at};
  return intern(e);
}

int64_t KernelBuilder::divisibility(ExprId id) const {
  return kernel::divisibility(k_, id, [this](VarId var) { return boundValue(var); });
}

int64_t divisibility(const Kernel& k, ExprId id, const std::function<std::optional<ExprId>(VarId)>& bound) {
  static constexpr int64_t kMax = int64_t{1} << 20;
  const KExpr& e = k.exprs[id];
  auto divisibility = [&](ExprId arg) { return kernel::divisibility(k, arg, bound); };
  auto pow2 = [](int64_t v) { return v == 0 ? kMax : std::min<int64_t>(kMax, v & -v); };
  switch (e.kind) {
    case EKind::ConstInt: return pow2(e.i < 0 ? -e.i : e.i);
    case EKind::Add:
    case EKind::Sub: return std::min(divisibility(e.args[0]), divisibility(e.args[1]));
    case EKind::Mul: return std::min(kMax, divisibility(e.args[0]) * divisibility(e.args[1]));
    case EKind::Mod:  // a % b = a - b * (a / b)
    case EKind::Xor:  // bits below both operands' lowest set bit stay zero
      return std::min(divisibility(e.args[0]), divisibility(e.args[1]));
    case EKind::BitAnd:  // bits below either operand's lowest set bit stay zero
      return std::max(divisibility(e.args[0]), divisibility(e.args[1]));
    case EKind::Select: return std::min(divisibility(e.args[1]), divisibility(e.args[2]));
    case EKind::WarpUniform: return divisibility(e.args[0]);
    case EKind::VarRef: {
      const std::optional<ExprId> value = bound ? bound(e.ref) : std::nullopt;
      return value ? divisibility(*value) : 1;
    }
    default: return 1;
  }
}

VarId KernelBuilder::scalarVar(std::string prefix, DataType dtype, bool is_index) {
  const int n = name_counts_[prefix]++;
  KVar v;
  v.name = n == 0 && prefix.size() > 1 ? prefix : prefix + std::to_string(n);
  v.dtype = dtype;
  v.index = is_index;
  k_.vars.mut().push_back(std::move(v));
  return static_cast<VarId>(k_.vars.size() - 1);
}

VarId KernelBuilder::arrayVar(std::string prefix, DataType dtype, int64_t size, VarKind kind) {
  const VarId id = scalarVar(std::move(prefix), dtype);
  KVar& v = k_.vars.mut()[id];
  v.kind = kind;
  v.size = size;
  if (kind == VarKind::SharedArray || kind == VarKind::Mbarriers) {
    v.shared_offset = k_.shared_bytes;
    // Arrays hold compute values; an mbarrier is 8 bytes.
    const int64_t element = kind == VarKind::Mbarriers ? 8 : sizeOf(computeTypeOf(dtype));
    k_.shared_bytes += (size * element + 15) / 16 * 16;
  }
  return id;
}

VarId KernelBuilder::sharedStorageArray(std::string prefix, DataType dtype, int64_t size, int64_t alignment) {
  const VarId id = scalarVar(std::move(prefix), dtype);
  KVar& v = k_.vars.mut()[id];
  v.kind = VarKind::SharedArray;
  v.storage = true;
  v.size = size;
  // At least 128-byte aligned: a rotation pattern repeats every 128 bytes, and ldmatrix rows need 16.
  alignment = std::max<int64_t>(alignment, 128);
  v.shared_offset = (k_.shared_bytes + alignment - 1) / alignment * alignment;
  k_.shared_bytes = v.shared_offset + (size * sizeOf(dtype) + 15) / 16 * 16;
  return id;
}

TensorId KernelBuilder::addTensor(TensorParam param) {
  k_.tensors.push_back(std::move(param));
  return static_cast<TensorId>(k_.tensors.size() - 1);
}

uint64_t argumentWord(const ScalarArgument& a, const ScalarValue& value) {
  static_assert(std::endian::native == std::endian::little, "narrow arguments read the low bytes of a word");
  // A scalar input's word holds its dtype's value (Half 0.1 is 0.0999755859375, Int8 300 is 44), carried
  // in the dtype's compute type.
  const ScalarValue v = a.index ? value : valueOfType(value, a.dtype);
  const DataType type = a.index ? DataType::Int64 : computeTypeOf(a.dtype);
  if (type == DataType::Float) return std::bit_cast<uint32_t>(static_cast<float>(toDouble(v)));
  if (type == DataType::Double) return std::bit_cast<uint64_t>(toDouble(v));
  if (type == DataType::Bool) return toInt(v) != 0 ? 1 : 0;
  return static_cast<uint64_t>(toInt(v));
}

std::vector<uint64_t> argumentWords(const Kernel& kernel) {
  std::vector<uint64_t> words;
  words.reserve(kernel.arguments.size());
  for (const ScalarArgument& a : kernel.arguments) words.push_back(argumentWord(a, a.value));
  return words;
}

std::vector<ScalarValue> decodeArgumentWords(const Kernel& kernel, const uint64_t* words) {
  std::vector<ScalarValue> values;
  values.reserve(kernel.arguments.size());
  for (size_t i = 0; i < kernel.arguments.size(); ++i) {
    const ScalarArgument& a = kernel.arguments[i];
    // An index parameter is the kernel's idx_t: a 32-bit int unless the kernel indexes with 64 bits.
    const DataType type = a.index ? (kernel.index64 ? DataType::Int64 : DataType::Int32) : computeTypeOf(a.dtype);
    if (type == DataType::Float) {
      values.emplace_back(static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(words[i]))));
    } else if (type == DataType::Double) {
      values.emplace_back(std::bit_cast<double>(words[i]));
    } else if (type == DataType::Bool) {
      values.emplace_back(static_cast<bool>(words[i] & 1));
    } else {
      // A 32-bit index reads the word's low bytes, sign-extended as an int is.
      const int bits = static_cast<int>(sizeOf(type)) * 8;
      const uint64_t low = bits >= 64 ? words[i] : words[i] & ((uint64_t{1} << bits) - 1);
      const bool negative = bits < 64 && isSigned(type) && ((low >> (bits - 1)) & 1) != 0;
      values.emplace_back(static_cast<int64_t>(negative ? low | ~((uint64_t{1} << bits) - 1) : low));
    }
  }
  return values;
}

std::string compileArch(const Kernel& kernel, const std::string& device_arch) {
  return kernel.arch_specific && device_arch.starts_with("sm_") && !device_arch.ends_with("a") ? device_arch + "a" : device_arch;
}

std::string launchSummary(const Kernel& kernel) {
  // One buffer: every plan, reused ones too, shows its kernels' launch this way.
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "{}; grid {}", kernel.summary, kernel.grid[0]);
  if (kernel.grid[1] > 1) fmt::format_to(std::back_inserter(out), "x{}", kernel.grid[1]);
  for (const ScalarArgument& a : kernel.arguments) {
    if (!a.index) continue;
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      fmt::format_to(std::back_inserter(out), ", {} {}", a.name, *i);
    } else {
      fmt::format_to(std::back_inserter(out), ", {} {}", a.name, ::braze::toString(a.value));
    }
  }
  return fmt::to_string(out);
}

}  // namespace braze::kernel
