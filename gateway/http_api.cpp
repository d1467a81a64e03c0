#include "gateway/http_api.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <pthread.h>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace lmcc::gateway {
namespace {

using json = nlohmann::ordered_json;
using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace sj = simdjson::ondemand;

// -- adapters: the only places in this file that read the clock or the entropy source --

clock_type::time_point now() {
  return clock_type::now();
}

std::mt19937_64& uuid_rng() {
  thread_local std::mt19937_64 rng = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64{seq};
  }();
  return rng;
}

// -- limits ------------------------------------------------------------------------------

/// Deepest nesting accepted in a request body. LMCache bodies nest 2 deep; the
/// limit keeps every parser's stack and memory bounded whatever the input.
constexpr size_t max_body_depth = 64;

/// Thread-local parse buffers larger than this are released after the request, so
/// that one huge body does not pin its memory in every HTTP thread.
constexpr size_t keep_buffer_bytes = size_t{1} << 20;

/// How often a waiting handler checks whether the server is stopping.
constexpr auto stop_poll_interval = 50ms;

// -- errors --------------------------------------------------------------------------------

/// A request refused with an HTTP status and a FastAPI-style {"detail": ...}.
/// Thrown by the body readers and caught once per route: validating nested fields
/// then reads as straight-line code, and nothing is thrown on the success path.
struct request_error {
  int status;
  std::string detail;
};

// -- JSON output -----------------------------------------------------------------------------

json int_json(const msg::wire_int& v) {
  return v.is_negative() ? json(v.as_int64()) : json(v.bits());
}

