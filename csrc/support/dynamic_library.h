// A shared library opened with dlopen: how braze reaches NVRTC and the CUDA driver without linking
// them, so one build runs (and skips its GPU work) on machines that have neither.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace braze {

class DynamicLibrary {
 public:
  // The first candidate that dlopen accepts (a bare name is searched for as the loader does, a path is
  // opened as is); nullopt when none can be opened.
  static std::optional<DynamicLibrary> open(std::span<const std::string> candidates);
  // The library at `path` where the process has loaded it already (RTLD_NOLOAD: never a second copy,
  // never a first one); nullopt otherwise.
  static std::optional<DynamicLibrary> alreadyLoaded(const std::string& path);

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  // Closes the handle: the library stays loaded while anyone else (another DynamicLibrary, PyTorch)
  // holds it. Owners whose function pointers must outlive static destruction keep theirs alive on
  // purpose (see nvrtc.cpp).
  ~DynamicLibrary();

  // The address of `name`, or nullptr when the library does not export it.
  void* symbol(const char* name) const;
  // `function` set to the address of `name`; whether the library exports it.
  template <typename Function>
  bool resolve(const char* name, Function& function) const {
    function = reinterpret_cast<Function>(symbol(name));
    return function != nullptr;
  }
  // The candidate that was opened, as it was given.
  const std::string& path() const { return path_; }
  // The file the loader opened, every symbolic link resolved ("/usr/lib/.../libamdhip64.so.5.2.21153"):
  // where a library's full version shows when its API does not report it. "" if it cannot be told.
  std::string file() const;

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace braze
