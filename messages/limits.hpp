// decode_limits: the hard limits every decoder enforces before it allocates.
//
// A frame that breaks a limit is refused with a codec_error naming the limit;
// nothing larger than the frame itself (times a small constant) is ever
// allocated, whatever its length headers claim. The defaults fit LMCache's
// real traffic with room to spare: a worker sends at most 50 ops per batch and
// 2000 keys per full-sync batch, and prompts run to some 100k tokens.
//
//   decode_limits lim;               // defaults
//   lim.max_frame_bytes = 1 << 20;   // a stricter gateway
//   auto r = decode_msgpack(frame, lim);
//
// Context: a plain options struct, thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lmcc::msg {

struct decode_limits {
  /// Largest frame (msgpack or JSON) accepted, in bytes. Larger frames are
  /// refused without being parsed. Raising it raises the memory one bad peer
  /// can make a decoder use: the msgpack decoder's node array takes 16 bytes
  /// per element, so a frame of one-byte elements can cost up to ~16x its size
  /// while it is decoded (8 MiB -> ~130 MiB at worst, plus the message). LMCache's largest real
  /// frames are a few hundred KiB (a 2000-key full-sync batch is ~18 KiB). Default: 8 MiB
  size_t max_frame_bytes = size_t{8} << 20;

  /// Deepest nesting of arrays and maps, counting the message itself as 1.
  /// LMCache messages nest at most 4 deep; unknown fields may nest deeper and
  /// are skipped, but only up to this depth.
  /// Default: 64
  uint32_t max_depth = 64;

  /// Most elements in one array (token lists, key lists, op lists).
  /// Default: 4,194,304
  uint32_t max_array_length = uint32_t{1} << 22;

  /// Most entries in one map (structs, extra_config, layout_info).
  /// Default: 65,536
  uint32_t max_map_length = uint32_t{1} << 16;

  /// Longest single string or bytes value, in bytes.
  /// Default: 16 MiB
  uint32_t max_string_bytes = uint32_t{16} << 20;
};

} // namespace lmcc::msg
