#include "device/cuda/sass.h"

#include "support/error.h"
#include "device/binary_tool.h"

#include <algorithm>
#include <cstdlib>

namespace braze::device {
namespace {

std::optional<std::string> findCuobjdump() {
  std::vector<std::string> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* root = std::getenv(var);
    if (root != nullptr && *root != '\0') dirs.push_back(std::string(root) + "/bin");
  }
  dirs.push_back("/usr/local/cuda/bin");
  return findExecutable({"cuobjdump"}, dirs);
}

// The bits one LDG/STG moves, from its opcode's dot-separated modifiers. Whole tokens are matched:
// cache hints such as LTC128B (sm_80's L2 prefetch size) must not read as a 128-bit access.
int accessBits(std::string_view opcode) {
  int bits = 32;
  while (!opcode.empty()) {
    const size_t dot = std::min(opcode.find('.'), opcode.size());
    const std::string_view token = opcode.substr(0, dot);
    opcode.remove_prefix(std::min(dot + 1, opcode.size()));
    if (token == "U8" || token == "S8") bits = 8;
    if (token == "U16" || token == "S16") bits = 16;
    if (token == "64") bits = 64;
    if (token == "128") bits = 128;
    if (token == "256") bits = 256;
  }
  return bits;
}

std::string_view trimLeft(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  return first == std::string_view::npos ? std::string_view() : text.substr(first);
}

// `cuobjdump <flag> <cubin>`'s output; nullopt without cuobjdump.
std::optional<std::string> runCuobjdump(const std::vector<char>& cubin, const char* flag) {
  const std::optional<std::string> cuobjdump = findCuobjdump();
  if (!cuobjdump) return std::nullopt;
  return runOnBinary(*cuobjdump, flag, cubin);
}

}  // namespace

std::optional<std::string> disassemble(const std::vector<char>& cubin) { return runCuobjdump(cubin, "-sass"); }

std::optional<int> registersPerThread(const std::vector<char>& cubin) {
  // "Function braze_s0_inner_persistent:\nREG:55 STACK:0 SHARED:32 LOCAL:0 ..."
  const std::optional<std::string> usage = runCuobjdump(cubin, "-res-usage");
  if (!usage) return std::nullopt;
  const size_t at = usage->find("REG:");
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, at != std::string::npos, "cuobjdump -res-usage printed no REG: {}",
                   *usage);
  return std::atoi(usage->c_str() + at + 4);
}

GlobalAccessCounts countGlobalAccesses(std::string_view sass) {
  // cuobjdump prints an instruction as
  //   /*00c0*/   @!P0 LDG.E.128.CONSTANT R8, desc[UR4][R4.64] ;   /* 0x0000000404087981 */
  // followed on sm_70+ by a line holding only the rest of its encoding, which has no opcode.
  GlobalAccessCounts counts;
  size_t start = 0;
  while (start < sass.size()) {
    const size_t end = std::min(sass.find('\n', start), sass.size());
    std::string_view line = trimLeft(sass.substr(start, end - start));
    start = end + 1;
    if (!line.starts_with("/*")) continue;
    const size_t address_end = line.find("*/");
    if (address_end == std::string_view::npos) continue;
    line = trimLeft(line.substr(address_end + 2));
    if (line.starts_with("@")) line = trimLeft(line.substr(std::min(line.find_first_of(" \t"), line.size())));
    const std::string_view opcode = line.substr(0, std::min(line.find_first_of(" \t;"), line.size()));
    const std::string_view base = opcode.substr(0, std::min(opcode.find('.'), opcode.size()));
    if (base == "LDG") ++counts.load_bits[accessBits(opcode)];
    else if (base == "STG") ++counts.store_bits[accessBits(opcode)];
  }
  return counts;
}

}  // namespace braze::device
