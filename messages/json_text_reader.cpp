// The per-thread simdjson reader and lmcc's reading of JSON numbers (see
// json_text_reader.hpp).
#include "messages/json_text_reader.hpp"

#include <charconv>
#include <string_view>
#include <system_error>

namespace lmcc::msg {
namespace {

/// The reader each thread reuses, and whether it is lent out right now.
struct thread_reader {
  json_text_reader reader;
  bool borrowed = false;
};

thread_reader& this_thread_reader() {
  thread_local thread_reader slot;
  return slot;
}

/// Digits of a number's mantissa, leading zeros not counted.
size_t significant_digits(std::string_view number) {
  size_t digits = 0;
  bool leading = true;
  for (char c : number) {
    if (c == 'e' || c == 'E')
      break;
    if (c < '0' || c > '9' || (leading && c == '0'))
      continue; // a sign, the point, a leading zero
    leading = false;
    ++digits;
  }
  return digits;
}

} // namespace

void json_text_reader::trim(size_t keep_bytes) {
  if (padded_.capacity() > keep_bytes)
    std::string{}.swap(padded_);
  if (parser_.capacity() > keep_bytes)
    parser_ = simdjson::ondemand::parser{};
}

borrowed_json_reader::borrowed_json_reader() {
  thread_reader& slot = this_thread_reader();
  if (slot.borrowed) {
    reader_ = &own_.emplace();
    return;
  }
  slot.borrowed = true;
  reader_ = &slot.reader;
}

borrowed_json_reader::~borrowed_json_reader() {
  if (own_)
    return;
  thread_reader& slot = this_thread_reader();
  slot.reader.trim(keep_bytes);
  slot.borrowed = false;
}

simdjson::error_code read_json_number(simdjson::ondemand::value& v, json_number& out) {
  // The common case first. A failed get_* leaves the value unread, so the next
  // reading can be tried on it.
  auto e = v.get_int64().get(out.signed_value);
  if (e == simdjson::SUCCESS) {
    out.kind = json_number_kind::signed_integer;
    return e;
  }
  if (e == simdjson::NUMBER_ERROR) // "01", "1x": malformed whatever it is read as
    return e;
  if (v.get_uint64().get(out.unsigned_value) == simdjson::SUCCESS) {
    out.kind = json_number_kind::unsigned_integer;
    return simdjson::SUCCESS;
  }
  // A fraction, an exponent, or an integer beyond 64 bits: a double, as nlohmann
  // and Python's float() read them (correctly rounded). Beyond double's range
  // simdjson answers NUMBER_ERROR, as nlohmann refused it.
  out.kind = json_number_kind::floating;
  std::string_view number = v.raw_json_token();
  if (auto refused = v.get_double().get(out.floating_value))
    return refused;
  // simdjson 3.0.1 misreads some numbers of more than 19 significant digits
  // (0.99999999999999999999 as 0.0777...): from_chars reads those again,
  // correctly rounded. simdjson has checked the spelling and the range; a
  // value below a double's (from_chars' out of range) keeps simdjson's 0.
  if (significant_digits(number) <= 19)
    return simdjson::SUCCESS;
  while (!number.empty() && (number.back() == ' ' || number.back() == '\t' ||
                             number.back() == '\n' || number.back() == '\r'))
    number.remove_suffix(1);
  const char* end = number.data() + number.size();
  double exact = 0;
  if (const auto [stop, ec] = std::from_chars(number.data(), end, exact);
      ec == std::errc{} && stop == end)
    out.floating_value = exact;
  return simdjson::SUCCESS;
}

} // namespace lmcc::msg
