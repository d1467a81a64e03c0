// json_text_reader: one JSON text read with simdjson's On-Demand API, every
// byte of it checked and nothing after it ignored.
//
// On-Demand parses lazily: it validates only what the caller visits, and it
// treats a scalar at the root specially. The reader therefore copies the text
// into "[text]" (the copy also gives simdjson the padding it reads past the
// end), hands the one element to the caller, and refuses an empty text, a
// second top-level value and anything after the value. The caller must visit
// every part of the value it is given (read it or skip it), or malformed JSON
// inside an unvisited part goes unnoticed. The work is linear in the text.
//
// Numbers follow the rules lmcc has always read JSON with (nlohmann's, which
// agree with Python's json module wherever both accept the input):
// read_json_number() gives an integer in [-2^63, 2^63) as signed, one in
// [2^63, 2^64) as unsigned, and everything else a double: fractions, exponents
// and integers beyond 64 bits alike. A number beyond a double's range (1e400,
// 400 digits) is malformed, as it was with nlohmann.
//
//   borrowed_json_reader reader;   // this thread's reader, trimmed when done
//   simdjson::error_code e = reader->read(text, [&](simdjson::ondemand::value root) {
//     ... visit all of root; throw to abandon the document ...
//   });
//   if (e != simdjson::SUCCESS) refuse(simdjson::error_message(e));
//
// Strings and keys read from the document point into the reader and stay valid
// until its next read(). The text is followed in memory by at least 64 zero
// bytes (simdjson's padding), so a reader may load a few bytes past any value.
//
// Thread-safety: a json_text_reader is used by one thread at a time;
// borrowed_json_reader hands each thread its own.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lmcc::msg {

class json_text_reader {
public:
  /// Parses `text` as exactly one JSON value and calls visit(simdjson::ondemand::value)
  /// on it. Answers SUCCESS, the first error simdjson met, EMPTY for a text with no
  /// value, or TRAILING_CONTENT for anything after the value. Exceptions thrown by
  /// `visit` propagate; the reader stays usable.
  template <class Visit>
  simdjson::error_code read(std::string_view text, Visit&& visit);

  /// Frees the parser and the copy of the text when they grew beyond `keep_bytes`,
  /// so that one huge input does not pin its memory for the life of a thread.
  void trim(size_t keep_bytes);

private:
  simdjson::ondemand::parser parser_;
  std::string padded_; ///< "[" text "]" plus simdjson's padding
};

/// This thread's json_text_reader for the life of the object, trimmed to 1 MiB
/// when it ends. Reusing a reader spares a parser allocation per input. When this
/// thread's reader is already borrowed further up the stack, a fresh one is used
/// instead, so nested borrows never share a document.
class borrowed_json_reader {
public:
  borrowed_json_reader();
  ~borrowed_json_reader();
  borrowed_json_reader(const borrowed_json_reader&) = delete;
  borrowed_json_reader& operator=(const borrowed_json_reader&) = delete;

  json_text_reader& operator*() { return *reader_; }
  json_text_reader* operator->() { return reader_; }

private:
  /// Buffers up to this size stay with the thread for its next input.
  static constexpr size_t keep_bytes = size_t{1} << 20;

  std::optional<json_text_reader> own_; ///< only when the thread's reader is busy
  json_text_reader* reader_;
};

enum class json_number_kind { signed_integer, unsigned_integer, floating };

struct json_number {
  json_number_kind kind = json_number_kind::signed_integer;
  int64_t signed_value = 0;    ///< kind == signed_integer
  uint64_t unsigned_value = 0; ///< kind == unsigned_integer
  double floating_value = 0;   ///< kind == floating
};

/// Reads the number `v` (json_type::number) as described above. Answers SUCCESS or
/// the simdjson error of a malformed number (and leaves `out` unspecified).
simdjson::error_code read_json_number(simdjson::ondemand::value& v, json_number& out);

// -- implementation ---------------------------------------------------------------------

template <class Visit>
simdjson::error_code json_text_reader::read(std::string_view text, Visit&& visit) {
  padded_.clear();
  padded_.reserve(text.size() + 2 + simdjson::SIMDJSON_PADDING);
  padded_ += '[';
  padded_ += text;
  padded_ += ']';
  const size_t length = padded_.size();
  padded_.resize(length + simdjson::SIMDJSON_PADDING, '\0'); // read past the end, never parsed
  simdjson::ondemand::document doc;
  if (auto e = parser_.iterate(padded_.data(), length, padded_.size()).get(doc))
    return e;
  simdjson::ondemand::array root;
  if (auto e = doc.get_array().get(root))
    return e;
  bool seen = false;
  for (auto element : root) {
    simdjson::ondemand::value v;
    if (auto e = element.get(v))
      return e;
    if (seen) // "1, 2": a second value where the text should have ended
      return simdjson::TRAILING_CONTENT;
    seen = true;
    visit(v);
  }
  if (!seen)
    return simdjson::EMPTY;
  // The wrapper's ']' must be the last thing read: anything after it came from the
  // text itself (e.g. `{...}], [`), and On-Demand would never look at it.
  const char* location = nullptr;
  if (doc.current_location().get(location) != simdjson::OUT_OF_BOUNDS)
    return simdjson::TRAILING_CONTENT;
  return simdjson::SUCCESS;
}

} // namespace lmcc::msg
