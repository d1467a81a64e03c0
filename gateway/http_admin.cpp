// The admin and observability endpoints of the HTTP API: LMCache's
// GET /controller/workers, /controller/key-stats, /metrics (Prometheus text),
// /threads and /env, lmcc's /healthz, /readyz, /cluster/status,
// /cluster/workers, POST /cluster/members, /admin/snapshot and
// /admin/faults (only in a build with fault injection), and the
// dashboard's absent page at /.
#include "faults/fault_injection.hpp"
#include "gateway/http_reply.hpp"
#include "gateway/http_routes.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unistd.h>

namespace lmcc::gateway {
namespace {

// -- query parameters and /proc ----------------------------------------------------

/// A non-empty query parameter, or nullopt (read_query_param).
std::optional<std::string> query_param(const httplib::Request& req, const char* name) {
  return read_query_param(req.params, name);
}

std::optional<msg::wire_int> int_query_param(const httplib::Request& req, const char* name) {
  auto value = read_int_query_param(req.params, name);
  if (!value)
    throw value.error();
  return *value;
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

/// GET /controller/workers: both parameters -> one worker or 404; instance_id only
/// -> its workers or 404; otherwise every worker (a lone worker_id is ignored, as
/// LMCache's `if instance_id and worker_id ... elif instance_id` does).
void handle_workers(const httplib::Request& req, httplib::Response& res, controller_api& controller,
                    const request_waiter& waiter) {
  auto instance_id = query_param(req, "instance_id");
  auto worker_id = int_query_param(req, "worker_id");
  auto all = waiter.await(controller.workers());
  auto worker_json = [](const worker_view& w) {
    reply_json j = worker_info_json(w.info);
    j["key_count"] = w.key_count;
    return j;
  };
  if (instance_id && worker_id) {
    for (const auto& w : all)
      if (w.info.instance_id == *instance_id && w.info.worker_id == *worker_id)
        return send_json(res, 200, worker_json(w));
    throw request_error{404,
                        "worker (" + *instance_id + ", " + worker_id->to_string() + ") not found"};
  }
  reply_json workers = reply_json::array();
  for (const auto& w : all)
    if (!instance_id || w.info.instance_id == *instance_id)
      workers.push_back(worker_json(w));
  if (instance_id && workers.empty())
    throw request_error{404, "instance " + *instance_id + " not found"};
  const auto total = workers.size();
  send_json(res, 200, reply_json{{"workers", std::move(workers)}, {"total_count", total}});
}

/// GET /cluster/workers: lmcc's own list for operators (`lmcc workers`), each
/// worker as /controller/workers shows it plus its home node, locations and
/// full-sync state. Not LMCache's: /controller/workers keeps LMCache's shape.
void handle_cluster_workers(httplib::Response& res, controller_api& controller,
                            const request_waiter& waiter) {
  auto detail = waiter.await(controller.worker_details());
  if (detail.status != 200)
    throw request_error{detail.status, detail.error};
  reply_json workers = reply_json::array();
  for (const auto& w : detail.workers) {
    reply_json j = worker_info_json(w.view.info);
    j["key_count"] = w.view.key_count;
    j["locations"] = w.locations;
    j["home"] = w.home;
    j["full_sync"] = w.full_sync;
    j["full_sync_reason"] = w.full_sync_reason;
    workers.push_back(std::move(j));
  }
  const auto total = workers.size();
  send_json(res, 200,
            reply_json{{"node", detail.node},
                       {"workers", std::move(workers)},
                       {"total_count", total},
                       {"full_sync",
                        {{"syncing", detail.syncing},
                         {"completed", detail.completed},
                         {"missing_batches", detail.missing_batches}}}});
}

/// GET /threads?name=&thread_id=: this process' threads from /proc/self/task.
void handle_threads(const httplib::Request& req, httplib::Response& res) {
  auto name_filter = query_param(req, "name");
  auto id_filter = int_query_param(req, "thread_id");
  reply_json threads = reply_json::array();
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
    threads.push_back(reply_json{{"thread_id", int_json(*tid)},
                                 {"name", name},
                                 {"state", state},
                                 {"function_name", ""},
                                 {"cpu_time", 0},
                                 {"memory_usage", 0}});
  }
  send_json(res, 200, threads);
}

/// GET /env: only LMCACHE_* and LMCC_* variables. The full environment may carry
/// secrets (API tokens, passwords, cloud keys) and this endpoint has no authentication.
void handle_env(httplib::Response& res) {
  std::map<std::string, std::string> vars;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv{*entry};
    auto eq = kv.find('=');
    auto name = kv.substr(0, eq);
    if (!name.starts_with("LMCACHE_") && !name.starts_with("LMCC_"))
      continue;
    // The cluster secret (LMCC_CLUSTER_SECRET) and anything named like a
    // credential show as set, never their value.
    const bool secret = name.find("SECRET") != std::string_view::npos ||
                        name.find("PASSWORD") != std::string_view::npos ||
                        name.find("TOKEN") != std::string_view::npos;
    vars[std::string(name)] = secret                         ? "<redacted>"
                              : eq == std::string_view::npos ? ""
                                                             : std::string(kv.substr(eq + 1));
  }
  reply_json out = reply_json::object();
  for (auto& [name, value] : vars)
    out[name] = value;
  send_json(res, 200, out);
}

} // namespace