json detail_json(std::string_view text) {
  return json{{"detail", text}};
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  // Text from workers or /proc may not be valid UTF-8; replace rather than throw.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

json worker_info_json(const msg::WorkerInfo& w) {
  return json{{"instance_id", w.instance_id},
              {"worker_id", int_json(w.worker_id)},
              {"ip", w.ip},
              {"port", int_json(w.port)},
              {"peer_init_url", w.peer_init_url ? json(*w.peer_init_url) : json(nullptr)},
              {"registration_time", w.registration_time},
              {"last_heartbeat_time", w.last_heartbeat_time}};
}

// -- /lookup body: simdjson On-Demand ----------------------------------------------------------
//
// /lookup carries thousands of token ids per call and is the hot path, so its body
// is read straight off the wire with simdjson instead of building a DOM. On-Demand
// only checks what it visits, so every value is visited: unknown fields are walked
// by validate_value and the document must end where the body ends.

[[noreturn]] void throw_malformed(simdjson::error_code e) {
  throw request_error{400, std::string("malformed JSON body: ") + simdjson::error_message(e)};
}

void check_json(simdjson::error_code e) {
  if (e != simdjson::SUCCESS)
    throw_malformed(e);
}

/// Walks a value that is not used, so that malformed JSON inside it is refused too.
void validate_value(sj::value v, size_t depth) {
  if (depth > max_body_depth)
    throw request_error{400, "request body nests deeper than " + std::to_string(max_body_depth) +
                                 " levels"};
  sj::json_type type;
  check_json(v.type().get(type));
  switch (type) {
  case sj::json_type::object: {
    sj::object obj;
    check_json(v.get_object().get(obj));
    for (auto field : obj) {
      std::string_view key;
      check_json(field.unescaped_key().get(key));
      sj::value child;
      check_json(field.value().get(child));
      validate_value(child, depth + 1);
    }
    return;
  }
  case sj::json_type::array: {
    sj::array arr;
    check_json(v.get_array().get(arr));
    for (auto element : arr) {
      sj::value child;
      check_json(element.get(child));
      validate_value(child, depth + 1);
    }
    return;
  }
  case sj::json_type::number: {
    double ignored;
    check_json(v.get_double().get(ignored));
    return;
  }
  case sj::json_type::string: {
    std::string_view ignored;
    check_json(v.get_string().get(ignored));
    return;
  }
  case sj::json_type::boolean: {
    bool ignored;
    check_json(v.get_bool().get(ignored));
    return;
  }
  case sj::json_type::null: {
    bool is_null = false;
    check_json(v.is_null().get(is_null));
    if (!is_null)
      throw_malformed(simdjson::N_ATOM_ERROR);
    return;
  }
  }
}

/// True for JSON's integer grammar: -?(0|[1-9][0-9]*).
bool is_json_integer(std::string_view text) {
  while (!text.empty() &&
         (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' || text.back() == '\r'))
    text.remove_suffix(1);
  if (!text.empty() && text.front() == '-')
    text.remove_prefix(1);
  if (text.empty() || (text.front() == '0' && text.size() > 1))
    return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Why token `index` is not a 64-bit integer: 422 for a value of another type (as
/// FastAPI says), 400 when its bytes are not JSON at all.
request_error bad_token(sj::value& item, size_t index) {
  std::string where = "field 'tokens' item " + std::to_string(index);
  sj::json_type type;
  check_json(item.type().get(type));
  if (type == sj::json_type::number) {
    if (is_json_integer(item.raw_json_token()))
      return {422, where + " is outside the range of token ids [-2^63, 2^64-1]"};
    double ignored;
    check_json(item.get_double().get(ignored));
    return {422, where + " must be an integer, not a float"};
  }
  validate_value(item, 3);
  return {422, where + " must be an integer"};
}

void read_tokens(sj::value v, size_t max_tokens, std::vector<msg::wire_int>& out) {
  out.clear();
  sj::json_type type;
  check_json(v.type().get(type));
  if (type != sj::json_type::array) {
    validate_value(v, 2);
    throw request_error{422, "field 'tokens' must be a list of integers"};
  }
  sj::array arr;
  check_json(v.get_array().get(arr));
  for (auto element : arr) {
    sj::value item;
    check_json(element.get(item));
    if (out.size() == max_tokens)
      throw request_error{413, "field 'tokens' has more than " + std::to_string(max_tokens) +
                                   " entries"};
    // Signed first (the common case), then the unsigned range above 2^63-1.
    int64_t i = 0;
    if (item.get_int64().get(i) == simdjson::SUCCESS) {
      out.emplace_back(i);
      continue;
    }
    uint64_t u = 0;
    if (item.get_uint64().get(u) == simdjson::SUCCESS) {
      out.push_back(msg::wire_int::from_unsigned(u));
      continue;
    }
    throw bad_token(item, out.size());
  }
}

std::vector<msg::wire_int> read_lookup_tokens(const std::string& body, size_t max_tokens) {
  thread_local sj::parser parser;
  thread_local std::string buffer;
  struct release_large_buffers {
    ~release_large_buffers() {
      if (buffer.capacity() > keep_buffer_bytes)
        std::string{}.swap(buffer);
      if (parser.capacity() > keep_buffer_bytes)
        parser = sj::parser{};
    }
  } release_guard;

  // The body is wrapped in "[...]": the root is then always an array (On-Demand
  // treats root scalars specially), a second top-level value shows up as a second
  // element, and the copy provides the padding simdjson needs anyway.
  buffer.clear();
  buffer.reserve(body.size() + 2 + simdjson::SIMDJSON_PADDING);
  buffer += '[';
  buffer += body;
  buffer += ']';
  sj::document doc;
  check_json(parser.iterate(buffer.data(), buffer.size(), buffer.capacity()).get(doc));
  sj::array root;
  check_json(doc.get_array().get(root));

  std::vector<msg::wire_int> tokens;
  bool have_tokens = false;
  size_t values = 0;
  for (auto element : root) {
    sj::value v;
    check_json(element.get(v));
    if (++values > 1)
      throw request_error{400, "malformed JSON body: more than one top-level value"};
    sj::json_type type;
    check_json(v.type().get(type));
    if (type != sj::json_type::object) {
      validate_value(v, 1);
      throw request_error{422, "request body must be a JSON object"};
    }
    sj::object obj;
    check_json(v.get_object().get(obj));
    for (auto field : obj) {
      std::string_view key;
      check_json(field.unescaped_key().get(key));
      sj::value child;
      check_json(field.value().get(child));
      if (key == "tokens") { // a repeated key wins, as with Python's json module
        read_tokens(child, max_tokens, tokens);
        have_tokens = true;
      } else {
        validate_value(child, 2);
      }
    }
  }
  if (values == 0)
    throw request_error{400, "malformed JSON body: empty"};
  // The wrapper's ']' must be the last thing: anything after it came from the body
  // (e.g. a body of `{...}], [`), which On-Demand would otherwise never look at.
  const char* location = nullptr;
  if (doc.current_location().get(location) != simdjson::OUT_OF_BOUNDS)
    throw request_error{400, "malformed JSON body: unexpected content after the JSON value"};
  if (!have_tokens)
    throw request_error{422, "field 'tokens' is required"};
  return tokens;
}

// -- other bodies: nlohmann-json ----------------------------------------------------------------

/// Cheap pre-check so that no parser ever sees absurd nesting (a body of 60 MB of
/// '[' would otherwise cost gigabytes in a DOM).
bool nesting_exceeds(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit)
        return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

json parse_object_body(const std::string& body) {
  if (nesting_exceeds(body, max_body_depth))
    throw request_error{400, "request body nests deeper than " + std::to_string(max_body_depth) +
                                 " levels"};
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    throw request_error{400, std::string("malformed JSON body: ") + e.what()};
  }
  if (!j.is_object())
    throw request_error{422, "request body must be a JSON object"};
  return j;
}

const json* find_field(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() ? nullptr : &*it;
}

std::string field_name(const char* name) {
  return std::string("field '") + name + "'";
}

std::string require_string(const json& obj, const char* name) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    throw request_error{422, field_name(name) + " is required"};
  if (!v->is_string())
    throw request_error{422, field_name(name) + " must be a string"};
  return v->get<std::string>();
}

bool optional_bool(const json& obj, const char* name, bool fallback) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    return fallback;
  if (!v->is_boolean())
    throw request_error{422, field_name(name) + " must be a boolean"};
  return v->get<bool>();
}

std::vector<msg::wire_int> int_list(const json& v, const char* name, size_t max_items) {
  if (!v.is_array())
    throw request_error{422, field_name(name) + " must be a list of integers"};
  if (v.size() > max_items)
    throw request_error{413, field_name(name) + " has more than " + std::to_string(max_items) +
                                 " entries"};
  std::vector<msg::wire_int> out;
  out.reserve(v.size());
  for (const auto& item : v) {
    if (item.is_number_unsigned())
      out.push_back(msg::wire_int::from_unsigned(item.get<uint64_t>()));
    else if (item.is_number_integer())
      out.emplace_back(item.get<int64_t>());
    else
      throw request_error{422, field_name(name) + " item " + std::to_string(out.size()) +
                                   " must be an integer in [-2^63, 2^64-1]"};
  }
  return out;
}

std::vector<msg::wire_int> require_int_list(const json& obj, const char* name, size_t max_items) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    throw request_error{422, field_name(name) + " is required"};
  return int_list(*v, name, max_items);
}

/// `name: Optional[List[int]] = <missing>`: absent -> `missing`, null -> nullopt.
std::optional<std::vector<msg::wire_int>>
nullable_int_list(const json& obj, const char* name, size_t max_items,
                  std::optional<std::vector<msg::wire_int>> missing) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    return missing;
  if (v->is_null())
    return std::nullopt;
  return int_list(*v, name, max_items);
}

