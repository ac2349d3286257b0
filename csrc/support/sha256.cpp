#include "support/sha256.h"

#include <cstring>

namespace braze::runtime {
namespace {

using u128 = unsigned __int128;

// The largest x with x^n <= value (n = 2 or 3), by bisection: exact in integers, and constexpr.
constexpr uint64_t integerRoot(u128 value, int n) {
  uint64_t lo = 0;
  uint64_t hi = uint64_t{1} << 40;  // the roots asked for are below 2^36, and (2^40)^3 fits in 128 bits
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    u128 power = 1;
    for (int i = 0; i < n; ++i) power *= mid;
    if (power <= value) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

constexpr std::array<uint32_t, 64> firstPrimes() {
  std::array<uint32_t, 64> primes{};
  size_t count = 0;
  for (uint32_t candidate = 2; count < primes.size(); ++candidate) {
    bool prime = true;
    for (size_t i = 0; i < count && primes[i] * primes[i] <= candidate; ++i) prime = prime && candidate % primes[i] != 0;
    if (prime) primes[count++] = candidate;
  }
  return primes;
}

// The standard defines its constants as the first 32 bits of the fractional parts of the square roots
// (initial state) and cube roots (round constants) of the first primes; computing them exactly here
// leaves no 72-number table to mistype. frac(root(p)) * 2^32 = root(p * 2^(32n)) mod 2^32.
constexpr std::array<uint32_t, 64> kPrimes = firstPrimes();

constexpr std::array<uint32_t, 8> initialState() {
  std::array<uint32_t, 8> h{};
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint32_t>(integerRoot(u128{kPrimes[i]} << 64, 2));
  return h;
}

constexpr std::array<uint32_t, 64> roundConstants() {
  std::array<uint32_t, 64> k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint32_t>(integerRoot(u128{kPrimes[i]} << 96, 3));
  return k;
}

constexpr std::array<uint32_t, 8> kInitialState = initialState();
constexpr std::array<uint32_t, 64> kRoundConstants = roundConstants();
static_assert(kInitialState[0] == 0x6a09e667u && kRoundConstants[63] == 0xc67178f2u);

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

uint32_t loadBigEndian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

Sha256::Sha256() : state_(kInitialState) {}

void Sha256::compress(const uint8_t* block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) w[i] = loadBigEndian(block + 4 * i);
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRoundConstants[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a, state_[1] += b, state_[2] += c, state_[3] += d;
  state_[4] += e, state_[5] += f, state_[6] += g, state_[7] += h;
}

void Sha256::update(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  total_bytes_ += n;
  if (pending_size_ > 0) {
    const size_t take = std::min(n, pending_.size() - pending_size_);
    std::memcpy(pending_.data() + pending_size_, p, take);
    pending_size_ += take;
    p += take;
    n -= take;
    if (pending_size_ < pending_.size()) return;
    compress(pending_.data());
    pending_size_ = 0;
  }
  for (; n >= 64; p += 64, n -= 64) compress(p);  // whole blocks straight from the input, no copy
  std::memcpy(pending_.data(), p, n);
  pending_size_ = n;
}

Sha256Digest Sha256::finish() {
  // Padding: a 1 bit, zeros up to 56 mod 64 bytes, then the message length in bits, big-endian.
  const uint64_t bits = total_bytes_ * 8;
  uint8_t tail[72] = {0x80};
  const size_t zeros = (pending_size_ < 56 ? 56 : 120) - pending_size_;
  for (int i = 0; i < 8; ++i) tail[zeros + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(std::string_view(reinterpret_cast<const char*>(tail), zeros + 8));
  Sha256Digest digest;
  for (size_t i = 0; i < state_.size(); ++i) {
    for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  }
  return digest;
}

Sha256Digest sha256(std::string_view bytes) {
  Sha256 hasher;
  hasher.update(bytes);
  return hasher.finish();
}

std::string toHex(const Sha256Digest& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest.size());
  for (uint8_t byte : digest) {
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 15];
  }
  return hex;
}

}  // namespace braze::runtime
