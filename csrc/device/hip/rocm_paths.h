// Where ROCm's libraries are looked for: an explicitly chosen ROCm first ($ROCM_PATH/lib, $HIP_PATH/lib),
// then the loader's search (LD_LIBRARY_PATH, ldconfig: Debian's packages), then ROCm's default place
// (/opt/rocm/lib).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace braze::device {

// Each of `names` in each of those places, in that order.
std::vector<std::string> rocmLibraryCandidates(const std::vector<std::string>& names);

// The (major, minor) of a candidate's file as installed, read from the name its symlinks end at
// (libamdhip64.so.5 -> libamdhip64.so.5.7.31921), without loading it: a bare name is looked for in
// LD_LIBRARY_PATH and the usual library directories. nullopt when no such file is found.
std::optional<std::pair<int, int>> installedLibraryVersion(const std::string& candidate);

}  // namespace braze::device
