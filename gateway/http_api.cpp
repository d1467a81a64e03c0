// http_api: the HTTP server around LMCache's API — cpp-httplib set up, bound and
// stopped; FastAPI-style bodies for the statuses httplib produces itself; every
// request timed into node_metrics. The endpoints themselves live in
// http_orchestration.cpp and http_admin.cpp, request bodies in http_body.cpp and
// reply rendering in http_reply.cpp.
#include "gateway/http_api.hpp"

#include "gateway/http_reply.hpp"
#include "gateway/http_routes.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <pthread.h>
#include <stdexcept>
#include <thread>
#include <utility>

namespace lmcc::gateway {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// -- adapters: the only places in this file that read the clock ---------------------------

clock_type::time_point now() {
  return clock_type::now();
}

/// Names the calling thread for /threads and debuggers (15 characters at most).
void name_this_thread(const char* name) {
  pthread_setname_np(pthread_self(), name);
}

/// Set by the pre-routing handler, read by the logger: both run on the thread that
/// serves the request, so the pair times one request without shared state.
thread_local clock_type::time_point request_start{};

} // namespace

// -- route_table ----------------------------------------------------------------------------

/// Every handler answers; nothing it throws reaches httplib. A request without
/// the token its route needs never reaches the handler.
route_table::handler route_table::guarded(route_access access, handler fn) const {
  return [this, access, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    if (auto refusal = check_access(access, security_, req.get_header_value("Authorization"))) {
      metrics_.count_event(refusal->event);
      spdlog::warn("http-access-refused path={} remote={} status={} reason={}", req.path,
                   req.remote_addr, refusal->status, refusal->event);
      if (refusal->status == 401)
        res.set_header("WWW-Authenticate", "Bearer realm=\"lmcc\"");
      send_json(res, refusal->status, detail_json(refusal->detail));
      return;
    }
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

void route_table::post(const std::string& path, route_access access, handler fn) {
  paths_.insert(path);
  server_.Post(path, guarded(access, std::move(fn)));
}

void route_table::get(const std::string& path, route_access access, handler fn) {
  paths_.insert(path);
  server_.Get(path, guarded(access, std::move(fn)));
}

// -- http_api::impl -------------------------------------------------------------------------

class http_api::impl {
public:
  // -- construction ------------------------------------------------------------

  impl(http_options options, controller_api& controller, node_metrics& metrics,
       const frontend_counters& frontend)
    : options_(std::move(options)), metrics_(metrics), server_(make_server(options_.security)),
      routes_(*server_, options_.security, metrics), waiter_(options_.handler_timeout, stopping_) {
    configure_server();
    add_orchestration_routes(routes_, controller, options_, waiter_);
    add_admin_routes(routes_, controller, metrics, frontend, waiter_);
    add_dashboard_route(routes_);
  }

  ~impl() { stop(); }

  // -- lifecycle ---------------------------------------------------------------

  void start() {
    if (started_)
      throw std::logic_error("http_api::start called twice");
    started_ = true;
    int bound = -1;
    if (options_.port == 0)
      bound = server_->bind_to_any_port(options_.host);
    else if (server_->bind_to_port(options_.host, options_.port))
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
      if (!server_->listen_after_bind())
        spdlog::error("http-listen-failed host={} port={}", options_.host, port_.load());
      listener_done_ = true;
    });
    // httplib's stop() does nothing until listening has begun; wait for that so
    // that a stop() right after start() cannot leave the listener running forever.
    while (!server_->is_running() && !listener_done_)
      std::this_thread::sleep_for(1ms);
    spdlog::info("http-listening host={} port={} tls={} token={} token_for_reads={}", options_.host,
                 port_.load(), options_.security.tls(), !options_.security.token.empty(),
                 options_.security.token_for_reads);
  }

  void stop() {
    stopping_ = true;
    if (!thread_.joinable())
      return;
    server_->stop();
    thread_.join();
  }

  uint16_t port() const { return port_; }

private:
  // -- setup -------------------------------------------------------------------

  /// HTTPS when a certificate is configured, else plain HTTP.
  static std::unique_ptr<httplib::Server> make_server(const http_security& security) {
    if (!security.tls())
      return std::make_unique<httplib::Server>();
    auto tls = std::make_unique<httplib::SSLServer>(security.tls_cert_file.c_str(),
                                                    security.tls_key_file.c_str());
    if (!tls->is_valid())
      throw std::runtime_error("cannot serve HTTPS with the certificate " + security.tls_cert_file +
                               " and the key " + security.tls_key_file +
                               " (lmcc_http_tls_cert_file, lmcc_http_tls_key_file)");
    return tls;
  }

  void configure_server() {
    const size_t threads = std::max<size_t>(1, options_.threads);
    // httplib's API: the server takes ownership of the raw pointer it is handed.
    server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_->set_payload_max_length(options_.max_body_bytes);
    server_->set_tcp_nodelay(true);
    // httplib keeps an idle keep-alive connection's thread for 5 s, and stop()
    // waits for it: a router holding one open delayed shutdown by ~5 s. One
    // second keeps connections reused under load and shutdown prompt.
    server_->set_keep_alive_timeout(1);
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a
    // second node bind the same port silently and steal half the connections.
    server_->set_socket_options([this](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
      listen_socket_ = sock;
    });
    server_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
      thread_local bool named = false;
      if (!named) {
        name_this_thread("lmcc-http-w");
        named = true;
      }
      prefer_gzip_to_brotli(req);
      request_start = now();
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // The logger runs after every response, routed or not (404, 413, bad request
    // lines), so this is the one place that times every request.
    server_->set_logger([this](const httplib::Request& req, const httplib::Response&) {
      double seconds = 0;
      if (request_start != clock_type::time_point{})
        seconds = std::chrono::duration<double>(now() - request_start).count();
      request_start = {};
      // Unknown paths share one series so that no client can grow the exposition.
      metrics_.observe_request(
          routes_.knows(req.path) ? "http " + req.path : std::string("http other"), seconds);
    });
    server_->set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          return on_error_status(req, res);
        }));
    server_->set_exception_handler(
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

  /// Debian's httplib answers a client that accepts `br` (every browser) with
  /// brotli at its fixed quality 11: ~7 ms of CPU per 20 KB of /metrics, 30 ms
  /// a second for one open /dashboard page, against ~2 ms with gzip. So `br`
  /// is taken out of what the client accepts, leaving gzip when it asked for it.
  /// httplib hands the pre-routing handler its own non-const Request as const.
  static void prefer_gzip_to_brotli(const httplib::Request& req) {
    auto& headers = const_cast<httplib::Request&>(req).headers;
    auto [first, last] = headers.equal_range("Accept-Encoding");
    for (auto it = first; it != last; ++it)
      if (it->second.find("br") != std::string::npos)
        it->second = it->second.find("gzip") != std::string::npos ? "gzip" : "identity";
  }

  /// Fills in FastAPI-style bodies for statuses httplib produces itself.
  httplib::Server::HandlerResponse on_error_status(const httplib::Request& req,
                                                   httplib::Response& res) {
    if (!res.body.empty())
      return httplib::Server::HandlerResponse::Unhandled; // a handler's own answer
    switch (res.status) {
    case 404:
      if (routes_.knows(req.path))
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

  // -- member variables ------------------------------------------------------------

  http_options options_;
  node_metrics& metrics_;
  std::unique_ptr<httplib::Server> server_; ///< plain or HTTPS (make_server)
  std::atomic<bool> stopping_{false};
  /// Registered paths and their handlers; complete before start(), read-only while serving.
  route_table routes_;
  request_waiter waiter_;
  std::thread thread_;
  std::atomic<uint16_t> port_{0};
  socket_t listen_socket_ = INVALID_SOCKET; ///< set by the socket-options hook before bind
  std::atomic<bool> listener_done_{false};
  bool started_ = false;
};

// -- http_api -------------------------------------------------------------------------------

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
