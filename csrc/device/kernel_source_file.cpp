#include "device/kernel_source_file.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>

namespace braze::device {

std::string kernelSourcePath(std::string_view source, std::string_view what, std::string_view extension) {
  std::string name;
  for (char c : what) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string dir = tmpdir == nullptr || *tmpdir == '\0' ? "/tmp" : tmpdir;
  return fmt::format("{}/braze_{}_{:016x}{}", dir, name, std::hash<std::string_view>{}(source), extension);
}

std::string saveKernelSource(std::string_view source, std::string_view what, std::string_view extension) {
  const std::string path = kernelSourcePath(source, what, extension);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << source;
  file.close();
  return file ? fmt::format("Source saved to {}", path) : fmt::format("(could not save the source to {})", path);
}

}  // namespace braze::device
