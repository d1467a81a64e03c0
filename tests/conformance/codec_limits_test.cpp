// decode_limits against hostile frames, with hand-written frames.
//
// Hostile frames must be refused before any large allocation: this executable
// replaces the global operator new/delete (and, on glibc without a sanitizer,
// malloc/calloc/realloc/free, which msgpack-cxx's zone uses) to record the
// largest single block requested while a decode runs.
#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"
#include "tests/conformance/test_support.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// -- allocation tracking ----------------------------------------------------------------

namespace {

std::atomic<bool> tracking{false};
std::atomic<size_t> largest_block{0};

void note_allocation(size_t n) noexcept {
  if (!tracking.load(std::memory_order_relaxed))
    return;
  size_t seen = largest_block.load(std::memory_order_relaxed);
  while (n > seen && !largest_block.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
}

} // namespace

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) ||                         \
    __has_feature(thread_sanitizer)
#define LMCC_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LMCC_SANITIZED 1
#endif

// Sanitizers own malloc; there, only operator new is tracked.
#if defined(__GLIBC__) && !defined(LMCC_SANITIZED)
#define LMCC_TRACKS_MALLOC 1
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);

void* malloc(size_t n) noexcept {
  note_allocation(n);
  return __libc_malloc(n);
}
void* calloc(size_t count, size_t n) noexcept {
  note_allocation(count * n);
  return __libc_calloc(count, n);
}
void* realloc(void* p, size_t n) noexcept {
  note_allocation(n);
  return __libc_realloc(p, n);
}
void free(void* p) noexcept {
  __libc_free(p);
}
}
#endif

void* operator new(size_t n) {
#ifndef LMCC_TRACKS_MALLOC
  note_allocation(n);
#endif
  if (void* p = std::malloc(n == 0 ? 1 : n))
    return p;
  throw std::bad_alloc{};
}
void* operator new[](size_t n) {
  return ::operator new(n);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  return ::operator new(n, std::nothrow);
}
// Out of line, so that GCC does not see free() meet a pointer from operator new
// after inlining and warn (-Wmismatched-new-delete): they are a matched pair here.
[[gnu::noinline]] static void release(void* p) noexcept {
  std::free(p);
}

