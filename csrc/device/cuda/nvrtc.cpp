#include "device/cuda/nvrtc.h"

#include "support/error.h"
#include "support/dynamic_library.h"
#include "device/kernel_source_file.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

namespace braze::device {
namespace {

// The few NVRTC declarations braze needs, written here so that building braze never needs nvrtc.h.
// nvrtcResult is a C enum (int-sized), nvrtcProgram an opaque pointer; NVRTC_SUCCESS is 0.
using NvrtcResult = int;
using NvrtcProgram = struct NvrtcProgramOpaque*;
constexpr NvrtcResult kNvrtcSuccess = 0;

struct NvrtcApi {
  DynamicLibrary library;
  NvrtcResult (*createProgram)(NvrtcProgram*, const char* src, const char* name, int num_headers,
                               const char* const* headers, const char* const* include_names) = nullptr;
  NvrtcResult (*destroyProgram)(NvrtcProgram*) = nullptr;
  NvrtcResult (*compileProgram)(NvrtcProgram, int num_options, const char* const* options) = nullptr;
  NvrtcResult (*getProgramLogSize)(NvrtcProgram, size_t*) = nullptr;
  NvrtcResult (*getProgramLog)(NvrtcProgram, char*) = nullptr;
  NvrtcResult (*getCubinSize)(NvrtcProgram, size_t*) = nullptr;
  NvrtcResult (*getCubin)(NvrtcProgram, char*) = nullptr;
  NvrtcResult (*version)(int* major, int* minor) = nullptr;
  const char* (*getErrorString)(NvrtcResult) = nullptr;
};

const char* const kNvrtcNames[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};

std::string envOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// Keeps the first of each: CUDA_HOME is often /usr/local/cuda, which is also searched by default.
void appendUnique(std::vector<std::string>& list, std::string item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(std::move(item));
}

std::vector<std::string> nvrtcCandidates() {
  std::vector<std::string> candidates;
  // An explicitly chosen toolkit comes first: its libnvrtc matches the headers cudaIncludeDir() takes
  // from it, where the loader's search might find another CUDA version's.
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const std::string root = envOrEmpty(var);
    if (root.empty()) continue;
    for (const char* name : kNvrtcNames) appendUnique(candidates, fmt::format("{}/lib64/{}", root, name));
  }
  for (const char* name : kNvrtcNames) appendUnique(candidates, name);  // LD_LIBRARY_PATH, ldconfig
  // A toolkit in the default place that was never registered with ldconfig.
  for (const char* name : kNvrtcNames) appendUnique(candidates, std::string("/usr/local/cuda/lib64/") + name);
  return candidates;
}

template <typename Fn>
bool resolve(const DynamicLibrary& library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(library.symbol(name));
  return fn != nullptr;
}

struct LoadedNvrtc {
  std::vector<std::string> candidates;  // what was tried, for the "not found" message
  const NvrtcApi* api = nullptr;        // nullptr when no candidate loads or one lacks a function
};

LoadedNvrtc loadNvrtc() {
  LoadedNvrtc loaded{nvrtcCandidates(), nullptr};
  std::optional<DynamicLibrary> library = DynamicLibrary::open(loaded.candidates);
  if (!library) return loaded;
  // Never freed: kernel caches may compile or query NVRTC from static destructors, after a
  // function-local static holding the library would already have been destroyed.
  auto* api = new NvrtcApi{std::move(*library)};
  const DynamicLibrary& lib = api->library;
  const bool complete = resolve(lib, "nvrtcCreateProgram", api->createProgram) &&
                        resolve(lib, "nvrtcDestroyProgram", api->destroyProgram) &&
                        resolve(lib, "nvrtcCompileProgram", api->compileProgram) &&
                        resolve(lib, "nvrtcGetProgramLogSize", api->getProgramLogSize) &&
                        resolve(lib, "nvrtcGetProgramLog", api->getProgramLog) &&
                        resolve(lib, "nvrtcGetCUBINSize", api->getCubinSize) &&
                        resolve(lib, "nvrtcGetCUBIN", api->getCubin) &&
                        resolve(lib, "nvrtcVersion", api->version) &&
                        resolve(lib, "nvrtcGetErrorString", api->getErrorString);
  if (!complete) {  // older than CUDA 11.1 (no nvrtcGetCUBIN): as good as absent
    delete api;
    return loaded;
  }
  loaded.api = api;
  return loaded;
}

// Loaded once per process; C++ makes the first call's initialization thread-safe.
const LoadedNvrtc& nvrtc() {
  static const LoadedNvrtc loaded = loadNvrtc();
  return loaded;
}

const NvrtcApi& requireNvrtc() {
  const LoadedNvrtc& loaded = nvrtc();
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, loaded.api != nullptr,
                   "NVRTC not found (looked for {}); install the CUDA toolkit or set CUDA_HOME",
                   fmt::join(loaded.candidates, ", "));
  return *loaded.api;
}

