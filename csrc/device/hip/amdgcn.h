// AMD code object inspection: disassemble with llvm-objdump and count global loads and stores by width,
// so tests can check that a 16-byte vectorization reached the machine code (global_load_dwordx4).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braze::device {

// `llvm-objdump -d --mcpu=<arch>` of `code_object`. llvm-objdump is looked for in $ROCM_PATH/llvm/bin,
// /opt/rocm/llvm/bin, then PATH (llvm-objdump, or a versioned llvm-objdump-N of Debian's LLVM);
// nullopt when it is absent. Throws a Runtime error with its output when it fails.
std::optional<std::string> disassembleAmdgcn(const std::vector<char>& code_object, const std::string& arch);

struct AmdgcnAccessCounts {
  std::map<int, int> load_bits;   // bits -> count of global_load_* instructions
  std::map<int, int> store_bits;  // bits -> count of global_store_* instructions
};

// Counts global_load_* and global_store_* by the width their suffix names: byte 8, short 16, dword 32,
// dwordx2 64, dwordx3 96, dwordx4 128 (a _d16 or _d16_hi form by its base: short_d16_hi 16); atomics
// are not counted.
AmdgcnAccessCounts countAmdgcnGlobalAccesses(std::string_view disassembly);

}  // namespace braze::device