void operator delete(void* p) noexcept {
  release(p);
}
void operator delete[](void* p) noexcept {
  release(p);
}
void operator delete(void* p, size_t) noexcept {
  release(p);
}
void operator delete[](void* p, size_t) noexcept {
  release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  release(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  release(p);
}

namespace {

namespace msg = lmcc::msg;
using lmcc::test::from_hex;
using lmcc::test::mp;
using lmcc::test::to_hex;

constexpr size_t one_mib = size_t{1} << 20;

/// Runs `f` and returns the largest single block allocated meanwhile.
template <class F>
size_t largest_allocation_in(F&& f) {
  largest_block.store(0);
  tracking.store(true);
  f();
  tracking.store(false);
  return largest_block.load();
}

/// Decodes under tracking; returns the result and the largest block.
std::pair<msg::expected<msg::Msg>, size_t> decode_tracked(const std::string& frame,
                                                          const msg::decode_limits& limits = {}) {
  std::optional<msg::expected<msg::Msg>> result;
  size_t largest =
      largest_allocation_in([&] { result.emplace(msg::decode_msgpack(frame, limits)); });
  return {std::move(*result), largest};
}

std::pair<msg::expected<msg::Msg>, size_t>
decode_json_tracked(const std::string& text, const msg::decode_limits& limits = {}) {
  std::optional<msg::expected<msg::Msg>> result;
  size_t largest = largest_allocation_in([&] { result.emplace(msg::decode_json(text, limits)); });
  return {std::move(*result), largest};
}

std::string error_of(const msg::expected<msg::Msg>& r) {
  return r ? std::string("<accepted as ") + std::string(msg::type_tag_of(*r)) + ">"
           : r.error().message;
}

/// {"type": "ErrorMsg", "error": "x", "extra": <extra>}: an unknown field
/// that the decoder skips, but only after the limits have looked at it.
std::string error_msg_with_extra(std::string_view extra) {
  return mp{}.map(3).str("type").str("ErrorMsg").str("error").str("x").str("extra").raw(extra);
}

std::string nested_arrays(size_t depth, std::string_view innermost) {
  return std::string(depth, '\x91') + std::string(innermost);
}

std::string json_error_msg_with_extra(std::string_view extra) {
  return R"({"type":"ErrorMsg","error":"x","extra":)" + std::string(extra) + "}";
}

std::string json_nested_arrays(size_t depth) {
  return std::string(depth, '[') + "1" + std::string(depth, ']');
}

// -- the tracker and the hand writer work -------------------------------------------------

TEST(allocation_tracker, sees_a_large_operator_new) {
  size_t largest = largest_allocation_in([] {
    void* p = ::operator new(2 * one_mib);
    ::operator delete(p);
  });
  EXPECT_GE(largest, 2 * one_mib);
}

TEST(allocation_tracker, sees_a_large_malloc_as_msgpack_zones_use) {
#ifdef LMCC_TRACKS_MALLOC
  void* (*volatile allocate)(size_t) = &std::malloc;
  size_t largest = largest_allocation_in([&] { std::free(allocate(3 * one_mib)); });
  EXPECT_GE(largest, 3 * one_mib);
#else
  GTEST_SKIP() << "malloc belongs to the sanitizer in this build";
#endif
}

TEST(hand_writer, reproduces_the_msgspec_bytes_of_the_spec_examples) {
  // shared/spec/lmcache-protocol.md section 3.5 (= wire-golden handmade/00 and /05).
  EXPECT_EQ(to_hex(mp{}.map(6)
                       .str("type")
                       .str("RegisterMsg")
                       .str("instance_id")
                       .str("inst1")
                       .str("worker_id")
                       .uint(0)
                       .str("ip")
                       .str("10.0.0.5")
                       .str("port")
                       .uint(8500)
                       .str("peer_init_url")
                       .nil()),
            "86a474797065ab52656769737465724d7367ab696e7374616e63655f6964a5696e737431a9776f726b65"
            "725f696400a26970a831302e302e302e35a4706f7274cd2134ad706565725f696e69745f75726cc0");
  EXPECT_EQ(to_hex(mp{}.map(5)
                       .str("type")
                       .str("BatchedKVOperationMsg")
                       .str("instance_id")
                       .str("inst1")
                       .str("worker_id")
                       .uint(0)
                       .str("location")
                       .str("LocalCPUBackend")
                       .str("operations")
                       .array(2)
                       .map(3)
                       .str("op_type")
                       .str("admit")
                       .str("key")
                       .sint(-1983622685967036160)
                       .str("seq_num")
                       .uint(0)
                       .map(3)
                       .str("op_type")
                       .str("evict")
                       .str("key")
                       .sint(42)
                       .str("seq_num")
                       .sint(1)),
            "85a474797065b5426174636865644b564f7065726174696f6e4d7367ab696e7374616e63655f6964a5696e"
            "737431a9776f726b65725f696400a86c6f636174696f6eaf4c6f63616c4350554261636b656e64aa6f7065"
            "726174696f6e739283a76f705f74797065a561646d6974a36b6579d3e478c1ad42875100a77365715f6e75"
            "6d0083a76f705f74797065a56576696374a36b65792aa77365715f6e756d01");
  EXPECT_EQ(to_hex(mp{}.sint(-32).sint(-33).sint(-129).sint(-32769).uint(255).uint(65536)),
            "e0d0dfd1ff7fd2ffff7fffccffce00010000");
}

// -- hostile length headers and nesting ---------------------------------------------------

struct hostile_frame {
  std::string name;
  std::string bytes;
};

std::vector<hostile_frame> hostile_msgpack_frames() {
  const std::string lookup_tokens =
      mp{}.map(3).str("type").str("LookupMsg").str("event_id").str("e").str("tokens");
  return {
      {"array32 of 2^32-1 elements, nothing after", from_hex("ddffffffff")},
      {"map32 of 2^32-1 entries, nothing after", from_hex("dfffffffff")},
      {"str32 of 2^32-1 bytes, nothing after", from_hex("dbffffffff")},
      {"bin32 of 2^32-1 bytes, nothing after", from_hex("c6ffffffff")},
      {"LookupMsg.tokens as array32 of 2^32-1", lookup_tokens + from_hex("ddffffffff")},
      {"LookupMsg.tokens as array32 just under max_array_length",
       lookup_tokens + from_hex("dd003fffff") + "\x01\x02"},
      {"LookupMsg.tokens as array16 of 65535", lookup_tokens + from_hex("dcffff") + "\x01"},
      {"RegisterRetMsg.extra_config as map32 of 2^32-1", mp{}.map(2)
                                                             .str("type")
                                                             .str("RegisterRetMsg")
                                                             .str("extra_config")
                                                             .raw(from_hex("dfffffffff"))},
      {"RegisterRetMsg.extra_config as map32 just under max_map_length",
       mp{}.map(2)
           .str("type")
           .str("RegisterRetMsg")
           .str("extra_config")
           .raw(from_hex("df0000ffff"))},
      {"ErrorMsg.error as str32 of 2^32-1",
       mp{}.map(2).str("type").str("ErrorMsg").str("error").raw(from_hex("dbffffffff"))},
      {"ErrorMsg.error as str32 of 15 MiB, 4 bytes present", mp{}.map(2)
                                                                 .str("type")
                                                                 .str("ErrorMsg")
                                                                 .str("error")
                                                                 .raw(from_hex("db00f00000"))
                                                                 .raw("abcd")},
      {"unknown field holding bin32 of 2^32-1", error_msg_with_extra(from_hex("c6ffffffff"))},
      {"unknown field holding nested array32 headers",
       error_msg_with_extra(from_hex("dd0000ffffdd0000ffffdd0000ffff"))},
      {"unknown field nested 10,000 deep", error_msg_with_extra(nested_arrays(10000, "\x01"))},
      {"unknown field nested 10,000 deep, unterminated",
       error_msg_with_extra(nested_arrays(10000, ""))},
      {"HeartbeatRetMsg args nested 10,000 deep", mp{}.map(2)
                                                      .str("type")
                                                      .str("HeartbeatRetMsg")
                                                      .str("commands")
                                                      .array(1)
                                                      .map(3)
                                                      .str("command_type")
                                                      .str("full_sync")
                                                      .str("reason")
                                                      .nil()
                                                      .str("args")
                                                      .map(1)
                                                      .str("a")
                                                      .raw(nested_arrays(10000, "\x01"))},
  };
}

TEST(hostile_frames, are_refused_without_allocating_any_block_above_1_mib) {
  for (const auto& [name, bytes] : hostile_msgpack_frames()) {
    SCOPED_TRACE(name);
    auto [result, largest] = decode_tracked(bytes);
    EXPECT_FALSE(result) << error_of(result);
    if (!result) {
      EXPECT_FALSE(result.error().message.empty());
    }
    EXPECT_LE(largest, one_mib);
  }
}

TEST(hostile_frames, refuse_a_header_longer_than_the_frame_as_truncated) {
  for (const char* hex : {"ddffffffff", "dfffffffff", "dbffffffff", "c6ffffffff"}) {
    SCOPED_TRACE(hex);
    auto r = msg::decode_msgpack(from_hex(hex));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "Input data was truncated");
  }
}

TEST(hostile_frames, every_proper_prefix_of_a_valid_frame_is_truncated) {
  const std::string frame =
      from_hex("86a474797065ab52656769737465724d7367ab696e7374616e63655f6964a5"
               "696e737431a9776f726b65725f696400a26970a831302e302e302e35a470"
               "6f7274cd2134ad706565725f696e69745f75726cc0");
  ASSERT_TRUE(msg::decode_msgpack(frame));
  for (size_t n = 0; n < frame.size(); ++n) {
    SCOPED_TRACE("first " + std::to_string(n) + " bytes");
    auto r = msg::decode_msgpack(frame.substr(0, n));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "Input data was truncated");
  }
}

