#include "device/binary_tool.h"

#include "support/error.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <sys/wait.h>

namespace braze::device {
namespace {

std::string shellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::optional<std::string> findExecutable(const std::vector<std::string>& names, const std::vector<std::string>& dirs) {
  std::vector<std::string> all = dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest(path);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      all.emplace_back(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  for (const std::string& name : names) {
    for (const std::string& dir : all) {
      if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
    }
  }
  return std::nullopt;
}

std::string runOnBinary(const std::string& tool, const std::string& flags, const std::vector<char>& binary) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = fmt::format("{}/braze_binary_XXXXXX", tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp");
  const int fd = mkstemp(path.data());
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, fd >= 0, "{}: cannot create a temp file {}", tool, path);
  const bool written = write(fd, binary.data(), binary.size()) == static_cast<ssize_t>(binary.size());
  close(fd);
  if (!written) {
    unlink(path.c_str());
    BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, false, "{}: cannot write the binary to {}", tool, path);
  }
  // stderr joins stdout so that a failure's message (a missing helper tool, a bad binary) can be shown.
  const std::string command = fmt::format("{} {} {} 2>&1", shellQuote(tool), flags, shellQuote(path));
  std::string output;
  int status = -1;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
    status = pclose(pipe);
  }
  unlink(path.c_str());
  const bool ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  BRAZE_CHECK_KIND(::braze::ErrorKind::Runtime, ok, "{} {} failed (status {}): {}", tool, flags, status, output);
  return output;
}

}  // namespace braze::device
