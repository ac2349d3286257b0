#include "device/hip/hiprtc.h"

#include "support/dynamic_library.h"
#include "support/error.h"
#include "device/kernel_source_file.h"
#include "device/hip/rocm_paths.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cstdio>

namespace braze::device {
namespace {

// The hiprtc declarations braze needs, written here so that building braze never needs hiprtc.h.
// hiprtcResult is a C enum (int-sized), hiprtcProgram an opaque pointer; HIPRTC_SUCCESS is 0.
using HiprtcResult = int;
using HiprtcProgram = struct HiprtcProgramOpaque*;
constexpr HiprtcResult kHiprtcSuccess = 0;

struct HiprtcApi {
  DynamicLibrary library;
  HiprtcResult (*createProgram)(HiprtcProgram*, const char* src, const char* name, int num_headers,
                                const char** headers, const char** include_names) = nullptr;
  HiprtcResult (*destroyProgram)(HiprtcProgram*) = nullptr;
  HiprtcResult (*compileProgram)(HiprtcProgram, int num_options, const char** options) = nullptr;
  HiprtcResult (*getProgramLogSize)(HiprtcProgram, size_t*) = nullptr;
  HiprtcResult (*getProgramLog)(HiprtcProgram, char*) = nullptr;
  HiprtcResult (*getCodeSize)(HiprtcProgram, size_t*) = nullptr;
  HiprtcResult (*getCode)(HiprtcProgram, char*) = nullptr;
  const char* (*getErrorString)(HiprtcResult) = nullptr;
};

template <typename Fn>
bool resolve(const DynamicLibrary& library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(library.symbol(name));
  return fn != nullptr;
}

// The first candidate that loads and exports every function; nullptr when none does. Never freed, as
// NVRTC's: kernel caches may compile from static destructors.
const HiprtcApi* loadHiprtc() {
  for (const std::string& candidate : hiprtcCandidates()) {
    // hiprtc left libamdhip64 for libhiprtc in ROCm 5.3: a newer libamdhip64 is not loaded only to find
    // that out. Loading it brings comgr's LLVM into the process, whose static initializers crashed a
    // Python process (Ubuntu 24.04's ROCm 5.7 beside an NVIDIA driver).
    if (candidate.find("libamdhip64") != std::string::npos) {
      const std::optional<std::pair<int, int>> version = installedLibraryVersion(candidate);
      if (version && *version >= std::make_pair(5, 3)) continue;
    }
    std::optional<DynamicLibrary> library = DynamicLibrary::open(std::span<const std::string>(&candidate, 1));
    if (!library) continue;
    auto* api = new HiprtcApi{std::move(*library)};
    const DynamicLibrary& lib = api->library;
    if (resolve(lib, "hiprtcCreateProgram", api->createProgram) &&
        resolve(lib, "hiprtcDestroyProgram", api->destroyProgram) &&
        resolve(lib, "hiprtcCompileProgram", api->compileProgram) &&
        resolve(lib, "hiprtcGetProgramLogSize", api->getProgramLogSize) &&
        resolve(lib, "hiprtcGetProgramLog", api->getProgramLog) && resolve(lib, "hiprtcGetCodeSize", api->getCodeSize) &&
        resolve(lib, "hiprtcGetCode", api->getCode) &&
        resolve(lib, "hiprtcGetErrorString", api->getErrorString)) {
      return api;
    }
    delete api;
  }
  return nullptr;
}

const HiprtcApi* hiprtc() {
  static const HiprtcApi* const api = loadHiprtc();
  return api;
}

const HiprtcApi& requireHiprtc() {
  const HiprtcApi* api = hiprtc();
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, api != nullptr,
                   "hiprtc not found (looked for {}); install ROCm's hiprtc (Debian: libamdhip64-dev "
                   "libhiprtc-builtins5) or set ROCM_PATH",
                   fmt::join(hiprtcCandidates(), ", "));
  return *api;
}

// The ROCm version of the loaded hiprtc, read once from its library's file name (libamdhip64.so.5.2.21153,
// libhiprtc.so.6.2.60200): HIP 5.2's hiprtcVersion answers 9.0 whatever its release, so the API's number
// can neither gate an arch nor tell two compilers apart in a cache key. (0, 0, "") when it cannot be told.
struct FileVersion {
  int major = 0, minor = 0;
  std::string text;  // every dotted number after ".so."
};

const FileVersion& fileVersion() {
  static const FileVersion version = [] {
    FileVersion v;
    const HiprtcApi* api = hiprtc();
    if (api == nullptr) return v;
    const std::string file = api->library.file();
    const size_t so = file.rfind(".so.");
    if (so == std::string::npos || std::sscanf(file.c_str() + so + 4, "%d.%d", &v.major, &v.minor) != 2) return v;
    v.text = file.substr(so + 4);
    return v;
  }();
  return version;
}

// The first hiprtc whose compiler knows an ISA family: MI300 (gfx94x) came with ROCm 6.0, MI350
// (gfx950) with ROCm 7.0. Families not listed (gfx90a, gfx908 ...) predate every hiprtc braze loads.
struct ArchFloor {
  std::string_view prefix;
  int major, minor;
};
constexpr ArchFloor kArchFloors[] = {{"gfx94", 6, 0}, {"gfx95", 7, 0}};

std::string programLog(const HiprtcApi& api, HiprtcProgram program) {
  size_t size = 0;
  if (api.getProgramLogSize(program, &size) != kHiprtcSuccess || size == 0) return {};
  std::string log(size, '\0');
  if (api.getProgramLog(program, log.data()) != kHiprtcSuccess) return {};
  while (!log.empty() && (log.back() == '\0' || std::isspace(static_cast<unsigned char>(log.back())))) log.pop_back();
  return log;
}

}  // namespace

