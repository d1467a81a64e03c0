#include "tests/fuzz/fuzz_http_body.hpp"

#include "gateway/http_body.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmcc::fuzz {
namespace {

using json = nlohmann::json;
using gateway::body_result;
using msg::wire_int;

/// What a reader made of a body: a request (its fields as a JSON object, in the
/// body's own shape) or a refusal.
struct reading {
  bool ok = false;
  int status = 0;
  std::string detail;
  json fields;
};

// -- the readers' requests as JSON -----------------------------------------------------------

json int_json(const wire_int& x) {
  return x.is_negative() ? json(x.as_int64()) : json(x.bits());
}

json ints_json(const std::vector<wire_int>& v) {
  json a = json::array();
  for (const auto& x : v)
    a.push_back(int_json(x));
  return a;
}

json ints_json(const std::optional<std::vector<wire_int>>& v) {
  return v ? ints_json(*v) : json(nullptr);
}

template <class T>
json optional_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json position_json(const std::pair<std::string, std::string>& p) {
  return json::array({p.first, p.second});
}

template <class T, class Render>
reading read_with(const body_result<T>& r, Render render) {
  reading out;
  if (!r) {
    out.status = r.error().status;
    out.detail = r.error().detail;
    return out;
  }
  out.ok = true;
  out.fields = render(*r);
  return out;
}

// -- the FastAPI models, from the document ---------------------------------------------------

enum class kind { text, flag, ints, position, count, signed_count, texts };

struct field_rule {
  const char* name;
  kind type;
  /// What an absent field reads as; discarded: the field is required.
  json absent = json(json::value_t::discarded);
  /// null reads as none (null among the fields); otherwise it is mistyped.
  bool null_ok = false;
  /// Part of the request (the event_id of /query_instance is checked, then dropped).
  bool kept = true;
};

struct endpoint {
  const char* name;
  std::vector<field_rule> rules;
  std::function<reading(std::string_view body, size_t max_tokens)> read;
  /// Read with nlohmann as a whole (POST /cluster/members), not in one pass.
  bool whole_document = false;
  /// The text field must not be empty (POST /admin/snapshot).
  bool nonempty_text = false;
};

const std::vector<endpoint>& endpoints() {
  using namespace gateway;
  static const std::vector<endpoint> all = [] {
    const json none(nullptr);
    const json empty_list = json::array();
    auto compression = [&] {
      return std::vector<field_rule>{{"instance_id", kind::text},
                                     {"method", kind::text},
                                     {"location", kind::text},
                                     {"tokens", kind::ints, empty_list, true}};
    };
    auto compression_fields = [](const auto& m) {
      return json{{"instance_id", m.instance_id},
                  {"method", m.method},
                  {"location", m.location},
                  {"tokens", ints_json(m.tokens)}};
    };
    std::vector<endpoint> v;
    v.push_back({"/lookup", {{"tokens", kind::ints}}, [](std::string_view b, size_t max) {
                   return read_with(read_lookup_body(b, max), [](const msg::LookupMsg& m) {
                     return json{{"tokens", ints_json(m.tokens)}};
                   });
                 }});
    v.push_back({"/query_instance",
                 {{"event_id", kind::text, json(json::value_t::discarded), false, false},
                  {"ip", kind::text}},
                 [](std::string_view b, size_t) {
                   return read_with(read_query_instance_body(b), [](const msg::QueryInstMsg& m) {
                     return json{{"ip", m.ip}};
                   });
                 }});
    v.push_back({"/clear",
                 {{"instance_id", kind::text}, {"location", kind::text}},
                 [](std::string_view b, size_t) {
                   return read_with(read_clear_body(b), [](const msg::ClearMsg& m) {
                     return json{{"instance_id", m.instance_id}, {"location", m.location}};
                   });
                 }});
    v.push_back({"/pin",
                 {{"instance_id", kind::text}, {"location", kind::text}, {"tokens", kind::ints}},
                 [](std::string_view b, size_t max) {
                   return read_with(read_pin_body(b, max), [](const msg::PinMsg& m) {
                     return json{{"instance_id", m.instance_id},
                                 {"location", m.location},
                                 {"tokens", ints_json(m.tokens)}};
                   });
                 }});
    v.push_back({"/compress", compression(), [compression_fields](std::string_view b, size_t max) {
                   return read_with(read_compress_body(b, max), compression_fields);
                 }});
    v.push_back(
        {"/decompress", compression(), [compression_fields](std::string_view b, size_t max) {
           return read_with(read_decompress_body(b, max), compression_fields);
         }});
    v.push_back({"/move",
                 {{"old_position", kind::position},
                  {"new_position", kind::position},
                  {"tokens", kind::ints, empty_list},
                  {"should_copy", kind::flag, json(false)}},
                 [](std::string_view b, size_t max) {
                   return read_with(read_move_body(b, max), [](const msg::MoveMsg& m) {
                     return json{{"old_position", position_json(m.old_position)},
                                 {"new_position", position_json(m.new_position)},
                                 {"tokens", ints_json(m.tokens)},
                                 {"should_copy", optional_json(m.copy)}};
                   });
                 }});
    v.push_back({"/health", {{"instance_id", kind::text}}, [](std::string_view b, size_t) {
                   return read_with(read_health_body(b), [](const msg::HealthMsg& m) {
                     return json{{"instance_id", m.instance_id}};
                   });
                 }});
    v.push_back({"/check_finish", {{"event_id", kind::text}}, [](std::string_view b, size_t) {
                   return read_with(read_check_finish_body(b), [](const msg::CheckFinishMsg& m) {
                     return json{{"event_id", m.event_id}};
                   });
                 }});
    v.push_back(
        {"/query_worker_info",
         {{"instance_id", kind::text}, {"worker_ids", kind::ints, none, true}},
         [](std::string_view b, size_t max) {
           return read_with(read_query_worker_info_body(b, max), [](const msg::QueryWorkerInfoMsg&
                                                                        m) {
             return json{{"instance_id", m.instance_id}, {"worker_ids", ints_json(m.worker_ids)}};
           });
         }});
    v.push_back({"/admin/snapshot",
                 {{"dir", kind::text}},
                 [](std::string_view b, size_t) {
                   return read_with(read_snapshot_body(b), [](const std::string& dir) {
                     return json{{"dir", dir}};
                   });
                 },
                 false,
                 true});
    v.push_back({"/admin/faults",
                 {{"fail_commits", kind::count, none},
                  {"fail_all_commits", kind::flag, none},
                  {"commit_delay_us", kind::count, none},
                  {"clock_jump_ms", kind::signed_count, none}},
                 [](std::string_view b, size_t) {
                   return read_with(read_faults_body(b), [](const store_fault_settings& s) {
                     return json{{"fail_commits", optional_json(s.fail_commits)},
                                 {"fail_all_commits", optional_json(s.fail_all_commits)},
                                 {"commit_delay_us", optional_json(s.commit_delay_us)},
                                 {"clock_jump_ms", optional_json(s.clock_jump_ms)}};
                   });
                 }});
    v.push_back({"/cluster/members",
                 {{"members", kind::texts}},
                 [](std::string_view b, size_t) {
                   return read_with(read_members_body(b), [](const std::vector<std::string>& ids) {
                     return json{{"members", ids}};
                   });
                 },
                 true});
    return v;
  }();
  return all;
}

/// The value a field of type `k` reads as, or nullopt when `v` is mistyped.
std::optional<json> typed(kind k, const json& v) {
  switch (k) {
  case kind::text:
    return v.is_string() ? std::optional<json>{v} : std::nullopt;
  case kind::flag:
    return v.is_boolean() ? std::optional<json>{v} : std::nullopt;
  case kind::ints:
    if (!v.is_array() ||
        !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_integer(); }))
      return std::nullopt;
    return v;
  case kind::texts:
    if (!v.is_array() ||
        !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); }))
      return std::nullopt;
    return v;
  case kind::position:
    if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_string())
      return std::nullopt;
    return v;
  case kind::count:
    if (v.is_number_unsigned())
      return v;
    if (v.is_number_integer() && v.get<int64_t>() >= 0) // "-0"
      return json(uint64_t{0});
    return std::nullopt;
  case kind::signed_count:
    if (v.is_number_unsigned())
      return v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                 ? std::optional<json>{json(v.get<int64_t>())}
                 : std::nullopt;
    return v.is_number_integer() ? std::optional<json>{v} : std::nullopt;
  }
  return std::nullopt;
}