TEST(hostile_frames, json_nested_10000_deep_is_refused_without_a_large_allocation) {
  for (const auto& text :
       {json_error_msg_with_extra(json_nested_arrays(10000)),
        json_error_msg_with_extra(std::string(10000, '[')),
        [] {
          std::string objects;
          for (int i = 0; i < 10000; ++i)
            objects += R"({"a":)";
          return json_error_msg_with_extra(objects + "1" + std::string(10000, '}'));
        }(),
        std::string(
            R"({"type":"HeartbeatRetMsg","commands":[{"command_type":"full_sync","args":{"a":)") +
            json_nested_arrays(10000) + "}}]}"}) {
    SCOPED_TRACE(text.substr(0, 60));
    auto [result, largest] = decode_json_tracked(text);
    EXPECT_FALSE(result) << error_of(result);
    if (!result) {
      EXPECT_FALSE(result.error().message.empty());
    }
    EXPECT_LE(largest, one_mib);
  }
}

TEST(hostile_frames, a_dense_frame_allocates_a_bounded_multiple_of_its_size) {
  // 64 KiB of one-byte elements: the object tree costs per element, but never
  // more than a small constant per frame byte.
  const std::string lookup = mp{}.map(3)
                                 .str("type")
                                 .str("LookupMsg")
                                 .str("event_id")
                                 .str("e")
                                 .str("tokens")
                                 .array(65536)
                                 .raw(std::string(65536, '\x01'));
  auto [result, largest] = decode_tracked(lookup);
  ASSERT_TRUE(result) << error_of(result);
  EXPECT_LE(largest, 64 * lookup.size());
}

