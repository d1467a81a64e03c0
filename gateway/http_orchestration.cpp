// The orchestration endpoints of LMCache's HTTP API (spec 5.1): each reads its
// body into the OrchMsg (http_body), stamps LMCache's event_id "<Prefix><uuid4>",
// asks the controller and renders the reply in LMCache's shape (http_reply).
// Also make_uuid4, the one place that draws entropy.
#include "gateway/http_api.hpp"
#include "gateway/http_body.hpp"
#include "gateway/http_reply.hpp"
#include "gateway/http_routes.hpp"

#include <cstdint>
#include <random>
#include <utility>

namespace lmcc::gateway {
namespace {

std::mt19937_64& uuid_rng() {
  thread_local std::mt19937_64 rng = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64{seq};
  }();
  return rng;
}

/// The body's message, or the request_error that answers the request.
template <class T>
T read_or_throw(body_result<T> read) {
  if (!read)
    throw read.error();
  return std::move(*read);
}

} // namespace

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

void add_orchestration_routes(route_table& routes, controller_api& controller,
                              const http_options& options, const request_waiter& waiter) {
  const size_t max_tokens = options.max_tokens;
  auto ask = [&controller, &waiter](msg::Msg request) {
    return waiter.await(controller.orchestrate(std::move(request)));
  };

  routes.post(
      "/lookup", route_access::read, [=](const httplib::Request& req, httplib::Response& res) {
        auto m = read_or_throw(read_lookup_body(req.body, max_tokens));
        m.event_id = "Lookup" + make_uuid4();
        auto reply = ask(std::move(m));
        const auto& ret = expect_reply<msg::LookupRetMsg>(reply, "LookupMsg");
        reply_json layout = reply_json::object();
        for (const auto& [instance, where] : ret.layout_info)
          layout[instance] = reply_json::array({where.first, int_json(where.second)});
        // lmcc's own, ignored by LMCache's routers: prefixes from here on may be
        // short (read from copies their owners were uncertain of, mid-fault).
        if (ret.unsure_from_tokens != msg::LookupRetMsg::no_unsure_tokens)
          res.set_header(lookup_unsure_header, std::to_string(ret.unsure_from_tokens));
        send_json(res, 200,
                  reply_json{{"event_id", ret.event_id}, {"layout_info", std::move(layout)}});
      });

  routes.post(
      "/query_instance", route_access::read,
      [=](const httplib::Request& req, httplib::Response& res) {
        auto m = read_or_throw(read_query_instance_body(req.body));
        m.event_id = "QueryInst" + make_uuid4();
        const std::string ip = m.ip;
        auto reply = ask(std::move(m));
        const auto& ret = expect_reply<msg::QueryInstRetMsg>(reply, "QueryInstMsg");
        if (!ret.instance_id)
          throw request_error{404, "no instance registered for ip " + ip};
        send_json(res, 200, reply_json{{"event_id", ret.event_id}, {"res", *ret.instance_id}});
      });

  routes.post(
      "/clear", route_access::change, [=](const httplib::Request& req, httplib::Response& res) {
        auto m = read_or_throw(read_clear_body(req.body));
        m.event_id = "Clear" + make_uuid4();
        auto reply = ask(std::move(m));
        send_json(res, 200, num_tokens_json(expect_reply<msg::ClearRetMsg>(reply, "ClearMsg")));
      });

  routes.post("/pin", route_access::change,
              [=](const httplib::Request& req, httplib::Response& res) {
                auto m = read_or_throw(read_pin_body(req.body, max_tokens));
                m.event_id = "Pin" + make_uuid4();
                auto reply = ask(std::move(m));
                send_json(res, 200, num_tokens_json(expect_reply<msg::PinRetMsg>(reply, "PinMsg")));
              });

  routes.post("/compress", route_access::change,
              [=](const httplib::Request& req, httplib::Response& res) {
                auto m = read_or_throw(read_compress_body(req.body, max_tokens));
                m.event_id = "Compress" + make_uuid4();
                auto reply = ask(std::move(m));
                send_json(res, 200,
                          num_tokens_json(expect_reply<msg::CompressRetMsg>(reply, "CompressMsg")));
              });

  routes.post("/decompress", route_access::change,
              [=](const httplib::Request& req, httplib::Response& res) {
                auto m = read_or_throw(read_decompress_body(req.body, max_tokens));
                m.event_id = "Decompress" + make_uuid4();
                auto reply = ask(std::move(m));
                send_json(
                    res, 200,
                    num_tokens_json(expect_reply<msg::DecompressRetMsg>(reply, "DecompressMsg")));
              });

  routes.post(
      "/move", route_access::change, [=](const httplib::Request& req, httplib::Response& res) {
        auto m = read_or_throw(read_move_body(req.body, max_tokens));
        m.event_id = "Move" + make_uuid4();
        auto reply = ask(std::move(m));
        send_json(res, 200, num_tokens_json(expect_reply<msg::MoveRetMsg>(reply, "MoveMsg")));
      });

  routes.post(
      "/health", route_access::read, [=](const httplib::Request& req, httplib::Response& res) {
        auto m = read_or_throw(read_health_body(req.body));
        m.event_id = "health" + make_uuid4(); // lower case: LMCache's own prefix for this one
        auto reply = ask(std::move(m));
        const auto& ret = expect_reply<msg::HealthRetMsg>(reply, "HealthMsg");
        reply_json codes = reply_json::object();
        for (const auto& [worker_id, code] : ret.error_codes)
          codes[worker_id.to_string()] = int_json(code); // JSON keys are text
        send_json(res, 200,
                  reply_json{{"event_id", ret.event_id}, {"error_codes", std::move(codes)}});
      });

  routes.post("/check_finish", route_access::read,
              [=](const httplib::Request& req, httplib::Response& res) {
                auto reply = ask(read_or_throw(read_check_finish_body(req.body)));
                const auto& ret = expect_reply<msg::CheckFinishRetMsg>(reply, "CheckFinishMsg");
                send_json(res, 200, reply_json{{"status", ret.status}});
              });

  routes.post(
      "/query_worker_info", route_access::read,
      [=](const httplib::Request& req, httplib::Response& res) {
        auto m = read_or_throw(read_query_worker_info_body(req.body, max_tokens));
        m.event_id = "QueryWorkerInfo" + make_uuid4();
        auto reply = ask(std::move(m));
        const auto& ret = expect_reply<msg::QueryWorkerInfoRetMsg>(reply, "QueryWorkerInfoMsg");
        reply_json infos = reply_json::array();
        for (const auto& w : ret.worker_infos)
          infos.push_back(worker_info_json(w));
        send_json(res, 200,
                  reply_json{{"event_id", ret.event_id}, {"worker_infos", std::move(infos)}});
      });
}

} // namespace lmcc::gateway