std::vector<std::string> includeDirCandidates() {
  std::vector<std::string> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const std::string root = envOrEmpty(var);
    if (!root.empty()) appendUnique(dirs, root + "/include");
  }
  for (const char* dir : {"/usr/local/cuda/include", "/opt/cuda/include", "/usr/lib/cuda/include"}) {
    appendUnique(dirs, dir);
  }
  return dirs;
}

bool isFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string programLog(const NvrtcApi& api, NvrtcProgram program) {
  size_t size = 0;
  if (api.getProgramLogSize(program, &size) != kNvrtcSuccess || size == 0) return {};
  std::string log(size, '\0');
  if (api.getProgramLog(program, log.data()) != kNvrtcSuccess) return {};
  // The size counts the terminating NUL, so a clean compile has a log of one NUL: trim to "".
  while (!log.empty() && (log.back() == '\0' || std::isspace(static_cast<unsigned char>(log.back())))) log.pop_back();
  return log;
}

class ProgramGuard {
 public:
  ProgramGuard(const NvrtcApi& api, NvrtcProgram program) : api_(api), program_(program) {}
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;
  ~ProgramGuard() { api_.destroyProgram(&program_); }

 private:
  const NvrtcApi& api_;
  NvrtcProgram program_;
};

}  // namespace

bool nvrtcAvailable() { return nvrtc().api != nullptr && !cudaIncludeDir().empty(); }

std::string nvrtcVersion() {
  const NvrtcApi* api = nvrtc().api;
  int major = 0;
  int minor = 0;
  if (api == nullptr || api->version(&major, &minor) != kNvrtcSuccess) return "";
  return fmt::format("{}.{}", major, minor);
}

std::string nvrtcLibraryPath() {
  const NvrtcApi* api = nvrtc().api;
  return api == nullptr ? std::string() : api->library.path();
}

std::string cudaIncludeDir() {
  // cuda_bf16.h, not cuda.h: it is the header generated kernels need, and a driver-only install
  // ships cuda.h without it.
  for (const std::string& dir : includeDirCandidates()) {
    if (isFile(dir + "/cuda_bf16.h")) return dir;
  }
  return "";
}