/// /move's [instance_id, location] pairs.
std::pair<std::string, std::string> require_position(const json& obj, const char* name) {
  const json* v = find_field(obj, name);
  if (v == nullptr)
    throw request_error{422, field_name(name) + " is required"};
  if (!v->is_array() || v->size() != 2 || !(*v)[0].is_string() || !(*v)[1].is_string())
    throw request_error{422, field_name(name) + " must be [instance_id, location] (two strings)"};
  return {(*v)[0].get<std::string>(), (*v)[1].get<std::string>()};
}

// -- replies
// ---------------------------------------------------------------------------------------

/// The reply as `Ret`; an ErrorMsg becomes 500 {"detail": error} as in LMCache.
template <class Ret>
const Ret& expect_reply(const msg::Msg& reply, std::string_view request_tag) {
  if (const auto* error = std::get_if<msg::ErrorMsg>(&reply))
    throw request_error{500, error->error};
  if (const auto* ret = std::get_if<Ret>(&reply))
    return *ret;
  throw request_error{500, "controller answered " + std::string(msg::type_tag_of(reply)) + " to " +
                               std::string(request_tag)};
}

template <class Ret>
json num_tokens_json(const Ret& ret) {
  return json{{"event_id", ret.event_id}, {"num_tokens", int_json(ret.num_tokens)}};
}

// -- query parameters and /proc
// ----------------------------------------------------------------------

