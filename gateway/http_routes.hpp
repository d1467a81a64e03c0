// http_routes: what the route files (http_orchestration.cpp, http_admin.cpp,
// http_dashboard.cpp) need from the server in http_api.cpp.
//
//   route_table: registers handlers on the httplib server, each with what it
//     may do (route_access): a request without the API token a route needs is
//     refused (401/403) before its handler runs. Every handler is guarded: a
//     request_error it throws becomes {"detail": ...} with its status,
//     anything else a logged 500; nothing reaches httplib. The table also knows
//     every registered path (405 vs 404, and the request-timing series).
//   request_waiter: waits for the controller's future at most handler_timeout
//     (504) and gives up at once when the server stops (503).
//
//   add_orchestration_routes(routes, controller, options, waiter);
//   add_admin_routes(routes, controller, metrics, frontend, waiter);
//   add_dashboard_route(routes);
//
// Private to gateway/http_*.cpp. Thread-safety: routes are added before the
// server starts; then the table is read-only and the waiter is used by every
// handler thread at once.
#pragma once

#include "gateway/controller_api.hpp"
#include "gateway/gateway_options.hpp"
#include "gateway/http_access.hpp"
#include "gateway/http_body.hpp"
#include "gateway/metrics.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

namespace lmcc::gateway {

class route_table {
public:
  using handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  route_table(httplib::Server& server, const http_security& security, node_metrics& metrics)
    : server_(server), security_(security), metrics_(metrics) {}

  void post(const std::string& path, route_access access, handler fn);
  void get(const std::string& path, route_access access, handler fn);

  /// True for a registered path, whatever its method.
  bool knows(std::string_view path) const { return paths_.contains(path); }

private:
  handler guarded(route_access access, handler fn) const;

  httplib::Server& server_;
  const http_security& security_;
  node_metrics& metrics_;
  std::set<std::string, std::less<>> paths_;
};

class request_waiter {
public:
  using clock_type = std::chrono::steady_clock;

  request_waiter(std::chrono::milliseconds timeout, const std::atomic<bool>& stopping)
    : timeout_(timeout), stopping_(stopping) {}

  /// The future's value. Throws request_error 504 after the timeout, 503 once the
  /// server is stopping, std::runtime_error for a future without a state.
  template <class T>
  T await(std::future<T> fut) const {
    if (!fut.valid())
      throw std::runtime_error("controller returned no future");
    const auto deadline = clock_type::now() + timeout_;
    for (;;) {
      auto left = std::chrono::duration_cast<clock_type::duration>(deadline - clock_type::now());
      auto step =
          std::clamp<clock_type::duration>(left, clock_type::duration::zero(), poll_interval);
      if (fut.wait_for(step) == std::future_status::ready)
        return fut.get();
      if (stopping_)
        throw request_error{503, "server is shutting down"};
      if (left <= clock_type::duration::zero())
        throw request_error{504, "controller did not answer within " +
                                     std::to_string(timeout_.count()) + " ms"};
    }
  }

private:
  /// How often a waiting handler checks whether the server is stopping.
  static constexpr std::chrono::milliseconds poll_interval{50};

  std::chrono::milliseconds timeout_;
  const std::atomic<bool>& stopping_;
};

/// POST /lookup /query_instance /clear /pin /compress /decompress /move /health
/// /check_finish /query_worker_info (http_orchestration.cpp).
void add_orchestration_routes(route_table& routes, controller_api& controller,
                              const http_options& options, const request_waiter& waiter);

/// GET /controller/workers /controller/key-stats /metrics /healthz /readyz
/// /threads /env /, POST /admin/snapshot (http_admin.cpp).
void add_admin_routes(route_table& routes, controller_api& controller, node_metrics& metrics,
                      const frontend_counters& frontend, const request_waiter& waiter);

/// GET /dashboard: the live dashboard page, embedded (http_dashboard.cpp).
void add_dashboard_route(route_table& routes);

} // namespace lmcc::gateway
