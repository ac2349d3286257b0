// Helpers shared by the evaluator's per-category files.
#include "support/error.h"
#include "reference/eval_ops.h"

#include <cstring>

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

void copyElement(HostTensor& out, int64_t out_offset, const HostTensor& in, int64_t in_offset) {
  const int64_t bytes = sizeOf(out.dtype());
  std::memcpy(out.data() + out_offset * bytes, in.data() + in_offset * bytes, bytes);
}

}  // namespace braze::reference