std::optional<msg::wire_int> parse_wire_int(std::string_view text) {
  const char* end = text.data() + text.size();
  int64_t i = 0;
  if (auto r = std::from_chars(text.data(), end, i); r.ec == std::errc{} && r.ptr == end)
    return msg::wire_int{i};
  uint64_t u = 0;
  if (auto r = std::from_chars(text.data(), end, u); r.ec == std::errc{} && r.ptr == end)
    return msg::wire_int::from_unsigned(u);
  return std::nullopt;
}

/// A non-empty query parameter, or nullopt (FastAPI's Optional[...] = None; an empty
/// value counts as absent, as `if instance_id:` does in LMCache).
std::optional<std::string> query_param(const httplib::Request& req, const char* name) {
  if (!req.has_param(name))
    return std::nullopt;
  std::string value = req.get_param_value(name);
  if (value.empty())
    return std::nullopt;
  return value;
}

std::optional<msg::wire_int> int_query_param(const httplib::Request& req, const char* name) {
  auto text = query_param(req, name);
  if (!text)
    return std::nullopt;
  auto value = parse_wire_int(*text);
  if (!value)
    throw request_error{422, std::string("query parameter '") + name + "' must be an integer"};
  return value;
}

std::string read_small_file(const std::filesystem::path& path) {
  std::ifstream in{path};
  std::string text;
  std::getline(in, text, '\0');
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  return text;
}

std::string_view thread_state_name(char code) {
  switch (code) {
  case 'R':
    return "running";
  case 'S':
    return "sleeping";
  case 'D':
    return "disk-sleep";
  case 'T':
    return "stopped";
  case 't':
    return "tracing-stop";
  case 'Z':
    return "zombie";
  case 'X':
    return "dead";
  case 'I':
    return "idle";
  default:
    return "unknown";
  }
}

/// Names the calling thread for /threads and debuggers (15 characters at most).
void name_this_thread(const char* name) {
  pthread_setname_np(pthread_self(), name);
}

/// Set by the pre-routing handler, read by the logger: both run on the thread that
/// serves the request, so the pair times one request without shared state.
thread_local clock_type::time_point request_start{};

} // namespace

// -- make_uuid4
// -----------------------------------------------------------------------------------------

std::string make_uuid4() {
  auto& rng = uuid_rng();
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & ~uint64_t{0xF000}) | uint64_t{0x4000};             // version 4
  lo = (lo & ~(uint64_t{0xC0} << 56)) | (uint64_t{0x80} << 56); // RFC 4122 variant
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  auto put = [&](uint64_t v, int nibbles) {
    for (int i = nibbles - 1; i >= 0; --i)
      out += hex[(v >> (4 * i)) & 0xF];
  };
  put(hi >> 32, 8);
  out += '-';
  put(hi >> 16, 4);
  out += '-';
  put(hi, 4);
  out += '-';
  put(lo >> 48, 4);
  out += '-';
  put(lo, 12);
  return out;
}

// -- http_api::impl
// -------------------------------------------------------------------------------------

class http_api::impl {
public:
  using handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // -- construction ------------------------------------------------------------

  impl(http_options options, controller_api& controller, node_metrics& metrics,
       const frontend_counters& frontend)
    : options_(std::move(options)), controller_(controller), metrics_(metrics),
      frontend_(frontend) {
    configure_server();
    add_orchestration_routes();
    add_admin_routes();
  }

  ~impl() { stop(); }

  // -- lifecycle ---------------------------------------------------------------

  void start() {
    if (started_)
      throw std::logic_error("http_api::start called twice");
    started_ = true;
    int bound = -1;
    if (options_.port == 0)
      bound = server_.bind_to_any_port(options_.host);
    else if (server_.bind_to_port(options_.host, options_.port))
      bound = options_.port;
    if (bound <= 0)
      throw std::runtime_error("cannot bind http " + options_.host + ":" +
                               std::to_string(options_.port));
    port_ = static_cast<uint16_t>(bound);
    // Debian's httplib listens with a backlog of 5: a burst of new connections
    // while the accept thread is descheduled would lose SYNs and stall clients
    // for a retransmission. Listening again only raises the backlog.
    if (listen_socket_ != INVALID_SOCKET)
      ::listen(listen_socket_, SOMAXCONN);
    thread_ = std::thread([this] {
      name_this_thread("lmcc-http");
      if (!server_.listen_after_bind())
        spdlog::error("http-listen-failed host={} port={}", options_.host, port_.load());
      listener_done_ = true;
    });
    // httplib's stop() does nothing until listening has begun; wait for that so
    // that a stop() right after start() cannot leave the listener running forever.
    while (!server_.is_running() && !listener_done_)
      std::this_thread::sleep_for(1ms);
    spdlog::info("http-listening host={} port={}", options_.host, port_.load());
  }

