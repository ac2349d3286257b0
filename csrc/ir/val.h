// Values of a fusion: scalars and tensors. Sizes are symbolic: a tensor's extent is known only when
// a fusion is bound to inputs, except where the definition fixes it (a static size, a broadcast 1).
#pragma once

#include "ir/data_type.h"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace braze {

class Expr;
class Fusion;
class Scalar;
class TensorView;

// The value of a constant scalar or of a bound scalar input.
using ScalarValue = std::variant<bool, int64_t, double>;
std::string toString(const ScalarValue& value);
double toDouble(const ScalarValue& value);
int64_t toInt(const ScalarValue& value);  // truncates a double
// The value a scalar of `dtype` holds, in the alternative that matches it: an int wrapped to the dtype's
// width, a float truncated and saturated (NaN 0) or rounded to the dtype, nonzero for Bool; as a kernel's
// register or argument of that dtype holds it. Constants and scalar inputs are taken this way.
ScalarValue valueOfType(const ScalarValue& value, DataType dtype);

enum class IterType : uint8_t {
  Iteration,  // an ordinary dim
  Reduction,  // reduced away by the op that defined this tensor: not part of its logical shape
  Broadcast,  // extent 1, may be expanded against other operands
  Expanded,   // expanded broadcast: extent > 1 but stride 0 in memory; never limits vectorization
};
std::string_view toString(IterType type);

struct IterDomain {
  static constexpr int64_t kSymbolic = -1;
  int64_t extent = kSymbolic;  // a static extent, or kSymbolic when known only at execute time
  IterType type = IterType::Iteration;

  bool isBroadcast() const { return type == IterType::Broadcast || type == IterType::Expanded; }
  bool isReduction() const { return type == IterType::Reduction; }
  bool operator==(const IterDomain&) const = default;
};

class Val {
 public:
  Val(const Val&) = delete;
  Val& operator=(const Val&) = delete;
  virtual ~Val() = default;

  int64_t id() const { return id_; }
  DataType dtype() const { return dtype_; }
  Fusion* fusion() const { return fusion_; }
  Expr* definition() const { return definition_; }
  const std::vector<Expr*>& uses() const { return uses_; }
  bool isTensor() const { return is_tensor_; }
  bool isScalar() const { return !is_tensor_; }
  bool isFusionInput() const;
  bool isFusionOutput() const;

  TensorView* asTensor();
  const TensorView* asTensor() const;
  Scalar* asScalar();
  const Scalar* asScalar() const;

  // "T3" for tensors, "S4" for scalars: the names the printer and the Python repr use.
  std::string name() const;

 protected:
  Val(Fusion* fusion, int64_t id, DataType dtype, bool is_tensor)
      : fusion_(fusion), id_(id), dtype_(dtype), is_tensor_(is_tensor) {}

 private:
  friend class Fusion;
  Fusion* fusion_;
  int64_t id_;
  DataType dtype_;
  bool is_tensor_;
  Expr* definition_ = nullptr;
  std::vector<Expr*> uses_;
};

// A constant as the definition wrote it, where an op converted it to the type it computes in.
struct WrittenConstant {
  ScalarValue value;
  DataType dtype;
};

class Scalar : public Val {
 public:
  // A constant if value is set; otherwise a fusion input or the result of an expr.
  const std::optional<ScalarValue>& value() const { return value_; }
  bool isConstant() const { return value_.has_value(); }
  // The Python printer writes a converted constant as it was written, so the script it prints defines
  // the same values (and names) when run again.
  const std::optional<WrittenConstant>& writtenAs() const { return written_as_; }
  void setWrittenAs(WrittenConstant written) { written_as_ = std::move(written); }

 private:
  friend class Fusion;
  Scalar(Fusion* fusion, int64_t id, DataType dtype, std::optional<ScalarValue> value)
      : Val(fusion, id, dtype, /*is_tensor=*/false), value_(std::move(value)) {}
  std::optional<ScalarValue> value_;
  std::optional<WrittenConstant> written_as_;
};

// How a tensor is laid out in memory: per logical dim whether it is contiguous with the next inner
// dim (nullopt for broadcast dims, which have no stride to speak of), and the stride order
// (stride_order[d] = 0 for the innermost dim, rank-1 for the outermost; empty = row-major).
struct TensorLayout {
  std::vector<std::optional<bool>> contiguity;
  std::vector<int64_t> stride_order;
  bool operator==(const TensorLayout&) const = default;
};

class TensorView : public Val {
 public:
  // Every dim, including reduction dims that the defining reduction removed.
  const std::vector<IterDomain>& domain() const { return domain_; }
  // The dims a user sees (no reduction dims); rank() and axis numbers refer to these.
  std::vector<IterDomain> logical() const;
  int64_t rank() const;
  const TensorLayout& layout() const { return layout_; }
  bool isCpu() const { return is_cpu_; }
  // Static extents, -1 where symbolic: what the Python frontend's shape printing shows.
  std::vector<int64_t> staticShape() const;

  // Checks a user-given axis (negative counts from the end) and returns it in [0, rank).
  int64_t normalizeAxis(int64_t axis, std::string_view op) const;

 private:
  friend class Fusion;
  TensorView(Fusion* fusion, int64_t id, DataType dtype, std::vector<IterDomain> domain, TensorLayout layout,
             bool is_cpu)
      : Val(fusion, id, dtype, /*is_tensor=*/true),
        domain_(std::move(domain)),
        layout_(std::move(layout)),
        is_cpu_(is_cpu) {}
  std::vector<IterDomain> domain_;
  TensorLayout layout_;
  bool is_cpu_;
};

}  // namespace braze
