#include "device/hip/rocm_paths.h"

#include <cstdlib>

namespace braze::runtime {

std::vector<std::string> rocmLibraryCandidates(const std::vector<std::string>& names) {
  std::vector<std::string> candidates;
  for (const char* root : {std::getenv("ROCM_PATH"), std::getenv("HIP_PATH")}) {
    if (root == nullptr || *root == '\0') continue;
    for (const std::string& name : names) candidates.push_back(std::string(root) + "/lib/" + name);
  }
  for (const std::string& name : names) candidates.push_back(name);
  for (const std::string& name : names) candidates.push_back("/opt/rocm/lib/" + name);
  return candidates;
}

}  // namespace braze::runtime
