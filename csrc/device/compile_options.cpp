#include "device/compile_options.h"

#include <cstdlib>
#include <string_view>

namespace braze::device {

CompileOptions kernelCompileOptions(std::string arch) {
  const char* lineinfo = std::getenv("BRAZE_LINEINFO");
  return {.arch = std::move(arch),
          .fmad = true,
          .lineinfo = lineinfo != nullptr && *lineinfo != '\0' && std::string_view(lineinfo) != "0"};
}

}  // namespace braze::device
