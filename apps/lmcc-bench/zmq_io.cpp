#include "apps/lmcc-bench/zmq_io.hpp"

#include "messages/codec_json.hpp"
#include "messages/codec_msgpack.hpp"

#include <zmq_addon.hpp>

#include <charconv>
#include <iterator>

namespace lmcc::bench {

zmq::socket_t make_socket(zmq::context_t& ctx, zmq::socket_type type, uint32_t timeout_ms,
                          int linger_ms) {
  zmq::socket_t socket{ctx, type};
  socket.set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout_ms));
  socket.set(zmq::sockopt::sndtimeo, static_cast<int>(timeout_ms));
  socket.set(zmq::sockopt::linger, linger_ms);
  return socket;
}

uint16_t bound_port(zmq::socket_t& socket) {
  std::string endpoint = socket.get(zmq::sockopt::last_endpoint);
  auto colon = endpoint.rfind(':');
  unsigned port = 0;
  std::from_chars(endpoint.data() + colon + 1, endpoint.data() + endpoint.size(), port);
  return static_cast<uint16_t>(port);
}

bool send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    if (!socket.send(zmq::buffer(frames[i]), flags)) {
      // ZMQ queues the rest of a multipart once its first frame is in (the HWM
      // counts whole messages), so only the first frame can time out.
      if (i == 0)
        return false;
      throw std::runtime_error("PUSH multipart cut short after " + std::to_string(i) + " frames");
    }
  }
  return true;
}

dealer_channel::dealer_channel(zmq::context_t& ctx, std::string url, uint32_t timeout_ms)
  : ctx_(&ctx), url_(std::move(url)), timeout_ms_(timeout_ms),
    socket_(make_socket(ctx, zmq::socket_type::dealer, timeout_ms)) {
  socket_.connect(url_);
}

void dealer_channel::reset() {
  socket_ = make_socket(*ctx_, zmq::socket_type::dealer, timeout_ms_);
  socket_.connect(url_);
}

bool dealer_channel::send(const msg::Msg& m) {
  std::string payload = msg::encode_msgpack(m);
  if (!socket_.send(zmq::const_buffer{}, zmq::send_flags::sndmore))
    return false;
  return socket_.send(zmq::buffer(payload), zmq::send_flags::none).has_value();
}

request_result dealer_channel::decode_reply(std::vector<zmq::message_t>& frames) const {
  request_result result;
  if (frames.empty()) {
    result.status = request_status::bad_reply;
    result.error = "empty reply";
    return result;
  }
  auto decoded = msg::decode_frame(frames.back().to_string_view());
  if (!decoded) {
    result.status = request_status::bad_reply;
    result.error = decoded.error().message;
    return result;
  }
  result.status = request_status::ok;
  result.reply = std::move(*decoded);
  return result;
}

request_result dealer_channel::request(const msg::Msg& m) {
  if (!send(m)) {
    reset();
    return request_result{request_status::send_failed, std::nullopt, "send timed out"};
  }
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(socket_, std::back_inserter(frames))) {
    reset(); // a late reply must not answer the next request
    return request_result{};
  }
  return decode_reply(frames);
}

request_result dealer_channel::receive_now() {
  std::vector<zmq::message_t> frames;
  if (!zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait))
    return request_result{};
  return decode_reply(frames);
}

} // namespace lmcc::bench
