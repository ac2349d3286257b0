#include "device/kernel_disk_cache.h"

#include "support/sha256.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>
#include <sys/file.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace braze::device {
namespace {

// An entry file:
//   kMagic                                  the format's name and version, one text line
//   sizes of key, options, log, cubin       four little-endian uint64
//   SHA-256 of options + log + cubin        32 bytes: catches torn writes and bit rot (the key needs
//                                           none: it is compared byte for byte with the one asked for)
//   key, options, log, cubin                the bytes themselves
// Bump kFormatVersion and the magic's version together whenever this layout changes: the version names
// the directory too, so old entries are then in another directory and never misread.
constexpr int kFormatVersion = 1;
constexpr std::string_view kMagic = "braze kernel cache entry v1\n";
constexpr size_t kHeaderSize = kMagic.size() + 4 * sizeof(uint64_t) + sizeof(Sha256Digest);
// No kernel comes near this; a larger size field means a corrupt header, not an allocation to attempt.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

void appendU64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

uint64_t readU64(const char* p) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return value;
}

std::string encodeEntry(std::string_view key, const CompiledKernel& kernel) {
  const std::string_view cubin(kernel.cubin.data(), kernel.cubin.size());
  Sha256 checksum;
  checksum.update(kernel.options);
  checksum.update(kernel.log);
  checksum.update(cubin);
  const Sha256Digest digest = checksum.finish();

  std::string out;
  out.reserve(kHeaderSize + key.size() + kernel.options.size() + kernel.log.size() + cubin.size());
  out += kMagic;
  appendU64(out, key.size());
  appendU64(out, kernel.options.size());
  appendU64(out, kernel.log.size());
  appendU64(out, cubin.size());
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  out += key;
  out += kernel.options;
  out += kernel.log;
  out += cubin;
  return out;
}

// An entry's contents, or why there are none: `damage` names what is wrong with a file that is not a
// whole, intact entry. Another key's entry (a hash collision) has neither kernel nor damage.
struct Decoded {
  std::optional<CompiledKernel> kernel;
  std::string_view damage;
};

Decoded decodeEntry(std::string_view bytes, std::string_view key) {
  if (bytes.size() < kHeaderSize || bytes.substr(0, kMagic.size()) != kMagic) return {std::nullopt, "not an entry"};
  const char* sizes = bytes.data() + kMagic.size();
  uint64_t size[4];  // key, options, log, cubin
  for (int i = 0; i < 4; ++i) {
    size[i] = readU64(sizes + 8 * i);
    if (size[i] > kMaxEntryBytes) return {std::nullopt, "a size field is out of range"};
  }
  const std::string_view payload = bytes.substr(kHeaderSize);
  if (payload.size() != size[0] + size[1] + size[2] + size[3] || size[3] == 0) {
    return {std::nullopt, "truncated, or bytes past its end"};
  }
  // The key first: on another key's entry (a hash collision) this is the cheap way out.
  if (size[0] != key.size() || payload.substr(0, size[0]) != key) return {};
  const Sha256Digest digest = sha256(payload.substr(size[0]));
  if (std::memcmp(digest.data(), sizes + 32, digest.size()) != 0) return {std::nullopt, "its checksum does not match"};

  CompiledKernel kernel;
  kernel.options = std::string(payload.substr(size[0], size[1]));
  kernel.log = std::string(payload.substr(size[0] + size[1], size[2]));
  const std::string_view cubin = payload.substr(size[0] + size[1] + size[2]);
  kernel.cubin.assign(cubin.begin(), cubin.end());
  return {std::move(kernel), {}};
}

// The whole file, or nullopt if it cannot be read; `why` then says what is wrong, except for a file that
// does not exist (a plain miss).
std::optional<std::string> readFile(const std::filesystem::path& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && errno != ENOTDIR) why = std::strerror(errno);  // those two: no entry
    return std::nullopt;
  }
  std::optional<std::string> bytes;
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    why = "not a regular file";
  } else if (static_cast<uint64_t>(info.st_size) > 4 * kMaxEntryBytes) {
    why = "too large";
  } else {
    std::string data(static_cast<size_t>(info.st_size), '\0');
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t got = ::read(fd, data.data() + done, data.size() - done);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;  // shrank under us (or an error): whatever was read fails decoding
      done += static_cast<size_t>(got);
    }
    data.resize(done);
    bytes = std::move(data);
  }
  ::close(fd);
  return bytes;
}

bool writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t wrote = ::write(fd, bytes.data(), bytes.size());
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(wrote));
  }
  return true;
}