/// What the endpoint's model makes of a document: its request or a 422.
reading model(const endpoint& e, const json& doc) {
  reading refused;
  refused.status = 422;
  if (!doc.is_object())
    return refused;
  reading out;
  out.ok = true;
  out.fields = json::object();
  for (const auto& rule : e.rules) {
    json value;
    const auto it = doc.find(rule.name);
    if (it == doc.end()) {
      if (rule.absent.is_discarded())
        return refused;
      value = rule.absent;
    } else if (it->is_null()) {
      if (!rule.null_ok)
        return refused;
      value = nullptr;
    } else if (auto v = typed(rule.type, *it)) {
      value = std::move(*v);
    } else {
      return refused;
    }
    if (e.nonempty_text && value.is_string() && value.get<std::string>().empty())
      return refused;
    if (rule.kept)
      out.fields[rule.name] = std::move(value);
  }
  return out;
}

/// The body a client would send for `fields`.
std::string canonical_body(const endpoint& e, const json& fields) {
  json body = json::object();
  for (const auto& rule : e.rules) {
    if (!rule.kept) {
      body[rule.name] = "x";
      continue;
    }
    const json& value = fields.at(rule.name);
    if (!value.is_null() || rule.null_ok)
      body[rule.name] = value;
  }
  return body.dump();
}