// -- decode_limits ------------------------------------------------------------------------

std::string error_msg_of_size(size_t frame_size) {
  // 82 a4"type" a8"ErrorMsg" a5"error" = 21 bytes, then a str16 (3 + n).
  return mp{}
      .map(2)
      .str("type")
      .str("ErrorMsg")
      .str("error")
      .str(std::string(frame_size - 24, 'e'));
}

TEST(decode_limits, a_frame_over_max_frame_bytes_is_refused_and_one_at_the_limit_accepted) {
  msg::decode_limits limits;
  limits.max_frame_bytes = 1024;
  ASSERT_EQ(error_msg_of_size(1024).size(), 1024u);
  EXPECT_TRUE(msg::decode_msgpack(error_msg_of_size(1024), limits));

  auto [result, largest] = decode_tracked(error_msg_of_size(2048), limits);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("exceeds the limit"), std::string::npos)
      << result.error().message;
  EXPECT_LE(largest, 1024u) << "refused before it is parsed";
  EXPECT_TRUE(msg::decode_msgpack(error_msg_of_size(2048))) << "fine under the default limits";
}

TEST(decode_limits, json_text_over_max_frame_bytes_is_refused_and_text_at_the_limit_accepted) {
  msg::decode_limits limits;
  limits.max_frame_bytes = 1024;
  auto text_of_size = [](size_t n) {
    std::string head = R"({"type":"ErrorMsg","error":")";
    return head + std::string(n - head.size() - 2, 'e') + "\"}";
  };
  ASSERT_EQ(text_of_size(1024).size(), 1024u);
  EXPECT_TRUE(msg::decode_json(text_of_size(1024), limits));
  auto [result, largest] = decode_json_tracked(text_of_size(2048), limits);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("exceeds the limit"), std::string::npos)
      << result.error().message;
  EXPECT_LE(largest, 1024u);
}