// Creates `dir` and its missing parents, each 0700 (the umask can only take bits away); directories
// that exist are left as they are. Empty on success, else why not.
std::string createPrivateDirectories(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> missing;
  for (std::filesystem::path path = dir; !path.empty(); path = path.parent_path()) {
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0) {
      if (!S_ISDIR(info.st_mode)) return fmt::format("{} is not a directory", path.string());
      break;
    }
    if (errno != ENOENT) return fmt::format("{}: {}", path.string(), std::strerror(errno));
    missing.push_back(path);
    if (path == path.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    // EEXIST: another process made it in the meantime.
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST) {
      return fmt::format("{}: {}", it->string(), std::strerror(errno));
    }
  }
  return {};
}

// `what`: "is damaged" (its bytes are not a whole entry) or "cannot be read".
void warnUnusable(const std::filesystem::path& path, std::string_view what, std::string_view why) {
  fmt::print(stderr, "braze: warning: kernel cache entry {} {} ({}); compiling the kernel again\n", path.string(),
             what, why);
}

std::optional<std::filesystem::path> absoluteEnvPath(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  std::filesystem::path path(value);
  // The XDG base-directory spec: a relative path in these variables is invalid and ignored.
  if (path.is_relative()) return std::nullopt;
  return path;
}

}  // namespace

std::optional<std::filesystem::path> kernelCacheDirFromEnv() {
  if (const char* off = std::getenv("BRAZE_DISABLE_DISK_CACHE");
      off != nullptr && *off != '\0' && std::string_view(off) != "0") {
    return std::nullopt;
  }
  // Set but empty is the documented way to turn the cache off from a shell: BRAZE_CACHE_DIR= cmd.
  if (const char* dir = std::getenv("BRAZE_CACHE_DIR")) {
    if (*dir == '\0') return std::nullopt;
    return std::filesystem::path(dir);
  }
  if (auto xdg = absoluteEnvPath("XDG_CACHE_HOME")) return *xdg / "braze";
  if (auto home = absoluteEnvPath("HOME")) return *home / ".cache" / "braze";
  return std::nullopt;
}

KernelDiskCache::KernelDiskCache(const std::filesystem::path& root)
    : dir_(root / fmt::format("kernels-v{}", kFormatVersion)) {}

KernelDiskCache::Key::Key(std::string_view key) : text(key), name(toHex(sha256(key))) {}

std::filesystem::path KernelDiskCache::entryPath(const Key& key) const { return dir_ / (key.name + ".entry"); }

std::filesystem::path KernelDiskCache::lockPath(const Key& key) const { return dir_ / (key.name + ".lock"); }

std::optional<CompiledKernel> KernelDiskCache::load(const Key& key) const {
  const std::filesystem::path path = entryPath(key);
  std::string why;
  std::optional<std::string> bytes = readFile(path, why);
  if (!bytes) {
    // Once per cache: an unreadable directory (another user's private cache) would say so per kernel.
    if (!why.empty() && !read_warned_.exchange(true)) warnUnusable(path, "cannot be read", why);
    return std::nullopt;
  }
  Decoded decoded = decodeEntry(*bytes, key.text);
  if (!decoded.damage.empty()) warnUnusable(path, "is damaged", decoded.damage);
  return std::move(decoded.kernel);
}

namespace {

// The lock descriptors this process holds. fork() copies them into the child, and a flock lasts while
// any copy is open: a child that outlives the compile (a data-loader worker forked meanwhile) would
// hold the lock after the parent released it, and the other processes would wait out their patience.
// The child closes its copies (pthread_atfork). Slots, not a locked container: the handler runs in
// the child, where a mutex another thread held at the fork would never be released.
constexpr int kLockSlots = 256;

std::array<std::atomic<int>, kLockSlots>& heldLockSlots() {
  static auto& slots = *[] {
    auto* made = new std::array<std::atomic<int>, kLockSlots>;
    for (auto& slot : *made) slot.store(-1);
    return made;
  }();
  return slots;
}

void closeHeldLocksInChild() {
  for (auto& slot : heldLockSlots()) {
    const int fd = slot.exchange(-1);
    if (fd >= 0) ::close(fd);
  }
}

// The slot `fd` is registered in, or -1 when all are taken (the patience bounds what a child keeps).
int registerHeldLock(int fd) {
  static const bool handler = ::pthread_atfork(nullptr, nullptr, closeHeldLocksInChild) == 0;
  if (!handler) return -1;
  auto& slots = heldLockSlots();
  for (int i = 0; i < kLockSlots; ++i) {
    int free = -1;
    if (slots[i].compare_exchange_strong(free, fd)) return i;
  }
  return -1;
}

}  // namespace

