// SASS inspection: disassemble a cubin with cuobjdump and count its global loads and stores by width,
// so tests and benchmarks can check that a vectorization reached the machine code.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace braze::device {

// `cuobjdump -sass` of `cubin` (written to a temp file). cuobjdump is looked for in $CUDA_HOME/bin,
// $CUDA_PATH/bin, /usr/local/cuda/bin, then PATH; nullopt when it is absent. Throws a Runtime error
// with cuobjdump's output when it fails (it needs nvdisasm beside it or on PATH).
std::optional<std::string> disassemble(const std::vector<char>& cubin);

// The registers per thread of the cubin's (first) kernel, from `cuobjdump -res-usage`; nullopt
// without cuobjdump. What decides how many blocks fit on an SM.
std::optional<int> registersPerThread(const std::vector<char>& cubin);

struct GlobalAccessCounts {
  std::map<int, int> load_bits;   // bits -> count of LDG instructions (32 when no width suffix)
  std::map<int, int> store_bits;  // bits -> count of STG instructions
};

// Counts LDG and STG in cuobjdump's SASS, predicated ones included, by the width their opcode names:
// U8/S8 8, U16/S16 16, none 32, 64, 128, 256 (sm_100's ENL2.256). Other global-memory opcodes
// (LDGSTS, REDG, ATOMG, the generic LD/ST) are not counted.
GlobalAccessCounts countGlobalAccesses(std::string_view sass);

}  // namespace braze::device
