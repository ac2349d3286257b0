// SHA-256, for content-addressed caches: the kernel disk cache names an entry after the digest of its
// key and checks each entry's bytes against a stored digest. A 64-bit hash such as FNV-1a is too weak
// for either job: among many cached kernels a collision would hand back another kernel's cubin, and a
// torn or bit-flipped file could pass its check. The digest is OpenSSL's (libcrypto's EVP interface).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace braze {

using Sha256Digest = std::array<uint8_t, 32>;

// Incremental form, for data that arrives in pieces (an entry's key, log and cubin).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view bytes);
  Sha256Digest finish();  // the object is spent afterwards

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

Sha256Digest sha256(std::string_view bytes);
// 64 lowercase hex digits.
std::string toHex(const Sha256Digest& digest);

}  // namespace braze