KernelDiskCache::EntryLock::EntryLock(int fd) : fd_(fd), slot_(registerHeldLock(fd)) {}

void KernelDiskCache::EntryLock::release() noexcept {
  if (fd_ < 0) return;
  // Out of the registry first: a child forked between the two steps keeps a copy (bounded by the
  // patience), where the other order could have it close a descriptor the number was reused for.
  if (slot_ >= 0) heldLockSlots()[slot_].store(-1);
  ::close(fd_);  // closing the file releases the flock
  fd_ = slot_ = -1;
}

KernelDiskCache::EntryLock& KernelDiskCache::EntryLock::operator=(EntryLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

KernelDiskCache::EntryLock::~EntryLock() { release(); }

KernelDiskCache::EntryLock KernelDiskCache::lockEntry(const Key& key, std::chrono::milliseconds patience) {
  if (!writable() || !ensureDirectory()) return {};
  // Lock files are never removed: unlinking one while another process waits on it would let a third
  // lock a new file of the same name, and two processes would hold "the" lock. They are empty.
  const std::filesystem::path path = lockPath(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT && remakeDirectory()) {  // the directory was deleted under us
    fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  }
  if (fd < 0) return {};  // a read-only cache: this process stores nothing, so it has nothing to guard
  // Polled rather than blocking, so that a holder that never finishes (a process stopped in a
  // debugger) costs a bounded wait. The pause doubles up to 20 ms: a compile takes 50 ms or more.
  const auto deadline = std::chrono::steady_clock::now() + patience;
  std::chrono::milliseconds pause{1};
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) {
      const bool timed_out = errno == EWOULDBLOCK;
      ::close(fd);
      if (timed_out) {
        fmt::print(stderr,
                   "braze: warning: {} has been locked for {} ms by another process; compiling the kernel "
                   "without waiting for it\n",
                   path.string(), patience.count());
      }
      return {};
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds{20});
  }
  return EntryLock(fd);
}

bool KernelDiskCache::ensureDirectory() {
  if (directory_made_.load(std::memory_order_acquire)) return true;
  const std::string why = createPrivateDirectories(dir_);
  if (!why.empty()) {
    stopWriting(fmt::format("cannot create {}: {}", dir_.string(), why));
    return false;
  }
  directory_made_.store(true, std::memory_order_release);
  return true;
}

bool KernelDiskCache::remakeDirectory() {
  directory_made_.store(false, std::memory_order_release);
  return ensureDirectory();
}

bool KernelDiskCache::store(const Key& key, const CompiledKernel& kernel) {
  if (!writable() || !ensureDirectory()) return false;
  const std::filesystem::path path = entryPath(key);
  // In the same directory as the entry, so rename() replaces it atomically: a concurrent reader opens
  // either the old file or the new one, never a half-written one.
  const std::string pattern = (dir_ / ("." + path.filename().string() + ".XXXXXX")).string();
  std::string temp = pattern;
  int fd = ::mkstemp(temp.data());
  if (fd < 0 && errno == ENOENT && remakeDirectory()) {  // deleted under us ("safe to delete at any time")
    temp = pattern;
    fd = ::mkstemp(temp.data());
  }
  if (fd < 0) {
    stopWriting(fmt::format("cannot create a file in {}: {}", dir_.string(), std::strerror(errno)));
    return false;
  }
  // mkstemp makes the file private (0600); entries hold nothing secret, and a cache directory shared
  // by several users (BRAZE_CACHE_DIR) must be readable by all of them.
  ::fchmod(fd, 0644);
  const bool written = writeAll(fd, encodeEntry(key.text, kernel));
  const int write_errno = errno;
  const bool closed = ::close(fd) == 0;
  if (!written || !closed || ::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = !written ? write_errno : errno;
    ::unlink(temp.c_str());
    stopWriting(fmt::format("cannot write {}: {}", path.string(), std::strerror(error)));
    return false;
  }
  return true;
}

void KernelDiskCache::stopWriting(const std::string& why) {
  // exchange: of several threads failing at once, only one warns.
  if (!writable_.exchange(false)) return;
  fmt::print(stderr,
             "braze: warning: not saving compiled kernels to disk ({}); set BRAZE_CACHE_DIR to a writable "
             "directory, or BRAZE_DISABLE_DISK_CACHE=1 to silence this\n",
             why);
}

}  // namespace braze::device
