#include "device/hip/amdgcn.h"

#include "device/binary_tool.h"

#include <fmt/format.h>

#include <cstdlib>

namespace braze::device {
namespace {

// The bits a global_load_/global_store_ suffix moves; 0 for one that is not a plain access.
int suffixBits(std::string_view suffix) {
  if (suffix == "ubyte" || suffix == "sbyte" || suffix == "byte") return 8;
  if (suffix == "ushort" || suffix == "sshort" || suffix == "short") return 16;
  if (suffix == "dword") return 32;
  if (suffix == "dwordx2") return 64;
  if (suffix == "dwordx3") return 96;
  if (suffix == "dwordx4") return 128;
  return 0;
}

}  // namespace

std::optional<std::string> disassembleAmdgcn(const std::vector<char>& code_object, const std::string& arch) {
  std::vector<std::string> dirs;
  for (const char* var : {"ROCM_PATH", "HIP_PATH"}) {
    const char* root = std::getenv(var);
    if (root != nullptr && *root != '\0') dirs.push_back(std::string(root) + "/llvm/bin");
  }
  dirs.push_back("/opt/rocm/llvm/bin");
  std::vector<std::string> names = {"llvm-objdump"};
  for (int version = 20; version >= 14; --version) names.push_back(fmt::format("llvm-objdump-{}", version));
  const std::optional<std::string> objdump = findExecutable(names, dirs);
  if (!objdump) return std::nullopt;
  return runOnBinary(*objdump, "-d --mcpu=" + arch, code_object);
}

AmdgcnAccessCounts countAmdgcnGlobalAccesses(std::string_view disassembly) {
  // llvm-objdump prints an instruction as
  //   	global_load_dwordx4 v[0:3], v[0:1], off                    // 00000000176C: DC5C8000 007F0000
  AmdgcnAccessCounts counts;
  size_t start = 0;
  while (start < disassembly.size()) {
    const size_t end = std::min(disassembly.find('\n', start), disassembly.size());
    std::string_view line = disassembly.substr(start, end - start);
    start = end + 1;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos) continue;
    line = line.substr(first);
    const std::string_view opcode = line.substr(0, std::min(line.find_first_of(" \t"), line.size()));
    for (auto [prefix, map] : {std::pair{std::string_view("global_load_"), &counts.load_bits},
                               std::pair{std::string_view("global_store_"), &counts.store_bits}}) {
      if (!opcode.starts_with(prefix)) continue;
      // The _d16 and _d16_hi forms move half a register's worth: the width their base names.
      std::string_view suffix = opcode.substr(prefix.size());
      suffix = suffix.substr(0, suffix.find("_d16"));
      if (const int bits = suffixBits(suffix); bits > 0) ++(*map)[bits];
    }
  }
  return counts;
}

}  // namespace braze::device