  void stop() {
    stopping_ = true;
    if (!thread_.joinable())
      return;
    server_.stop();
    thread_.join();
  }

  uint16_t port() const { return port_; }

private:
  // -- setup -------------------------------------------------------------------

  void configure_server() {
    const size_t threads = std::max<size_t>(1, options_.threads);
    // httplib's API: the server takes ownership of the raw pointer it is handed.
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_.set_payload_max_length(options_.max_body_bytes);
    server_.set_tcp_nodelay(true);
    // httplib keeps an idle keep-alive connection's thread for 5 s, and stop()
    // waits for it: a router holding one open delayed shutdown by ~5 s. One
    // second keeps connections reused under load and shutdown prompt.
    server_.set_keep_alive_timeout(1);
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a
    // second node bind the same port silently and steal half the connections.
    server_.set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      listen_socket_ = sock;
    });
    server_.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
      thread_local bool named = false;
      if (!named) {
        name_this_thread("lmcc-http-w");
        named = true;
      }
      request_start = now();
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // The logger runs after every response, routed or not (404, 413, bad request
    // lines), so this is the one place that times every request.
    server_.set_logger([this](const httplib::Request& req, const httplib::Response&) {
      double seconds = 0;
      if (request_start != clock_type::time_point{})
        seconds = std::chrono::duration<double>(now() - request_start).count();
      request_start = {};
      // Unknown paths share one series so that no client can grow the exposition.
      metrics_.observe_request(known_paths_.contains(req.path) ? "http " + req.path
                                                               : std::string("http other"),
                               seconds);
    });
    server_.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          return on_error_status(req, res);
        }));
    server_.set_exception_handler(
        [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "unknown error";
          try {
            if (ep)
              std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          spdlog::error("http-handler-failed path={} what={}", req.path, what);
          send_json(res, 500, detail_json(what));
        });
  }

  /// Fills in FastAPI-style bodies for statuses httplib produces itself.
  httplib::Server::HandlerResponse on_error_status(const httplib::Request& req,
                                                   httplib::Response& res) {
    if (!res.body.empty())
      return httplib::Server::HandlerResponse::Unhandled; // a handler's own answer
    switch (res.status) {
    case 404:
      if (known_paths_.contains(req.path))
        send_json(res, 405, detail_json("Method Not Allowed"));
      else
        send_json(res, 404, detail_json("Not Found"));
      break;
    case 413:
      send_json(res, 413,
                detail_json("request body larger than " + std::to_string(options_.max_body_bytes) +
                            " bytes"));
      break;
    case 400:
      send_json(res, 400, detail_json("Bad Request"));
      break;
    default:
      send_json(res, res.status, detail_json("HTTP error " + std::to_string(res.status)));
    }
    return httplib::Server::HandlerResponse::Handled;
  }

  void post(const std::string& path, handler fn) {
    known_paths_.insert(path);
    server_.Post(path, guarded(std::move(fn)));
  }

  void get(const std::string& path, handler fn) {
    known_paths_.insert(path);
    server_.Get(path, guarded(std::move(fn)));
  }

  /// Every handler answers; nothing it throws reaches httplib.
  handler guarded(handler fn) {
    return [fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const request_error& e) {
        send_json(res, e.status, detail_json(e.detail));
      } catch (const std::exception& e) {
        spdlog::error("http-handler-failed path={} what={}", req.path, e.what());
        send_json(res, 500, detail_json(e.what()));
      } catch (...) {
        spdlog::error("http-handler-failed path={} what=unknown", req.path);
        send_json(res, 500, detail_json("unknown error"));
      }
    };
  }

  // -- waiting for the controller ---------------------------------------------------

  /// The future's value, waiting at most handler_timeout (504) and giving up at
  /// once when the server stops (503).
  template <class T>
  T await(std::future<T> fut) {
    if (!fut.valid())
      throw std::runtime_error("controller returned no future");
    const auto deadline = now() + options_.handler_timeout;
    for (;;) {
      auto left = std::chrono::duration_cast<clock_type::duration>(deadline - now());
      auto step =
          std::clamp<clock_type::duration>(left, clock_type::duration::zero(), stop_poll_interval);
      if (fut.wait_for(step) == std::future_status::ready)
        return fut.get();
      if (stopping_)
        throw request_error{503, "server is shutting down"};
      if (left <= clock_type::duration::zero())
        throw request_error{504, "controller did not answer within " +
                                     std::to_string(options_.handler_timeout.count()) + " ms"};
    }
  }

  msg::Msg ask(msg::Msg request) { return await(controller_.orchestrate(std::move(request))); }

  // -- orchestration endpoints (spec 5.1) ---------------------------------------------

  void add_orchestration_routes() {
    post("/lookup", [this](const httplib::Request& req, httplib::Response& res) {
      msg::LookupMsg m{.event_id = "Lookup" + make_uuid4(),
                       .tokens = read_lookup_tokens(req.body, options_.max_tokens)};
      auto reply = ask(std::move(m));
      const auto& ret = expect_reply<msg::LookupRetMsg>(reply, "LookupMsg");
      json layout = json::object();
      for (const auto& [instance, where] : ret.layout_info)
        layout[instance] = json::array({where.first, int_json(where.second)});
      send_json(res, 200, json{{"event_id", ret.event_id}, {"layout_info", std::move(layout)}});
    });

    post("/query_instance", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      (void)require_string(body, "event_id"); // required by LMCache's model, then unused
      auto ip = require_string(body, "ip");
      auto reply = ask(msg::QueryInstMsg{.event_id = "QueryInst" + make_uuid4(), .ip = ip});
      const auto& ret = expect_reply<msg::QueryInstRetMsg>(reply, "QueryInstMsg");
      if (!ret.instance_id)
        throw request_error{404, "no instance registered for ip " + ip};
      send_json(res, 200, json{{"event_id", ret.event_id}, {"res", *ret.instance_id}});
    });

    post("/clear", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      auto reply = ask(msg::ClearMsg{.event_id = "Clear" + make_uuid4(),
                                     .instance_id = require_string(body, "instance_id"),
                                     .location = require_string(body, "location")});
      send_json(res, 200, num_tokens_json(expect_reply<msg::ClearRetMsg>(reply, "ClearMsg")));
    });

    post("/pin", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      auto reply =
          ask(msg::PinMsg{.event_id = "Pin" + make_uuid4(),
                          .instance_id = require_string(body, "instance_id"),
                          .location = require_string(body, "location"),
                          .tokens = require_int_list(body, "tokens", options_.max_tokens)});
      send_json(res, 200, num_tokens_json(expect_reply<msg::PinRetMsg>(reply, "PinMsg")));
    });

    post("/compress", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      auto reply =
          ask(msg::CompressMsg{.event_id = "Compress" + make_uuid4(),
                               .instance_id = require_string(body, "instance_id"),
                               .method = require_string(body, "method"),
                               .location = require_string(body, "location"),
                               .tokens = nullable_int_list(body, "tokens", options_.max_tokens,
                                                           std::vector<msg::wire_int>{})});
      send_json(res, 200, num_tokens_json(expect_reply<msg::CompressRetMsg>(reply, "CompressMsg")));
    });

    post("/decompress", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      auto reply =
          ask(msg::DecompressMsg{.event_id = "Decompress" + make_uuid4(),
                                 .instance_id = require_string(body, "instance_id"),
                                 .method = require_string(body, "method"),
                                 .location = require_string(body, "location"),
                                 .tokens = nullable_int_list(body, "tokens", options_.max_tokens,
                                                             std::vector<msg::wire_int>{})});
      send_json(res, 200,
                num_tokens_json(expect_reply<msg::DecompressRetMsg>(reply, "DecompressMsg")));
    });

    post("/move", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      // LMCache: tokens: List[int] = [] (not nullable), should_copy: bool = False.
      std::vector<msg::wire_int> tokens;
      if (const json* t = find_field(body, "tokens"))
        tokens = int_list(*t, "tokens", options_.max_tokens);
      auto reply = ask(msg::MoveMsg{.event_id = "Move" + make_uuid4(),
                                    .old_position = require_position(body, "old_position"),
                                    .new_position = require_position(body, "new_position"),
                                    .tokens = std::move(tokens),
                                    .copy = optional_bool(body, "should_copy", false)});
      send_json(res, 200, num_tokens_json(expect_reply<msg::MoveRetMsg>(reply, "MoveMsg")));
    });

    post("/health", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      // "health" in lower case: LMCache's own prefix for this one.
      auto reply = ask(msg::HealthMsg{.event_id = "health" + make_uuid4(),
                                      .instance_id = require_string(body, "instance_id")});
      const auto& ret = expect_reply<msg::HealthRetMsg>(reply, "HealthMsg");
      json codes = json::object();
      for (const auto& [worker_id, code] : ret.error_codes)
        codes[worker_id.to_string()] = int_json(code); // JSON keys are text
      send_json(res, 200, json{{"event_id", ret.event_id}, {"error_codes", std::move(codes)}});
    });

    post("/check_finish", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      auto reply = ask(msg::CheckFinishMsg{.event_id = require_string(body, "event_id")});
      const auto& ret = expect_reply<msg::CheckFinishRetMsg>(reply, "CheckFinishMsg");
      send_json(res, 200, json{{"status", ret.status}});
    });

    post("/query_worker_info", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      auto reply = ask(msg::QueryWorkerInfoMsg{
          .event_id = "QueryWorkerInfo" + make_uuid4(),
          .instance_id = require_string(body, "instance_id"),
          .worker_ids = nullable_int_list(body, "worker_ids", options_.max_tokens, std::nullopt)});
      const auto& ret = expect_reply<msg::QueryWorkerInfoRetMsg>(reply, "QueryWorkerInfoMsg");
      json infos = json::array();
      for (const auto& w : ret.worker_infos)
        infos.push_back(worker_info_json(w));
      send_json(res, 200, json{{"event_id", ret.event_id}, {"worker_infos", std::move(infos)}});
    });
  }

  // -- admin and observability endpoints ------------------------------------------------

  void add_admin_routes() {
    get("/controller/workers",
        [this](const httplib::Request& req, httplib::Response& res) { handle_workers(req, res); });

    get("/controller/key-stats", [this](const httplib::Request&, httplib::Response& res) {
      auto stats = await(controller_.stats());
      json instances = json::array();
      for (const auto& s : stats.instances)
        instances.push_back(json{{"instance_id", s.instance_id},
                                 {"key_count", s.key_count},
                                 {"worker_count", s.worker_count}});
      send_json(res, 200,
                json{{"total_key_count", stats.total_key_count},
                     {"total_instance_count", stats.total_instance_count},
                     {"total_worker_count", stats.total_worker_count},
                     {"instances", std::move(instances)}});
    });

    get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      auto gauges = await(controller_.gauges());
      res.status = 200;
      res.set_content(render_prometheus(gauges, frontend_, metrics_),
                      "text/plain; version=0.0.4; charset=utf-8");
    });

    // Admin: a consistent checkpoint of the node's store into `dir`, a path on
    // the node's own file system that must not exist yet (lmcc snapshot).
    post("/admin/snapshot", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = parse_object_body(req.body);
      auto dir = require_string(body, "dir");
      if (dir.empty())
        throw request_error{422, "dir must not be empty"};
      auto out = await(controller_.snapshot(dir));
      if (out.status != 200)
        throw request_error{out.status, out.error};
      send_json(res, 200,
                json{{"dir", out.dir},
                     {"sequence", out.sequence},
                     {"workers", out.workers},
                     {"holders", out.holders},
                     {"slots", out.slots},
                     {"log_records", out.log_records},
                     {"files", out.files},
                     {"bytes", out.bytes},
                     {"seconds", out.seconds}});
    });

    get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      send_json(res, 200, json{{"status", "ok"}});
    });

    get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      if (controller_.ready())
        send_json(res, 200, json{{"status", "ready"}});
      else
        send_json(res, 503, json{{"status", "loading"}});
    });

    get("/threads",
        [](const httplib::Request& req, httplib::Response& res) { handle_threads(req, res); });

    get("/env", [](const httplib::Request&, httplib::Response& res) {
      // Only LMCACHE_* and LMCC_* variables: the full environment may carry secrets
      // (API tokens, passwords, cloud keys) and this endpoint has no authentication.
      std::map<std::string, std::string> vars;
      for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        std::string_view kv{*entry};
        auto eq = kv.find('=');
        auto name = kv.substr(0, eq);
        if (!name.starts_with("LMCACHE_") && !name.starts_with("LMCC_"))
          continue;
        vars[std::string(name)] =
            eq == std::string_view::npos ? "" : std::string(kv.substr(eq + 1));
      }
      json out = json::object();
      for (auto& [name, value] : vars)
        out[name] = value;
      send_json(res, 200, out);
    });

    get("/", [](const httplib::Request&, httplib::Response& res) {
      // LMCache serves its dashboard here when the static files are installed; lmcc
      // ships none, so it answers as LMCache does without them.
      res.status = 404;
      res.set_content("<h1>Controller Frontend not found</h1>", "text/html; charset=utf-8");
    });
  }

  /// GET /controller/workers: both parameters -> one worker or 404; instance_id only
  /// -> its workers or 404; otherwise every worker (a lone worker_id is ignored, as
  /// LMCache's `if instance_id and worker_id ... elif instance_id` does).
  void handle_workers(const httplib::Request& req, httplib::Response& res) {
    auto instance_id = query_param(req, "instance_id");
    auto worker_id = int_query_param(req, "worker_id");
    auto all = await(controller_.workers());
    auto worker_json = [](const worker_view& w) {
      json j = worker_info_json(w.info);
      j["key_count"] = w.key_count;
      return j;
    };
    if (instance_id && worker_id) {
      for (const auto& w : all)
        if (w.info.instance_id == *instance_id && w.info.worker_id == *worker_id)
          return send_json(res, 200, worker_json(w));
      throw request_error{404, "worker (" + *instance_id + ", " + worker_id->to_string() +
                                   ") not found"};
    }
    json workers = json::array();
    for (const auto& w : all)
      if (!instance_id || w.info.instance_id == *instance_id)
        workers.push_back(worker_json(w));
    if (instance_id && workers.empty())
      throw request_error{404, "instance " + *instance_id + " not found"};
    const auto total = workers.size();
    send_json(res, 200, json{{"workers", std::move(workers)}, {"total_count", total}});
  }

  /// GET /threads?name=&thread_id=: this process' threads from /proc/self/task.
  static void handle_threads(const httplib::Request& req, httplib::Response& res) {
    auto name_filter = query_param(req, "name");
    auto id_filter = int_query_param(req, "thread_id");
    json threads = json::array();
    std::error_code ec;
    const std::filesystem::directory_iterator end;
    for (std::filesystem::directory_iterator it{"/proc/self/task", ec}; !ec && it != end;
         it.increment(ec)) {
      auto tid = parse_wire_int(it->path().filename().string());
      if (!tid || (id_filter && *id_filter != *tid))
        continue;
      auto name = read_small_file(it->path() / "comm");
      if (name_filter && name.find(*name_filter) == std::string::npos)
        continue;
      // stat is "tid (comm) S ...": the state follows the last ')', since comm may
      // itself contain parentheses or spaces.
      auto stat = read_small_file(it->path() / "stat");
      auto close = stat.rfind(')');
      std::string_view state = "unknown";
      if (close != std::string::npos && close + 2 < stat.size())
        state = thread_state_name(stat[close + 2]);
      threads.push_back(json{{"thread_id", int_json(*tid)},
                             {"name", name},
                             {"state", state},
                             {"function_name", ""},
                             {"cpu_time", 0},
                             {"memory_usage", 0}});
    }
    send_json(res, 200, threads);
  }

  // -- member variables ------------------------------------------------------------

  http_options options_;
  controller_api& controller_;
  node_metrics& metrics_;
  const frontend_counters& frontend_;
  httplib::Server server_;
  /// Registered paths; written only before start(), read-only while serving.
  std::set<std::string, std::less<>> known_paths_;
  std::thread thread_;
  std::atomic<uint16_t> port_{0};
  socket_t listen_socket_ = INVALID_SOCKET; ///< set by the socket-options hook before bind
  std::atomic<bool> listener_done_{false};
  std::atomic<bool> stopping_{false};
  bool started_ = false;
};

// -- http_api
// -----------------------------------------------------------------------------------------

http_api::http_api(http_options options, controller_api& controller, node_metrics& metrics,
                   const frontend_counters& frontend)
  : impl_(std::make_unique<impl>(std::move(options), controller, metrics, frontend)) {}

http_api::~http_api() = default;

void http_api::start() {
  impl_->start();
}

void http_api::stop() {
  impl_->stop();
}

uint16_t http_api::port() const {
  return impl_->port();
}

} // namespace lmcc::gateway