// -- the document's shape, by SAX ----------------------------------------------------------------

/// How deep a document nests and, per key of a root object, the most items an
/// array value of that key had (every occurrence of a repeated key counts).
class shape_reader : public nlohmann::json_sax<json> {
public:
  /// nlohmann's out_of_range.406: "number overflow parsing".
  static constexpr int number_overflow_error = 406;

  size_t max_depth = 0;
  bool root_is_object = false;
  std::map<std::string, size_t> longest_list;

  bool null() override { return element(); }
  bool boolean(bool) override { return element(); }
  bool number_integer(number_integer_t) override { return element(); }
  bool number_unsigned(number_unsigned_t) override { return element(); }
  bool number_float(number_float_t, const string_t&) override { return element(); }
  bool string(string_t&) override { return element(); }
  bool binary(binary_t&) override { return element(); }
  bool start_object(std::size_t) override {
    element();
    if (++depth_ == 1)
      root_is_object = true;
    max_depth = std::max(max_depth, depth_);
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1)
      key_ = k;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    element();
    ++depth_;
    max_depth = std::max(max_depth, depth_);
    if (depth_ == 2 && root_is_object) {
      counting_ = true;
      count_ = 0;
    }
    return true;
  }
  bool end_array() override {
    if (depth_ == 2 && counting_) {
      size_t& most = longest_list[key_];
      most = std::max(most, count_);
      counting_ = false;
    }
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    number_overflow = e.id == number_overflow_error;
    return false;
  }

  /// nlohmann refused an integer too large for a double. That is JSON (Python
  /// reads it as an int), and the body readers take it as one, out of range.
  bool number_overflow = false;

private:
  bool element() {
    if (counting_ && depth_ == 2)
      ++count_;
    return true;
  }

  size_t depth_ = 0;
  bool counting_ = false;
  size_t count_ = 0;
  std::string key_;
};

bool excluded_from_comparison(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF") || text.find('\0') != std::string_view::npos)
    return true;
  for (size_t i = 1; i < text.size(); ++i) { // an exponent of more than 19 digits
    if ((text[i] != 'e' && text[i] != 'E') ||
        !((text[i - 1] >= '0' && text[i - 1] <= '9') || text[i - 1] == '.'))
      continue;
    size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-'))
      ++j;
    const size_t first_digit = j;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9')
      ++j;
    if (j - first_digit > 19)
      return true;
  }
  return false;
}

