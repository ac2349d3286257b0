// Where ROCm's libraries are looked for: an explicitly chosen ROCm first ($ROCM_PATH/lib, $HIP_PATH/lib),
// then the loader's search (LD_LIBRARY_PATH, ldconfig: Debian's packages), then ROCm's default place
// (/opt/rocm/lib).
#pragma once

#include <string>
#include <vector>

namespace braze::runtime {

// Each of `names` in each of those places, in that order.
std::vector<std::string> rocmLibraryCandidates(const std::vector<std::string>& names);

}  // namespace braze::runtime
