#include "reference/evaluator.h"

#include "ir/error.h"

namespace braze {
// Placeholder while the evaluator is being written in this session; replaced before commit.
std::vector<HostValue> evaluate(const Fusion&, const std::vector<HostValue>&) {
  throwError(ErrorKind::Runtime, __FILE__, __LINE__, "evaluate: not implemented yet");
}
}  // namespace braze