std::string describe(const reading& r) {
  if (r.ok)
    return "a request " + r.fields.dump(-1, ' ', false, json::error_handler_t::replace);
  return std::to_string(r.status) + " " + r.detail;
}

std::string check_body(const endpoint& e, std::string_view body, size_t max_tokens) {
  const reading got = e.read(body, max_tokens);
  const std::string where =
      std::string(e.name) + " (max_tokens " + std::to_string(max_tokens) + ")";
  const bool has_limit = std::any_of(e.rules.begin(), e.rules.end(),
                                     [](const field_rule& r) { return r.type == kind::ints; });
  if (!got.ok) {
    if (got.detail.empty())
      return where + ": refused with an empty detail";
    if (got.status != 400 && got.status != 413 && got.status != 422)
      return where + ": refused with status " + std::to_string(got.status);
    if (got.status == 413 && !has_limit)
      return where + ": 413 where no list has a limit";
    if (e.whole_document && got.status != 422 && got.status != 413)
      return where + ": " + describe(got) + " (a refusal is 422 or 413 here)";
  }
  if (e.whole_document && (body.size() > gateway::max_members_body_bytes) != (got.status == 413))
    return where + ": " + describe(got) + " for a body of " + std::to_string(body.size()) +
           " bytes (413 is for those past " + std::to_string(gateway::max_members_body_bytes) + ")";
  if (e.whole_document && got.status == 413)
    return {};
  if (excluded_from_comparison(body))
    return {};

  shape_reader shape;
  const bool is_json = json::sax_parse(body, &shape);
  if (!is_json && shape.number_overflow)
    return {};
  reading want;
  if (!is_json || (!e.whole_document && shape.max_depth > gateway::max_body_depth)) {
    if (e.whole_document) {
      if (!is_json && got.ok)
        return where + ": read a body that is not JSON";
    } else if (got.ok || (got.status != 400 && got.status != 413)) {
      return where + ": " + describe(got) + " for a body that is not JSON or nests too deep";
    }
    return {};
  }
  if (got.status == 400)
    return where + ": 400 (" + got.detail + ") for a JSON body";
  bool too_long = false;
  for (const auto& rule : e.rules)
    if (rule.type == kind::ints && shape.root_is_object) {
      const auto it = shape.longest_list.find(rule.name);
      too_long = too_long || (it != shape.longest_list.end() && it->second > max_tokens);
    }
  if (too_long != (got.status == 413))
    return where + ": " + describe(got) + (too_long ? ", not 413," : "") +
           " for a body whose token lists are " + (too_long ? "over" : "within") + " the limit";
  if (too_long)
    return {};

  want = model(e, json::parse(body));
  if (want.ok != got.ok || (!got.ok && got.status != want.status))
    return where + ": " + describe(got) + " where the model says " + describe(want);
  if (!got.ok)
    return {};
  if (got.fields != want.fields)
    return where + ": read " + describe(got) + " where the document says " + describe(want);

  const std::string again = canonical_body(e, got.fields);
  const reading back = e.read(again, max_tokens);
  if (!back.ok || back.fields != got.fields)
    return where + ": its own canonical body " + again + " reads as " + describe(back);
  return {};
}

// -- query parameters --------------------------------------------------------------------------

/// An independent reading of decimal text in [-2^63, 2^64-1].
std::optional<wire_int> decimal(std::string_view text) {
  const bool negative = !text.empty() && text.front() == '-';
  if (negative)
    text.remove_prefix(1);
  if (text.empty())
    return std::nullopt;
  uint64_t magnitude = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (magnitude > (UINT64_MAX - digit) / 10)
      return std::nullopt;
    magnitude = magnitude * 10 + digit;
  }
  if (!negative)
    return wire_int::from_unsigned(magnitude);
  if (magnitude > uint64_t{1} << 63)
    return std::nullopt;
  return wire_int{static_cast<int64_t>(0 - magnitude)};
}