std::string lookup_with_tokens(size_t n) {
  mp m;
  m.map(3)
      .str("type")
      .str("LookupMsg")
      .str("event_id")
      .str("e")
      .str("tokens")
      .array(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i)
    m.uint(i % 100);
  return m.bytes();
}

std::string json_lookup_with_tokens(size_t n) {
  std::string text = R"({"type":"LookupMsg","event_id":"e","tokens":[)";
  for (size_t i = 0; i < n; ++i)
    text += (i ? ",7" : "7");
  return text + "]}";
}

TEST(decode_limits, an_array_longer_than_max_array_length_is_refused_in_both_codecs) {
  msg::decode_limits limits;
  limits.max_array_length = 10;
  EXPECT_TRUE(msg::decode_msgpack(lookup_with_tokens(10), limits));
  auto r = msg::decode_msgpack(lookup_with_tokens(11), limits);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("exceeds the limit of 10"), std::string::npos)
      << r.error().message;

  EXPECT_TRUE(msg::decode_json(json_lookup_with_tokens(10), limits));
  auto j = msg::decode_json(json_lookup_with_tokens(11), limits);
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("exceeds the limit of 10"), std::string::npos)
      << j.error().message;
}

TEST(decode_limits, an_array_hidden_in_an_unknown_field_is_held_to_max_array_length_too) {
  msg::decode_limits limits;
  limits.max_array_length = 10;
  mp extra;
  extra.array(11);
  for (int i = 0; i < 11; ++i)
    extra.nil();
  EXPECT_FALSE(msg::decode_msgpack(error_msg_with_extra(extra.bytes()), limits));
  EXPECT_FALSE(msg::decode_json(json_error_msg_with_extra("[0,1,2,3,4,5,6,7,8,9,10]"), limits));
}

std::string health_ret_with_codes(size_t n) {
  mp m;
  m.map(3)
      .str("type")
      .str("HealthRetMsg")
      .str("event_id")
      .str("e")
      .str("error_codes")
      .map(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i)
    m.uint(i).uint(0);
  return m.bytes();
}

std::string json_health_ret_with_codes(size_t n) {
  std::string text = R"({"type":"HealthRetMsg","event_id":"e","error_codes":{)";
  for (size_t i = 0; i < n; ++i)
    text += (i ? ",\"" : "\"") + std::to_string(i) + "\":0";
  return text + "}}";
}

TEST(decode_limits, a_map_longer_than_max_map_length_is_refused_in_both_codecs) {
  msg::decode_limits limits;
  limits.max_map_length = 4;
  EXPECT_TRUE(msg::decode_msgpack(health_ret_with_codes(4), limits));
  auto r = msg::decode_msgpack(health_ret_with_codes(5), limits);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("exceeds the limit of 4"), std::string::npos)
      << r.error().message;

  EXPECT_TRUE(msg::decode_json(json_health_ret_with_codes(4), limits));
  auto j = msg::decode_json(json_health_ret_with_codes(5), limits);
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message.find("exceeds the limit of 4"), std::string::npos)
      << j.error().message;
}

