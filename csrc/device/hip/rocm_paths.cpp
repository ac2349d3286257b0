#include "device/hip/rocm_paths.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace braze::device {

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

std::optional<std::pair<int, int>> installedLibraryVersion(const std::string& candidate) {
  std::vector<std::filesystem::path> places;
  if (candidate.find('/') != std::string::npos) {
    places.emplace_back(candidate);
  } else {
    std::vector<std::string> dirs;
    if (const char* path = std::getenv("LD_LIBRARY_PATH")) {
      std::stringstream list(path);
      for (std::string dir; std::getline(list, dir, ':');) {
        if (!dir.empty()) dirs.push_back(dir);
      }
    }
    for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"}) dirs.push_back(dir);
    for (const std::string& dir : dirs) places.push_back(std::filesystem::path(dir) / candidate);
  }
  for (const std::filesystem::path& place : places) {
    std::error_code error;
    const std::filesystem::path file = std::filesystem::canonical(place, error);
    if (error) continue;
    const std::string name = file.filename().string();
    const size_t so = name.rfind(".so.");
    int major = 0, minor = 0;
    if (so != std::string::npos && std::sscanf(name.c_str() + so + 4, "%d.%d", &major, &minor) == 2) {
      return std::make_pair(major, minor);
    }
    return std::nullopt;  // found, but its name carries no version
  }
  return std::nullopt;
}

}  // namespace braze::device