std::string check_query(std::string_view text) {
  gateway::query_params params;
  httplib::detail::parse_query_text(std::string(text), params);
  for (const char* name : {"instance_id", "name", "worker_id", "thread_id"}) {
    const auto [first, last] = params.equal_range(name);
    std::optional<std::string> want;
    if (first != last && !first->second.empty())
      want = first->second;
    if (gateway::read_query_param(params, name) != want)
      return std::string("query parameter '") + name + "' read differently";
  }
  for (const char* name : {"worker_id", "thread_id"}) {
    const auto got = gateway::read_int_query_param(params, name);
    const auto text_value = gateway::read_query_param(params, name);
    if (!text_value) {
      if (!got || got->has_value())
        return std::string("absent query parameter '") + name + "' not read as absent";
      continue;
    }
    const auto want = decimal(*text_value);
    if (!want) {
      if (got || got.error().status != 422 || got.error().detail.empty())
        return std::string("query parameter '") + name + "' = '" + *text_value + "' not refused";
      continue;
    }
    if (!got || !got->has_value() || **got != *want)
      return std::string("query parameter '") + name + "' = '" + *text_value + "' misread";
    if (gateway::parse_wire_int((*got)->to_string()) != *want)
      return std::string("query parameter '") + name + "' does not read back from its text";
  }
  return {};
}

} // namespace

std::string check_http_body(std::string_view input) {
  const uint8_t selector = input.empty() ? 0 : static_cast<uint8_t>(input.front());
  const std::string_view body = input.empty() ? input : input.substr(1);
  const auto& all = endpoints();
  const size_t which = (selector & 0x0f) % (all.size() + 1);
  if (which == all.size())
    return check_query(body);
  const size_t limit = selector >> 4;
  const size_t max_tokens = limit == 0 ? size_t{1} << 20 : limit;
  return check_body(all[which], body, max_tokens);
}

std::vector<std::string> http_body_seeds() {
  const auto& all = endpoints();
  const std::vector<std::vector<std::string>> bodies = {
      {R"({"tokens": [1, 2, 3]})", R"({"tokens": [-1, 18446744073709551615, 0]})",
       R"({"tokens": []})", R"({"tokens": [1.5]})", R"({"tokens": "x"})", R"({})"},
      {R"({"event_id": "QueryInst-1", "ip": "10.0.0.5"})", R"({"ip": "10.0.0.5"})"},
      {R"({"instance_id": "vllm-0", "location": "LocalCPUBackend"})",
       R"({"instance_id": "A", "location": null})"},
      {R"({"instance_id": "vllm-0", "location": "LocalCPUBackend", "tokens": [1, 2, 3, 4]})"},
      {R"({"instance_id": "A", "method": "zstd", "location": "L", "tokens": [1, 2]})",
       R"({"instance_id": "A", "method": "zstd", "location": "L", "tokens": null})"},
      {R"({"instance_id": "A", "method": "zstd", "location": "L"})"},
      {R"({"old_position": ["A", "L1"], "new_position": ["B", "L2"], "tokens": [7], "should_copy": true})",
       R"({"old_position": ["A", "L1"], "new_position": ["B"]})"},
      {R"({"instance_id": "vllm-0"})"},
      {R"({"event_id": "Move3f2a"})"},
      {R"({"instance_id": "vllm-0", "worker_ids": [0, 1]})", R"({"instance_id": "vllm-0"})"},
      {R"({"dir": "/var/lib/lmcc/snap-1"})", R"({"dir": ""})"},
      {R"({"fail_commits": 3, "fail_all_commits": false, "commit_delay_us": 1000, "clock_jump_ms": -5000})",
       R"({"fail_commits": -1})"},
      {R"({"members": ["n1", "n2", "n3", "n4"]})", R"({"members": "n1"})"},
      {"instance_id=vllm-0&worker_id=3",
       "worker_id=-9223372036854775808&thread_id=18446744073709551615",
       "name=lmcc-http&thread_id=x", "worker_id=&worker_id=2"},
  };
  std::vector<std::string> seeds;
  for (size_t which = 0; which < bodies.size() && which <= all.size(); ++which)
    for (const auto& body : bodies[which])
      for (uint8_t limit : {0, 2}) // the default token limit, and 2
        seeds.push_back(static_cast<char>((limit << 4) | which) + body);
  return seeds;
}

} // namespace lmcc::fuzz