std::vector<std::string> nvrtcArguments(const CompileOptions& options) {
  BRAZE_CHECK(options.arch.starts_with("sm_"),
              "NVRTC: arch '{}' is not a real architecture such as sm_90 (a cubin needs one)", options.arch);
  BRAZE_CHECK(!options.maxrregcount || *options.maxrregcount > 0, "NVRTC: maxrregcount must be positive, got {}",
              options.maxrregcount.value_or(0));
  const std::string include_dir = cudaIncludeDir();
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, !include_dir.empty(),
                   "CUDA headers not found: none of {} has cuda_bf16.h; set CUDA_HOME to the CUDA toolkit",
                   fmt::join(includeDirCandidates(), ", "));

  // -default-device: a function or variable declared without __host__/__device__ (a constexpr helper, a
  // lookup table) is compiled for the device, so a kernel may use it instead of failing to compile.
  std::vector<std::string> args = {"--gpu-architecture=" + options.arch, "-default-device", "--std=c++17"};
  // NVRTC has no built-in CUDA headers: cuda_bf16.h, cuda_fp16.h and cuda_fp8.h come from the toolkit's
  // include dir (under NVRTC they skip <nv/target>, <utility> and <cstring>, which NVRTC provides).
  // CUDA 13 moved libcu++ (<cuda/std/...>) to include/cccl, so that dir is added when present; the
  // half and fp8 headers do not need it, but kernels using cuda::std do.
  args.push_back("-I" + include_dir);
  if (std::error_code ec; std::filesystem::is_directory(include_dir + "/cccl/cuda/std", ec)) {
    args.push_back("-I" + include_dir + "/cccl");
  }
  // -minimal (NVRTC 12.4 on) leaves out texture, device-runtime and launch declarations, which kernels
  // never use: 10-20 ms less front end per kernel, the same code.
  if (const NvrtcApi* api = nvrtc().api; api != nullptr) {
    int major = 0, minor = 0;
    if (api->version(&major, &minor) == kNvrtcSuccess && (major > 12 || (major == 12 && minor >= 4))) {
      args.push_back("-minimal");
    }
  }
  args.push_back(options.fmad ? "--fmad=true" : "--fmad=false");
  if (options.maxrregcount) args.push_back(fmt::format("--maxrregcount={}", *options.maxrregcount));
  if (options.lineinfo) args.push_back("-lineinfo");
  return args;
}

void saveSourceForProfilers(std::string_view source, std::string_view what) {
  const std::string path = kernelSourcePath(source, what, ".cu");
  if (isFile(path)) return;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << source;  // a failure leaves profilers without the source, nothing worse
}

CompiledKernel compileCuda(std::string_view source, std::string_view what, const CompileOptions& options) {
  const NvrtcApi& api = requireNvrtc();
  const std::vector<std::string> args = [&] {
    try {
      return nvrtcArguments(options);
    } catch (const Error& error) {  // name the kernel whose options are wrong
      throw Error(error.kind(), fmt::format("compileCuda({}): {}", what, error.what()));
    }
  }();

  CompiledKernel kernel;
  kernel.options = fmt::format("{}", fmt::join(args, " "));
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());

  // The program is named after the file its source is saved to on failure, so the log's
  // "file(line): error" points into that file.
  const std::string saved_path = kernelSourcePath(source, what, ".cu");
  const std::string source_text(source);  // NVRTC wants a NUL-terminated string
  NvrtcProgram program = nullptr;
  const NvrtcResult created =
      api.createProgram(&program, source_text.c_str(), saved_path.c_str(), 0, nullptr, nullptr);
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, created == kNvrtcSuccess,
                   "NVRTC could not create a program for kernel '{}': {}", what, api.getErrorString(created));
  ProgramGuard guard(api, program);

  const NvrtcResult compiled = api.compileProgram(program, static_cast<int>(argv.size()), argv.data());
  kernel.log = programLog(api, program);
  if (compiled == kNvrtcSuccess && options.lineinfo) saveSourceForProfilers(source, what);
  if (compiled != kNvrtcSuccess) {
    const std::string where = saveKernelSource(source, what, ".cu");
    BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, false,
                     "NVRTC {} could not compile kernel '{}' for {} ({})\nOptions: {}\n{}\n{}", nvrtcVersion(), what,
                     options.arch, api.getErrorString(compiled), kernel.options, kernel.log, where);
  }

  size_t size = 0;
  NvrtcResult got = api.getCubinSize(program, &size);
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, got == kNvrtcSuccess && size > 0,
                   "NVRTC produced no cubin for kernel '{}' ({}): {}", what, options.arch, api.getErrorString(got));
  kernel.cubin.resize(size);
  got = api.getCubin(program, kernel.cubin.data());
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, got == kNvrtcSuccess,
                   "NVRTC could not return the cubin of kernel '{}': {}", what, api.getErrorString(got));
  return kernel;
}

}  // namespace braze::device
