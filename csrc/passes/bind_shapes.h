// Binding a fusion to one execute's inputs: every tensor's concrete sizes, every scalar's value,
// and each fusion input's strides, offset and pointer alignment. Segmentation, bookending and the
// cost model read these; nothing here touches tensor data (a 16384x4096 layer_norm binds in
// microseconds).
#pragma once

#include "ir/fusion.h"
#include "passes/alias_analysis.h"
#include "ir/host_tensor.h"
#include "support/by_id.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace braze {

struct InputLayout {
  StridedLayout layout;
  int64_t alignment_bytes = 16;  // the largest power of two (up to 256) dividing the first element's address
};

class BoundShapes {
 public:
  const std::vector<int64_t>& sizesOf(const Val* tensor) const;
  int64_t numel(const Val* tensor) const;
  // Bytes a kernel moves to read or write the tensor once: broadcast and expanded dims hold one value.
  int64_t uniqueBytes(const Val* tensor) const;
  const ScalarValue& scalarOf(const Val* scalar) const;
  bool hasScalar(const Val* scalar) const { return scalars_.find(scalar) != nullptr; }
  const InputLayout& inputLayout(const Val* fusion_input) const;
  // The layout braze allocates a tensor it computes in: row-major, or the stride order its definition
  // asks for (fd.ops.stride_order, add_output(stride_order=)).
  StridedLayout allocatedLayout(const Val* tensor) const;
  // The values of an expr's scalar operands (every input after the first), as integers.
  std::vector<int64_t> intOperands(const Expr& expr) const;
  // For passes that add a tensor with the sizes of an existing one (a segment_set).
  void bindSameAs(const Val* added, const Val* existing) {
    checkOwner(added);
    sizes_.set(added, sizesOf(existing));
  }
  // One line per bound value of `fusion`, in creation order: sizes, an input's strides and alignment, a
  // scalar's value (BRAZE_DUMP=after:bind).
  std::string toString(const Fusion& fusion) const;

 private:
  friend BoundShapes bindShapes(const Fusion& fusion, const std::vector<HostValue>& inputs);
  // Per Val id (dense within a fusion) rather than hashed by pointer: segmentation, heuristics and
  // lowering read sizes at every step, and each segmentation copies the tables.
  template <typename T>
  struct ById {
    std::vector<T> values;
    std::vector<char> bound;
    const T* find(const Val* v) const {
      const auto id = static_cast<size_t>(v->id());
      return entryOr(bound, id, char{0}) != 0 ? &values[id] : nullptr;
    }
    void reserve(size_t ids) {  // room for every id below `ids` (never shrinks)
      if (values.size() < ids) values.resize(ids);
      if (bound.size() < ids) bound.resize(ids, char{0});
    }
    void set(const Val* v, T value) {
      const auto id = static_cast<size_t>(v->id());
      entryAt(values, id) = std::move(value);
      entryAt(bound, id, char{0}) = 1;
    }
  };
  // The fusion whose vals are bound: a val of another fusion (another copy) is refused, not looked up
  // by its id.
  void checkOwner(const Val* v) const;
  const Fusion* fusion_ = nullptr;
  ById<std::vector<int64_t>> sizes_;
  ById<ScalarValue> scalars_;
  ById<InputLayout> inputs_;
};

// Checks the inputs against the definitions (as the reference evaluator does: clear errors naming
// the input), then infers every tensor's sizes and folds every scalar expr.
BoundShapes bindShapes(const Fusion& fusion, const std::vector<HostValue>& inputs);

}  // namespace braze
