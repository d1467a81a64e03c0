#include "messages/chunk_hash.hpp"

#include <array>
#include <bit>
#include <cstring>

namespace lmcc::msg {
namespace {

constexpr uint64_t mersenne61 = (uint64_t{1} << 61) - 1; // CPython's _PyHASH_MODULUS

// xxHash constants used by CPython's tuplehash (Objects/tupleobject.c).
constexpr uint64_t xx_prime1 = 11400714785074694791ULL;
constexpr uint64_t xx_prime2 = 14029467366897019727ULL;
constexpr uint64_t xx_prime5 = 2870177450012600261ULL;

int64_t fix_minus_one(int64_t h) noexcept {
  return h == -1 ? -2 : h;
}

int64_t hash_int64(int64_t v) noexcept {
  if (v >= 0)
    return fix_minus_one(static_cast<int64_t>(static_cast<uint64_t>(v) % mersenne61));
  // |v| as unsigned, safe for INT64_MIN
  uint64_t magnitude = ~static_cast<uint64_t>(v) + 1;
  return fix_minus_one(-static_cast<int64_t>(magnitude % mersenne61));
}

int64_t hash_token(int64_t v) noexcept {
  return hash_int64(v);
}
int64_t hash_token(const wire_int& v) noexcept {
  return python_hash_int(v);
}

// Incremental tuplehash so that a chunk's token tuple needs no temporary array.
class tuple_hash_state {
public:
  void add(int64_t item_hash) noexcept {
    acc_ += static_cast<uint64_t>(item_hash) * xx_prime2;
    acc_ = std::rotl(acc_, 31);
    acc_ *= xx_prime1;
    ++count_;
  }
  int64_t finish() const noexcept {
    uint64_t acc = acc_ + (count_ ^ (xx_prime5 ^ 3527539UL));
    if (acc == UINT64_MAX)
      return 1546275796;
    return static_cast<int64_t>(acc);
  }

private:
  uint64_t acc_ = xx_prime5;
  uint64_t count_ = 0;
};

// -- SipHash-1-3 as in CPython's Python/pyhash.c ----------------------------------

struct sip_state {
  uint64_t v0, v1, v2, v3;
  void round() noexcept {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  }
};

uint64_t load_le64(const unsigned char* p) noexcept {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

uint64_t siphash13(uint64_t k0, uint64_t k1, std::string_view data) noexcept {
  sip_state s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
              k1 ^ 0x7465646279746573ULL};
  auto* in = reinterpret_cast<const unsigned char*>(data.data());
  size_t size = data.size();
  uint64_t b = static_cast<uint64_t>(size) << 56;
  while (size >= 8) {
    uint64_t m = load_le64(in);
    s.v3 ^= m;
    s.round();
    s.v0 ^= m;
    in += 8;
    size -= 8;
  }
  uint64_t t = 0;
  for (size_t i = 0; i < size; ++i)
    t |= static_cast<uint64_t>(in[i]) << (8 * i);
  b |= t;
  s.v3 ^= b;
  s.round();
  s.v0 ^= b;
  s.v2 ^= 0xff;
  s.round();
  s.round();
  s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

// _Py_HashSecret from PYTHONHASHSEED (Python/bootstrap_hash.c lcg_urandom):
// 24 bytes of an LCG; SipHash takes k0, k1 = the first two little-endian words.
std::array<uint64_t, 2> hash_secret_from_seed(uint32_t seed) noexcept {
  if (seed == 0)
    return {0, 0};
  std::array<unsigned char, 24> buffer{};
  uint32_t x = seed;
  for (auto& byte : buffer) {
    x = x * 214013U + 2531011U;
    byte = static_cast<unsigned char>((x >> 16) & 0xff);
  }
  return {load_le64(buffer.data()), load_le64(buffer.data() + 8)};
}

} // namespace

int64_t python_hash_int(const wire_int& v) noexcept {
  if (v.is_negative())
    return hash_int64(v.as_int64());
  return fix_minus_one(static_cast<int64_t>(v.bits() % mersenne61));
}

int64_t python_hash_tuple(std::span<const int64_t> item_hashes) noexcept {
  tuple_hash_state st;
  for (int64_t h : item_hashes)
    st.add(h);
  return st.finish();
}

int64_t python_hash_latin1_str(std::string_view text, uint32_t seed) noexcept {
  if (text.empty())
    return 0; // CPython: hash('') == 0 whatever the seed
  auto [k0, k1] = hash_secret_from_seed(seed);
  return fix_minus_one(static_cast<int64_t>(siphash13(k0, k1, text)));
}

int64_t none_hash_from_python_hash_seed(uint32_t seed) noexcept {
  return python_hash_latin1_str(std::to_string(seed), seed);
}

template <class Token>
std::vector<token_chunk> chunk_hasher::chain(std::span<const Token> tokens) const {
  const uint64_t size = options_.chunk_size;
  std::vector<token_chunk> out;
  if (size == 0)
    return out;
  out.reserve((tokens.size() + size - 1) / size);
  const int64_t empty_tuple_hash = tuple_hash_state{}.finish();
  int64_t prefix = options_.none_hash;
  for (uint64_t start = 0; start < tokens.size(); start += size) {
    uint64_t end = std::min<uint64_t>(start + size, tokens.size());
    tuple_hash_state token_tuple;
    for (uint64_t i = start; i < end; ++i)
      token_tuple.add(hash_token(tokens[i]));
    tuple_hash_state outer;
    outer.add(hash_int64(prefix));
    outer.add(token_tuple.finish());
    if (options_.shape == chunk_tuple_shape::prefix_tokens_extra)
      outer.add(empty_tuple_hash);
    prefix = outer.finish();
    out.push_back(token_chunk{start, end, prefix});
  }
  return out;
}

std::vector<token_chunk> chunk_hasher::chunks(std::span<const wire_int> tokens) const {
  return chain(tokens);
}

std::vector<token_chunk> chunk_hasher::chunks(std::span<const int64_t> tokens) const {
  return chain(tokens);
}

} // namespace lmcc::msg
