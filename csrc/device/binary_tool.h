// Running a disassembler on a compiled kernel: cuobjdump on a cubin (cuda/sass.h), llvm-objdump on an AMD
// code object (hip/amdgcn.h). Both write the binary to a temp file and read the tool's output.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace braze::device {

// The first of dir/name for `dirs`, then of each PATH entry, that is executable; nullopt when none is.
std::optional<std::string> findExecutable(const std::vector<std::string>& names, const std::vector<std::string>& dirs);

// `tool flags FILE` with `binary` written to FILE (in $TMPDIR or /tmp, removed after), stdout and stderr
// together. Throws a Runtime error with that output when the tool fails.
std::string runOnBinary(const std::string& tool, const std::string& flags, const std::vector<char>& binary);

}  // namespace braze::device
