// The JSON answers of the HTTP API in LMCache's shapes: full-range ints, FastAPI's
// {"detail": ...} errors, WorkerInfo as LMCache's dataclass renders it (see
// http_reply.hpp).
#include "gateway/http_reply.hpp"

namespace lmcc::gateway {

reply_json int_json(const msg::wire_int& v) {
  return v.is_negative() ? reply_json(v.as_int64()) : reply_json(v.bits());
}

reply_json detail_json(std::string_view text) {
  return reply_json{{"detail", text}};
}

void send_json(httplib::Response& res, int status, const reply_json& body) {
  res.status = status;
  // Text from workers or /proc may not be valid UTF-8; replace rather than throw.
  res.set_content(body.dump(-1, ' ', false, reply_json::error_handler_t::replace),
                  "application/json");
}

reply_json worker_info_json(const msg::WorkerInfo& w) {
  return reply_json{
      {"instance_id", w.instance_id},
      {"worker_id", int_json(w.worker_id)},
      {"ip", w.ip},
      {"port", int_json(w.port)},
      {"peer_init_url", w.peer_init_url ? reply_json(*w.peer_init_url) : reply_json(nullptr)},
      {"registration_time", w.registration_time},
      {"last_heartbeat_time", w.last_heartbeat_time}};
}

} // namespace lmcc::gateway
