#include "support/sha256.h"

#include "support/error.h"

#include <openssl/evp.h>

namespace braze {

struct Sha256::Context {
  EVP_MD_CTX* md = nullptr;
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  context_->md = EVP_MD_CTX_new();
  BRAZE_ASSERT(context_->md != nullptr && EVP_DigestInit_ex(context_->md, EVP_sha256(), nullptr) == 1,
               "OpenSSL could not start a SHA-256 digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(context_->md); }

void Sha256::update(std::string_view bytes) {
  BRAZE_ASSERT(EVP_DigestUpdate(context_->md, bytes.data(), bytes.size()) == 1, "OpenSSL's SHA-256 update failed");
}

Sha256Digest Sha256::finish() {
  Sha256Digest digest{};
  unsigned size = 0;
  BRAZE_ASSERT(EVP_DigestFinal_ex(context_->md, digest.data(), &size) == 1 && size == digest.size(),
               "OpenSSL's SHA-256 gave {} bytes", size);
  return digest;
}

Sha256Digest sha256(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.finish();
}

std::string toHex(const Sha256Digest& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest.size());
  for (uint8_t byte : digest) {
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 0xf];
  }
  return hex;
}

}  // namespace braze