void add_admin_routes(route_table& routes, controller_api& controller, node_metrics& metrics,
                      const frontend_counters& frontend, const request_waiter& waiter) {
  routes.get("/controller/workers", route_access::read,
             [&controller, &waiter](const httplib::Request& req, httplib::Response& res) {
               handle_workers(req, res, controller, waiter);
             });

  routes.get("/controller/key-stats", route_access::read,
             [&controller, &waiter](const httplib::Request&, httplib::Response& res) {
               auto stats = waiter.await(controller.stats());
               reply_json instances = reply_json::array();
               for (const auto& s : stats.instances)
                 instances.push_back(reply_json{{"instance_id", s.instance_id},
                                                {"key_count", s.key_count},
                                                {"worker_count", s.worker_count}});
               send_json(res, 200,
                         reply_json{{"total_key_count", stats.total_key_count},
                                    {"total_instance_count", stats.total_instance_count},
                                    {"total_worker_count", stats.total_worker_count},
                                    {"instances", std::move(instances)}});
             });

  routes.get(
      "/metrics", route_access::read,
      [&controller, &metrics, &frontend, &waiter](const httplib::Request&, httplib::Response& res) {
        auto gauges = waiter.await(controller.gauges());
        res.status = 200;
        res.set_content(render_prometheus(gauges, frontend, metrics),
                        "text/plain; version=0.0.4; charset=utf-8");
      });

  // A consistent checkpoint of the node's store into `dir`, a path on the node's
  // own file system that must not exist yet (lmcc snapshot).
  routes.post("/admin/snapshot", route_access::change,
              [&controller, &waiter](const httplib::Request& req, httplib::Response& res) {
                auto dir = read_snapshot_body(req.body);
                if (!dir)
                  throw dir.error();
                auto out = waiter.await(controller.snapshot(*dir));
                if (out.status != 200)
                  throw request_error{out.status, out.error};
                send_json(res, 200,
                          reply_json{{"dir", out.dir},
                                     {"sequence", out.sequence},
                                     {"workers", out.workers},
                                     {"holders", out.holders},
                                     {"slots", out.slots},
                                     {"log_records", out.log_records},
                                     {"files", out.files},
                                     {"bytes", out.bytes},
                                     {"seconds", out.seconds}});
              });

#if LMCC_FAULT_INJECTION
  // Injected faults (lmcc node --fault-injection on): crash and chaos tests
  // make commits fail or slow down, or jump the node's wall clock, then check
  // what the node does. A build without fault injection has no such route:
  // 404, as any unknown path.
  routes.post("/admin/faults", route_access::change,
              [&controller](const httplib::Request& req, httplib::Response& res) {
                auto settings = read_faults_body(req.body);
                if (!settings)
                  throw settings.error();
                auto out = controller.set_store_faults(*settings);
                if (out.status != 200)
                  throw request_error{out.status, out.error};
                send_json(res, 200,
                          reply_json{{"fail_commits", out.fail_commits},
                                     {"fail_all_commits", out.fail_all_commits},
                                     {"commit_delay_us", out.commit_delay_us},
                                     {"clock_offset_ms", out.clock_offset_ms}});
              });
#endif

  // The cluster as this node sees it (lmcc cluster up waits on it).
  routes.get("/cluster/status", route_access::read,
             [&controller](const httplib::Request&, httplib::Response& res) {
               auto status = controller.cluster_status_json();
               if (!status)
                 throw request_error{
                     404, "this node is not part of a cluster (lmcc_cluster_members is empty)"};
               res.status = 200;
               res.set_content(*status, "application/json");
             });

  routes.get("/cluster/workers", route_access::read,
             [&controller, &waiter](const httplib::Request&, httplib::Response& res) {
               handle_cluster_workers(res, controller, waiter);
             });

  // A membership change: {"members": ["n1", "n2", "n3", "n4"]}
  // (docs/operations.md, "Adding and removing nodes").
  routes.post("/cluster/members", route_access::change,
              [&controller](const httplib::Request& req, httplib::Response& res) {
                auto members = read_members_body(req.body);
                if (!members)
                  throw members.error();
                auto out = controller.change_members(*members);
                if (out.status != 200)
                  throw request_error{out.status, out.error};
                res.status = 200;
                res.set_content(out.record, "application/json");
              });

  routes.get("/healthz", route_access::probe, [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, reply_json{{"status", "ok"}});
  });

  routes.get("/readyz", route_access::probe,
             [&controller](const httplib::Request&, httplib::Response& res) {
               if (controller.ready())
                 send_json(res, 200, reply_json{{"status", "ready"}});
               else
                 send_json(res, 503, reply_json{{"status", "loading"}});
             });

  routes.get("/threads", route_access::read,
             [](const httplib::Request& req, httplib::Response& res) { handle_threads(req, res); });

  routes.get("/env", route_access::read,
             [](const httplib::Request&, httplib::Response& res) { handle_env(res); });

  routes.get("/", route_access::read, [](const httplib::Request&, httplib::Response& res) {
    // LMCache serves its dashboard here when the static files are installed; lmcc
    // ships none, so it answers as LMCache does without them.
    res.status = 404;
    res.set_content("<h1>Controller Frontend not found</h1>", "text/html; charset=utf-8");
  });
}

} // namespace lmcc::gateway
