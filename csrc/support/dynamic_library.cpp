#include "support/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>

#include <utility>

namespace braze {

std::optional<DynamicLibrary> DynamicLibrary::open(std::span<const std::string> candidates) {
  for (const std::string& candidate : candidates) {
    // RTLD_LOCAL: the symbols stay out of the global namespace, so a libnvrtc of another version that
    // the host process loaded (PyTorch ships one) is never shadowed or shadowing.
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) return DynamicLibrary(handle, candidate);
  }
  return std::nullopt;
}

std::optional<DynamicLibrary> DynamicLibrary::alreadyLoaded(const std::string& path) {
  if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) return DynamicLibrary(handle, path);
  return std::nullopt;
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

std::string DynamicLibrary::file() const {
  link_map* map = nullptr;
  if (handle_ == nullptr || dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) {
    return "";
  }
  char resolved[PATH_MAX];
  return realpath(map->l_name, resolved) != nullptr ? std::string(resolved) : std::string(map->l_name);
}

void* DynamicLibrary::symbol(const char* name) const { return dlsym(handle_, name); }

}  // namespace braze