std::vector<std::string> hiprtcCandidates() {
  return rocmLibraryCandidates({"libhiprtc.so", "libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libamdhip64.so",
                                "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"});
}

bool hiprtcAvailable() { return hiprtc() != nullptr; }

std::string hiprtcVersion() { return fileVersion().text; }

std::string hiprtcLibraryPath() {
  const HiprtcApi* api = hiprtc();
  return api == nullptr ? std::string() : api->library.path();
}

std::string hiprtcArchProblem(std::string_view arch) {
  const int major = fileVersion().major, minor = fileVersion().minor;
  for (const ArchFloor& floor : kArchFloors) {
    if (!arch.starts_with(floor.prefix)) continue;
    if (major > floor.major || (major == floor.major && minor >= floor.minor)) return "";
    const std::string have = major == 0 ? "of an unknown version (" + hiprtcLibraryPath() + ")"
                                        : fmt::format("{}.{}", major, minor);
    return fmt::format("hiprtc {} cannot compile for {}: that ISA needs hiprtc {}.{} or newer (ROCm {}.{})", have, arch,
                       floor.major, floor.minor, floor.major, floor.minor);
  }
  return "";
}

std::vector<std::string> hiprtcArguments(const CompileOptions& options) {
  BRAZE_CHECK(options.arch.starts_with("gfx") && options.arch.size() > 3,
              "hiprtc: arch '{}' is not an AMD ISA name such as gfx90a or gfx942", options.arch);
  BRAZE_CHECK(!options.maxrregcount, "hiprtc: maxrregcount ({}) has no hiprtc option; leave it unset for {}",
              options.maxrregcount.value_or(0), options.arch);
  // -ffp-contract=off whatever `fmad` says: HIP's __fadd_rn and __fmul_rn are the plain operators, which
  // the compiler would otherwise fuse into an FMA (one rounding where the reference rounds twice); CUDA's
  // are never fused, so NVRTC's --fmad only affects contraction the source allows. Line info has no
  // hiprtc switch braze needs: the code object keeps none either way.
  return {"--offload-arch=" + options.arch, "-std=c++17", "-O3", "-ffp-contract=off"};
}

CompiledKernel compileHip(std::string_view source, std::string_view what, const CompileOptions& options) {
  const HiprtcApi& api = requireHiprtc();
  const std::vector<std::string> args = [&] {
    try {
      return hiprtcArguments(options);
    } catch (const Error& error) {  // name the kernel whose options are wrong
      throw Error(error.kind(), fmt::format("compileHip({}): {}", what, error.what()));
    }
  }();
  const std::string problem = hiprtcArchProblem(options.arch);
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, problem.empty(), "compileHip({}): {}", what, problem);

  CompiledKernel kernel;
  kernel.options = fmt::format("{}", fmt::join(args, " "));
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  const std::string source_text(source);
  const std::string name = kernelSourcePath(source, what, ".hip");
  HiprtcProgram program = nullptr;
  const HiprtcResult created = api.createProgram(&program, source_text.c_str(), name.c_str(), 0, nullptr, nullptr);
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, created == kHiprtcSuccess,
                   "hiprtc could not create a program for kernel '{}': {}", what, api.getErrorString(created));
  struct Guard {
    const HiprtcApi& api;
    HiprtcProgram program;
    ~Guard() { api.destroyProgram(&program); }
  } guard{api, program};

  // A null after the last option: HIP 5.2's hiprtc reads the array up to one (past the count it is
  // given), and crashes on whatever follows a vector's last element.
  const int option_count = static_cast<int>(argv.size());
  argv.push_back(nullptr);
  const HiprtcResult compiled = api.compileProgram(program, option_count, argv.data());
  kernel.log = programLog(api, program);
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, compiled == kHiprtcSuccess,
                   "hiprtc {} could not compile kernel '{}' for {} ({})\nOptions: {}\n{}\n{}", hiprtcVersion(), what,
                   options.arch, api.getErrorString(compiled), kernel.options, kernel.log,
                   saveKernelSource(source, what, ".hip"));
  size_t size = 0;
  HiprtcResult got = api.getCodeSize(program, &size);
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, got == kHiprtcSuccess && size > 0,
                   "hiprtc produced no code object for kernel '{}' ({}): {}", what, options.arch,
                   api.getErrorString(got));
  kernel.cubin.resize(size);
  got = api.getCode(program, kernel.cubin.data());
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, got == kHiprtcSuccess,
                   "hiprtc could not return the code object of kernel '{}': {}", what, api.getErrorString(got));
  return kernel;
}

}  // namespace braze::device
