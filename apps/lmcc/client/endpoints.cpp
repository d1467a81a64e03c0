#include "apps/lmcc/client/endpoints.hpp"

#include "gateway/http_access.hpp"

#include <CLI/CLI.hpp>
#include <httplib.h>

#include <charconv>
#include <cstdlib>
#include <future>
#include <stdexcept>

namespace lmcc::apps::client {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool valid_endpoint(std::string_view e) {
  const auto colon = e.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == e.size())
    return false;
  const auto port_text = e.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  return ec == std::errc{} && end == port_text.data() + port_text.size() && port >= 1 &&
         port <= 65535;
}

/// What went wrong, in words (httplib's own names are terse: "Connection").
std::string transport_reason(httplib::Error e, std::chrono::milliseconds timeout) {
  const auto seconds = std::to_string(timeout.count() / 1000) + " s";
  switch (e) {
  case httplib::Error::Connection:
    return "connection refused or host unreachable";
  case httplib::Error::ConnectionTimeout:
    return "no connection within " + seconds;
  case httplib::Error::Read:
    return "no answer within " + seconds + ", or the connection dropped";
  case httplib::Error::Write:
    return "the request could not be sent";
  default:
    return httplib::to_string(e);
  }
}

/// A short reason from a non-200 answer: FastAPI's {"detail": ...} or the body.
std::string http_reason(const httplib::Response& res) {
  auto body = nlohmann::json::parse(res.body, nullptr, false);
  std::string why = res.body.substr(0, 200);
  if (!body.is_discarded() && body.is_object() && body.contains("detail") &&
      body["detail"].is_string())
    why = body["detail"].get<std::string>();
  return "HTTP " + std::to_string(res.status) + (why.empty() ? "" : ": " + why);
}

} // namespace

void add_client_flags(CLI::App& cmd, client_options& options, const std::string& timeout_help) {
  cmd.add_option("--endpoints", options.endpoints,
                 "any nodes of the cluster (their HTTP API), tried in order")
      ->type_name("HOST:PORT[,HOST:PORT...]")
      ->capture_default_str();
  cmd.add_option("--output,-o", options.output, "table (for people) or json (for scripts)")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd.add_option("--timeout", options.timeout_s, timeout_help)
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--token-file", options.token_file,
                 "file holding the API token (else $LMCC_API_TOKEN): calls that change state "
                 "need it when the nodes have one")
      ->type_name("FILE");
  cmd.add_flag("--https", options.https, "the nodes serve HTTPS");
  cmd.add_option("--ca-file", options.ca_file,
                 "HTTPS, the nodes' certificates verified with this CA")
      ->type_name("FILE");
}

request_settings client_options::request() const {
  request_settings r{timeout()};
  r.https = https || !ca_file.empty();
  r.ca_file = ca_file;
  const char* env = std::getenv("LMCC_API_TOKEN");
  try {
    r.token = gateway::read_api_token(token_file, env != nullptr ? env : "");
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string(e.what()) + " (--token-file)");
  }
  return r;
}

msg::expected<std::vector<std::string>> parse_endpoints(std::string_view text) {
  std::vector<std::string> out;
  while (true) {
    const auto comma = text.find(',');
    auto e = trim(text.substr(0, comma));
    if (e.starts_with("http://"))
      e.remove_prefix(7);
    else if (e.starts_with("https://"))
      e.remove_prefix(8);
    while (e.ends_with('/'))
      e.remove_suffix(1);
    if (!e.empty()) {
      if (!valid_endpoint(e))
        return msg::codec_error{"'" + std::string(e) + "' is not HOST:PORT"};
      out.emplace_back(e);
    }
    if (comma == std::string_view::npos)
      break;
    text.remove_prefix(comma + 1);
  }
  if (out.empty())
    return msg::codec_error{"no endpoint given (HOST:PORT[,HOST:PORT...])"};
  return out;
}

namespace {

/// GET `path`, or POST `body` to it when `body` is set.
fetched exchange(const std::string& endpoint, const std::string& path, const nlohmann::json* body,
                 const request_settings& settings) {
  const auto timeout = settings.timeout;
  fetched out;
  out.endpoint = endpoint;
  httplib::Client http{(settings.https ? "https://" : "http://") + endpoint};
  if (settings.https) {
    http.enable_server_certificate_verification(true);
    if (!settings.ca_file.empty())
      http.set_ca_cert_path(settings.ca_file.c_str());
  }
  if (!settings.token.empty())
    http.set_bearer_token_auth(settings.token.c_str());
  http.set_connection_timeout(timeout);
  http.set_read_timeout(timeout);
  http.set_write_timeout(timeout);
  auto res =
      body ? http.Post(path.c_str(), body->dump(), "application/json") : http.Get(path.c_str());
  if (!res) {
    out.error = transport_reason(res.error(), timeout);
    return out;
  }
  out.http_status = res->status;
  if (res->status != 200) {
    out.error = http_reason(*res);
    return out;
  }
  auto answer = nlohmann::json::parse(res->body, nullptr, false);
  if (answer.is_discarded()) {
    out.error = "the answer to " + std::string(body ? "POST " : "GET ") + path + " is not JSON";
    return out;
  }
  out.body = std::move(answer);
  return out;
}

} // namespace

fetched fetch_json(const std::string& endpoint, const std::string& path,
                   const request_settings& settings) {
  return exchange(endpoint, path, nullptr, settings);
}

fetched post_json(const std::string& endpoint, const std::string& path, const nlohmann::json& body,
                  const request_settings& settings) {
  return exchange(endpoint, path, &body, settings);
}

std::vector<fetched> fetch_all(const std::vector<std::string>& endpoints, const std::string& path,
                               const request_settings& settings) {
  std::vector<std::future<fetched>> pending;
  pending.reserve(endpoints.size());
  for (const auto& e : endpoints)
    pending.push_back(std::async(std::launch::async,
                                 [&e, &path, &settings] { return fetch_json(e, path, settings); }));
  std::vector<fetched> out;
  out.reserve(pending.size());
  for (auto& f : pending)
    out.push_back(f.get());
  return out;
}

first_answer fetch_first(const std::vector<std::string>& endpoints, const std::string& path,
                         const request_settings& settings) {
  first_answer out;
  for (const auto& e : endpoints) {
    auto f = fetch_json(e, path, settings);
    if (f.ok()) {
      out.answer = std::move(f);
      return out;
    }
    out.failures.push_back(std::move(f));
  }
  return out;
}

std::optional<request_settings> settings_or_say(const client_options& options, std::ostream& err,
                                                std::string_view command) {
  try {
    return options.request();
  } catch (const std::exception& e) {
    err << command << ": " << e.what() << "\n";
    return std::nullopt;
  }
}

std::string describe_failures(const std::vector<fetched>& failures) {
  std::string out;
  for (const auto& f : failures) {
    if (!out.empty())
      out += "; ";
    out += f.endpoint + " (" + f.error + ")";
  }
  return out;
}

} // namespace lmcc::apps::client
