#include "support/error.h"

namespace braze {

void throwError(ErrorKind kind, const char* file, int line, const std::string& message) {
  if (kind == ErrorKind::Internal) {
    // Bugs carry their location so a report can point at the line; user errors do not need it.
    throw Error(kind, fmt::format("braze internal error (please report): {} [{}:{}]", message, file, line));
  }
  throw Error(kind, message);
}

}  // namespace braze
