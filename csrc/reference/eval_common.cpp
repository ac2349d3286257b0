// Helpers shared by the evaluator's per-category files.
#include "ir/error.h"
#include "reference/eval_ops.h"

namespace braze::reference {

const HostTensor& tensorOf(const HostValue& value) {
  const auto* t = std::get_if<HostTensor>(&value);
  BRAZE_ASSERT(t != nullptr, "expected a tensor value");
  return *t;
}

ScalarValue scalarOf(const HostValue& value) {
  const auto* s = std::get_if<ScalarValue>(&value);
  BRAZE_ASSERT(s != nullptr, "expected a scalar value");
  return *s;
}

int64_t intOf(const HostValue& value) { return toInt(scalarOf(value)); }

double readAsDouble(const HostTensor& t, int64_t element_offset) { return t.readDouble(element_offset); }

void writeFromDouble(HostTensor& t, int64_t element_offset, double value) {
  if (isFloating(t.dtype())) {
    t.writeDouble(element_offset, value);
  } else if (isBool(t.dtype())) {
    t.writeInt(element_offset, value != 0.0);
  } else {
    BRAZE_ASSERT(false, "writeFromDouble into integer tensor: convert explicitly");
  }
}

double scalarAsDouble(const ScalarValue& v) { return toDouble(v); }

}  // namespace braze::reference
