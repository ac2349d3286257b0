#include "reference/input_check.h"

#include "support/error.h"

#include <algorithm>
#include <numeric>

namespace braze {
namespace {

std::string describe(const HostValue& value) {
  if (const auto* t = std::get_if<HostTensor>(&value)) {
    return fmt::format("a {} tensor of shape [{}]", toString(t->dtype()), fmt::join(t->sizes(), ", "));
  }
  return fmt::format("the scalar {}", toString(std::get<ScalarValue>(value)));
}

// Logical dims from innermost to outermost in memory, per the declared stride order.
std::vector<int64_t> innermostFirst(const TensorView* tv) {
  std::vector<int64_t> dims(tv->rank());
  std::iota(dims.begin(), dims.end(), 0);
  const auto& order = tv->layout().stride_order;
  if (order.empty()) {
    std::reverse(dims.begin(), dims.end());
  } else {
    std::sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return order[a] < order[b]; });
  }
  return dims;
}

void checkTensor(size_t index, const TensorView* tv, const HostTensor& t) {
  BRAZE_TYPE_CHECK(t.dtype() == tv->dtype(), "input {} ({}): expected dtype {}, got {}", index, tv->name(),
                   toString(tv->dtype()), toString(t.dtype()));
  BRAZE_CHECK(t.rank() == tv->rank(), "input {} ({}): expected rank {}, got a tensor of shape [{}] (rank {})", index,
              tv->name(), tv->rank(), fmt::join(t.sizes(), ", "), t.rank());
  const auto dims = tv->logical();
  for (int64_t d = 0; d < t.rank(); ++d) {
    const IterDomain& id = dims[d];
    const int64_t size = t.sizes()[d];
    if (id.type == IterType::Broadcast) {
      BRAZE_CHECK(size == 1, "input {} ({}): dim {} was defined as a broadcast dim (size 1), got size {}", index,
                  tv->name(), d, size);
    } else if (id.extent >= 0) {
      BRAZE_CHECK(size == id.extent, "input {} ({}): dim {} was defined with static size {}, got {}", index, tv->name(),
                  d, id.extent, size);
    }
    if (id.type == IterType::Expanded && t.numel() > 0) {
      BRAZE_CHECK(size <= 1 || t.strides()[d] == 0,
                  "input {} ({}): dim {} was defined as an expanded broadcast (stride 0), got stride {}", index,
                  tv->name(), d, t.strides()[d]);
    }
  }
  // An empty tensor has no memory to lay out (numpy even gives it stride 0 everywhere).
  if (t.numel() == 0) return;
  // contiguity[d] == true: dim d's stride is the next inner dim's stride times its size (1 if innermost).
  const auto& contiguity = tv->layout().contiguity;
  int64_t expected = 1;
  for (int64_t d : innermostFirst(tv)) {
    if (dims[d].isBroadcast()) continue;
    const int64_t size = t.sizes()[d];
    const int64_t stride = t.strides()[d];
    if (contiguity[d].value_or(false) && size > 1) {
      BRAZE_CHECK(stride == expected,
                  "input {} ({}): dim {} was defined as contiguous (stride {} expected), got stride {} for shape [{}] "
                  "strides [{}]; define it with contiguity False or pass a contiguous array",
                  index, tv->name(), d, expected, stride, fmt::join(t.sizes(), ", "), fmt::join(t.strides(), ", "));
    }
    expected = size > 1 ? stride * size : expected;
  }
}

}  // namespace

void checkInputs(const Fusion& fusion, const std::vector<HostValue>& inputs) {
  const auto& defs = fusion.inputs();
  BRAZE_CHECK(inputs.size() == defs.size(), "expected {} inputs, got {}", defs.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Val* def = defs[i];
    if (def->isTensor()) {
      const auto* t = std::get_if<HostTensor>(&inputs[i]);
      BRAZE_TYPE_CHECK(t != nullptr, "input {} ({}): expected a {} tensor of rank {}, got {}", i, def->name(),
                       toString(def->dtype()), def->asTensor()->rank(), describe(inputs[i]));
      checkTensor(i, def->asTensor(), *t);
    } else {
      BRAZE_TYPE_CHECK(std::holds_alternative<ScalarValue>(inputs[i]), "input {} ({}): expected a {} scalar, got {}", i,
                       def->name(), toString(def->dtype()), describe(inputs[i]));
      const ScalarValue& v = std::get<ScalarValue>(inputs[i]);
      BRAZE_TYPE_CHECK(!std::holds_alternative<double>(v) || isFloating(def->dtype()),
                       "input {} ({}): expected a {} scalar, got the float {}", i, def->name(), toString(def->dtype()),
                       toString(v));
      if (isBool(def->dtype())) checkBoolScalarInput(i, def, v);
    }
  }
}

void checkBoolScalarInput(size_t index, const Val* def, const ScalarValue& value) {
  BRAZE_TYPE_CHECK(std::holds_alternative<bool>(value) ||
                       (std::holds_alternative<int64_t>(value) && (std::get<int64_t>(value) & ~int64_t{1}) == 0),
                   "input {} ({}): expected a Bool scalar, got {}", index, def->name(), toString(value));
}

}  // namespace braze