TEST(decode_limits, a_string_longer_than_max_string_bytes_is_refused_in_both_codecs) {
  msg::decode_limits limits;
  limits.max_string_bytes = 16;
  auto frame = [](size_t n) {
    return mp{}.map(2).str("type").str("ErrorMsg").str("error").str(std::string(n, 's')).bytes();
  };
  auto text = [](size_t n) {
    return R"({"type":"ErrorMsg","error":")" + std::string(n, 's') + "\"}";
  };
  EXPECT_TRUE(msg::decode_msgpack(frame(16), limits));
  EXPECT_FALSE(msg::decode_msgpack(frame(17), limits));
  EXPECT_FALSE(
      msg::decode_msgpack(error_msg_with_extra(mp{}.bin(std::string(17, 'b')).bytes()), limits))
      << "bytes count against max_string_bytes too";

  EXPECT_TRUE(msg::decode_json(text(16), limits));
  auto j = msg::decode_json(text(17), limits);
  EXPECT_FALSE(j) << "JSON strings are held to the same limit";
  auto key = msg::decode_json(
      R"({"type":"ErrorMsg","error":"x",")" + std::string(17, 'k') + R"(":1})", limits);
  EXPECT_FALSE(key) << "and so are JSON object keys";
}

TEST(decode_limits, nesting_10000_deep_is_refused_with_the_default_limits) {
  auto r = msg::decode_msgpack(error_msg_with_extra(nested_arrays(10000, "\x01")));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "Nesting deeper than the limit of 64");
  auto j = msg::decode_json(json_error_msg_with_extra(json_nested_arrays(10000)));
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error().message, "Nesting deeper than the limit of 64");
}

TEST(decode_limits, the_32_deep_golden_vector_is_accepted_with_the_default_limits) {
  // wire-golden input/deep-nesting: 32 arrays inside an unknown field, 33 levels in all.
  const std::string frame =
      from_hex("83a474797065a84572726f724d7367a56572726f72a178a5657874726191919"
               "1919191919191919191919191919191919191919191919191919191919101");
  ASSERT_EQ(frame, error_msg_with_extra(nested_arrays(32, "\x01")));
  auto r = msg::decode_msgpack(frame);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(to_hex(msg::encode_msgpack(*r)), "82a474797065a84572726f724d7367a56572726f72a178");
  EXPECT_TRUE(msg::decode_json(json_error_msg_with_extra(json_nested_arrays(32))));
}

TEST(decode_limits, max_depth_counts_containers_with_the_message_as_1_in_both_codecs) {
  // The deep-nesting vector has 33 levels of containers.
  msg::decode_limits at_limit;
  at_limit.max_depth = 33;
  msg::decode_limits below_limit;
  below_limit.max_depth = 32;
  const std::string frame = error_msg_with_extra(nested_arrays(32, "\x01"));
  const std::string text = json_error_msg_with_extra(json_nested_arrays(32));
  EXPECT_TRUE(msg::decode_msgpack(frame, at_limit));
  EXPECT_FALSE(msg::decode_msgpack(frame, below_limit));
  EXPECT_TRUE(msg::decode_json(text, at_limit));
  EXPECT_FALSE(msg::decode_json(text, below_limit));
}

TEST(decode_limits, max_depth_counts_only_containers_inside_heartbeat_args_too) {
  // HeartbeatRetMsg(1) > commands(2) > command(3) > args(4) > [(5) > [(6) > 1:
  // six levels of containers; the scalar at the bottom is not a level.
  const std::string frame =
      from_hex("82a474797065af4865617274626561745265744d7367a8636f6d6d616e6473"
               "9183ac636f6d6d616e645f74797065a966756c6c5f73796e63a672656173"
               "6f6ec0a46172677381a161919101");
  const std::string text = R"({"type":"HeartbeatRetMsg","commands":[{"command_type":"full_sync",)"
                           R"("reason":null,"args":{"a":[[1]]}}]})";
  msg::decode_limits at_limit;
  at_limit.max_depth = 6;
  msg::decode_limits below_limit;
  below_limit.max_depth = 5;
  auto r = msg::decode_msgpack(frame, at_limit);
  EXPECT_TRUE(r) << error_of(r);
  EXPECT_FALSE(msg::decode_msgpack(frame, below_limit));
  auto j = msg::decode_json(text, at_limit);
  EXPECT_TRUE(j) << error_of(j);
  EXPECT_FALSE(msg::decode_json(text, below_limit));
}

} // namespace
