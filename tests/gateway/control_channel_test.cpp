// control_channel against fake workers on loopback: real REP sockets (what
// LMCache workers run) and ROUTER sockets where a test needs a worker that
// skips or delays an answer, which a REP cannot do.
#include "gateway/control_channel.hpp"
#include "messages/codec_msgpack.hpp"

#include <gtest/gtest.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace lmcc::gateway {
namespace {

using namespace std::chrono_literals;
using msg::ClearWorkerMsg;
using msg::ClearWorkerRetMsg;
using msg::HealthWorkerMsg;
using msg::HealthWorkerRetMsg;
using msg::Msg;
using clock = std::chrono::steady_clock;

constexpr auto wait_limit = 10s; // generous: the machine is shared

std::string endpoint_of(zmq::socket_t& socket) {
  auto url = socket.get(zmq::sockopt::last_endpoint); // "tcp://127.0.0.1:NNNN"
  return url.substr(std::string_view("tcp://").size());
}

std::string clear_reply(int64_t num_tokens) {
  return msg::encode_msgpack(Msg{ClearWorkerRetMsg{.num_tokens = num_tokens}});
}

Msg clear_cmd(std::string id) {
  return Msg{ClearWorkerMsg{.worker_event_id = std::move(id), .location = "LocalCPUBackend"}};
}

/// A worker REP socket served by its own thread. `answer` maps each decoded
/// request to the raw reply frame (so a test can answer garbage).
class fake_rep_worker {
public:
  /// nullopt: take the request and never answer it (a hung worker; a REP
  /// cannot receive again until it answers).
  using answer_fn = std::function<std::optional<std::string>(const Msg&)>;

  fake_rep_worker(zmq::context_t& ctx, answer_fn answer, std::string bind = "tcp://127.0.0.1:*")
    : socket_(ctx, zmq::socket_type::rep), answer_(std::move(answer)) {
    socket_.set(zmq::sockopt::linger, 0);
    // A port just released by another REP may still be closing in libzmq's I/O
    // thread; retry the bind for a moment.
    const auto until = clock::now() + 5s;
    for (;;) {
      try {
        socket_.bind(bind);
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EADDRINUSE || clock::now() > until) {
          throw;
        }
        std::this_thread::sleep_for(10ms);
      }
    }
    endpoint_ = endpoint_of(socket_);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_rep_worker() { stop(); }

  const std::string& endpoint() const { return endpoint_; }

  /// Stops serving and closes the socket (a worker process going away).
  void stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
      socket_.close();
    }
  }

  std::vector<Msg> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

private:
  void serve() {
    while (!stop_) {
      zmq::message_t request;
      std::vector<zmq::pollitem_t> items{{socket_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 20ms);
      if ((items[0].revents & ZMQ_POLLIN) == 0 ||
          !socket_.recv(request, zmq::recv_flags::dontwait)) {
        continue;
      }
      auto decoded = msg::decode_msgpack(request.to_string_view());
      ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(*decoded);
      }
      const auto reply = answer_(*decoded);
      if (!reply) {
        while (!stop_) {
          std::this_thread::sleep_for(5ms);
        }
        return;
      }
      socket_.send(zmq::buffer(*reply), zmq::send_flags::none);
    }
  }

  zmq::socket_t socket_;
  answer_fn answer_;
  std::string endpoint_;
  std::mutex mutex_;
  std::vector<Msg> requests_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// A worker built on ROUTER so a test can hold, reorder or drop answers. The
/// handler runs on the fake's thread and may call `reply` for this or any
/// earlier request, any number of times.
class fake_router_worker {
public:
  struct request {
    int index = 0;        // 1-based arrival number
    std::string identity; // the controller-side socket it came from
    Msg command;
  };
  using reply_fn = std::function<void(const std::string& identity, const std::string& payload)>;
  using handler_fn = std::function<void(const request&, const reply_fn&)>;

  fake_router_worker(zmq::context_t& ctx, handler_fn handler)
    : socket_(ctx, zmq::socket_type::router), handler_(std::move(handler)) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = endpoint_of(socket_);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_router_worker() {
    stop_ = true;
    thread_.join();
  }

  const std::string& endpoint() const { return endpoint_; }

  std::vector<request> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

private:
  void serve() {
    const reply_fn reply = [this](const std::string& identity, const std::string& payload) {
      std::array<zmq::const_buffer, 3> frames{zmq::buffer(identity), zmq::const_buffer{},
                                              zmq::buffer(payload)};
      // An unroutable identity (closed controller socket) is dropped silently.
      (void)zmq::send_multipart(socket_, frames, zmq::send_flags::dontwait);
    };
    int index = 0;
    while (!stop_) {
      std::vector<zmq::pollitem_t> items{{socket_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 20ms);
      std::vector<zmq::message_t> frames;
      if ((items[0].revents & ZMQ_POLLIN) == 0 ||
          !zmq::recv_multipart(socket_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        continue;
      }
      ASSERT_EQ(frames.size(), 3u);
      ASSERT_EQ(frames[1].size(), 0u) << "the empty delimiter a REP worker needs";
      auto decoded = msg::decode_msgpack(frames[2].to_string_view());
      ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
      request r{++index, frames[0].to_string(), *decoded};
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(r);
      }
      handler_(r, reply);
    }
  }

  zmq::socket_t socket_;
  handler_fn handler_;
  std::string endpoint_;
  std::mutex mutex_;
  std::vector<request> requests_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// Collects callback results; tests wait on it with a deadline.
class results {
public:
  struct entry {
    std::string tag;
    msg::expected<Msg> reply;
    clock::time_point at;
  };

  control_reply_fn make(std::string tag) {
    return [this, tag = std::move(tag)](msg::expected<Msg> reply) {
      std::lock_guard lock(mutex_);
      entries_.push_back(entry{tag, std::move(reply), clock::now()});
      cv_.notify_all();
    };
  }

  /// Waits until `n` callbacks have run; false on timeout.
  bool wait_for(size_t n, std::chrono::milliseconds limit = wait_limit) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return entries_.size() >= n; });
  }

  std::vector<entry> entries() {
    std::lock_guard lock(mutex_);
    return entries_;
  }

  const entry& get(const std::vector<entry>& all, const std::string& tag) {
    for (const auto& e : all) {
      if (e.tag == tag) {
        return e;
      }
    }
    ADD_FAILURE() << "no result for " << tag;
    static const entry none{"", msg::codec_error{"missing"}, {}};
    return none;
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<entry> entries_;
};

int64_t num_tokens(const msg::expected<Msg>& r) {
  if (!r) {
    ADD_FAILURE() << "error: " << r.error().message;
    return -1;
  }
  const auto* ret = std::get_if<ClearWorkerRetMsg>(&*r);
  if (ret == nullptr) {
    ADD_FAILURE() << "got " << msg::type_tag_of(*r);
    return -1;
  }
  return ret->num_tokens.as_int64();
}

std::string error_of(const msg::expected<Msg>& r) {
  if (r) {
    ADD_FAILURE() << "expected an error, got " << msg::type_tag_of(*r);
    return {};
  }
  return r.error().message;
}

/// Polls `pred` until it holds or `limit` passes; for conditions no callback
/// signals (what a fake worker has seen).
template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit = wait_limit) {
  const auto until = clock::now() + limit;
  while (!pred()) {
    if (clock::now() > until) {
      return false;
    }
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

control_options fast_timeout() {
  control_options o;
  o.request_timeout = 200ms;
  return o;
}

class ControlChannel : public ::testing::Test {
protected:
  zmq::context_t ctx_;
  results results_;
};

TEST_F(ControlChannel, CommandGetsItsReply) {
  fake_rep_worker worker(ctx_, [](const Msg&) {
    return msg::encode_msgpack(Msg{HealthWorkerRetMsg{.error_code = 0}});
  });
  control_channel ch(ctx_, control_options{});
  ch.send(worker.endpoint(), Msg{HealthWorkerMsg{.worker_event_id = "HealthWorker0e1"}},
          results_.make("h"));
  ASSERT_TRUE(results_.wait_for(1));

  const auto all = results_.entries();
  ASSERT_TRUE(all[0].reply.has_value()) << all[0].reply.error().message;
  const auto* ret = std::get_if<HealthWorkerRetMsg>(&*all[0].reply);
  ASSERT_NE(ret, nullptr);
  EXPECT_EQ(ret->error_code.as_int64(), 0);
  const auto seen = worker.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (Msg{HealthWorkerMsg{.worker_event_id = "HealthWorker0e1"}}));
}

TEST_F(ControlChannel, ConcurrentCommandsToOneWorkerAreQueuedAndAnsweredInOrder) {
  std::atomic<int> served{0};
  fake_rep_worker worker(ctx_, [&](const Msg&) {
    std::this_thread::sleep_for(50ms); // keep the first in flight while the rest arrive
    return clear_reply(++served);
  });
  control_channel ch(ctx_, control_options{});
  for (const char* tag : {"c1", "c2", "c3"}) {
    ch.send(worker.endpoint(), clear_cmd(tag), results_.make(tag));
  }
  // And two more from other threads at once: still queued, never refused.
  std::thread t1([&] { ch.send(worker.endpoint(), clear_cmd("t1"), results_.make("t1")); });
  std::thread t2([&] { ch.send(worker.endpoint(), clear_cmd("t2"), results_.make("t2")); });
  t1.join();
  t2.join();
  ASSERT_TRUE(results_.wait_for(5));

  const auto all = results_.entries();
  ASSERT_EQ(all.size(), 5u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(num_tokens(all[i].reply), static_cast<int64_t>(i + 1)) << all[i].tag;
  }
  EXPECT_EQ(all[0].tag, "c1");
  EXPECT_EQ(all[1].tag, "c2");
  EXPECT_EQ(all[2].tag, "c3");
  // Each reply went to the command the worker saw in that position.
  const auto seen = worker.requests();
  ASSERT_EQ(seen.size(), 5u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(std::get<ClearWorkerMsg>(seen[i]).worker_event_id, all[i].tag);
  }
}

TEST_F(ControlChannel, SilentWorkerCostsOneTimeoutThenNextCommandSucceeds) {
  fake_router_worker worker(ctx_, [](const fake_router_worker::request& r, const auto& reply) {
    if (r.index > 1) { // the first request is swallowed
      reply(r.identity, clear_reply(7));
    }
  });
  control_channel ch(ctx_, fast_timeout());
  const auto sent = clock::now();
  ch.send(worker.endpoint(), clear_cmd("lost"), results_.make("lost"));
  ASSERT_TRUE(results_.wait_for(1));
  auto all = results_.entries();
  EXPECT_EQ(error_of(all[0].reply), "worker " + worker.endpoint() + " did not answer within 200ms");
  EXPECT_GE(all[0].at - sent, 200ms);

  ch.send(worker.endpoint(), clear_cmd("next"), results_.make("next"));
  ASSERT_TRUE(results_.wait_for(2));
  all = results_.entries();
  EXPECT_EQ(num_tokens(all[1].reply), 7);
}

TEST_F(ControlChannel, RestartedRepWorkerOnSamePortAnswersAfterTimeout) {
  auto hung = std::make_unique<fake_rep_worker>(
      ctx_, [](const Msg&) -> std::optional<std::string> { return std::nullopt; });
  const std::string endpoint = hung->endpoint();
  control_channel ch(ctx_, fast_timeout());
  ch.send(endpoint, clear_cmd("lost"), results_.make("lost"));
  ASSERT_TRUE(results_.wait_for(1));
  EXPECT_EQ(error_of(results_.entries()[0].reply),
            "worker " + endpoint + " did not answer within 200ms");

  // The worker process is replaced by a new one on the same port.
  hung->stop();
  hung.reset();
  fake_rep_worker fresh(
      ctx_, [](const Msg&) { return clear_reply(9); }, "tcp://" + endpoint);
  ch.send(endpoint, clear_cmd("next"), results_.make("next"));
  ASSERT_TRUE(results_.wait_for(2));
  EXPECT_EQ(num_tokens(results_.entries()[1].reply), 9);
}

TEST_F(ControlChannel, LateReplyIsNotTakenAsTheAnswerToTheNextCommand) {
  // The worker answers request 1 only once request 2 has arrived, and then
  // answers both in order. Had the channel reused its socket for command 2,
  // the first message on it would be the stale "1".
  std::optional<std::string> held;
  fake_router_worker worker(ctx_, [&](const fake_router_worker::request& r, const auto& reply) {
    if (r.index == 1) {
      held = r.identity;
      return;
    }
    if (held) {
      reply(*held, clear_reply(1));
      held.reset();
    }
    reply(r.identity, clear_reply(2));
  });
  control_channel ch(ctx_, fast_timeout());
  ch.send(worker.endpoint(), clear_cmd("one"), results_.make("one"));
  ch.send(worker.endpoint(), clear_cmd("two"), results_.make("two"));
  ASSERT_TRUE(results_.wait_for(2));

  const auto all = results_.entries();
  EXPECT_EQ(all[0].tag, "one");
  EXPECT_EQ(error_of(all[0].reply), "worker " + worker.endpoint() + " did not answer within 200ms");
  EXPECT_EQ(all[1].tag, "two");
  EXPECT_EQ(num_tokens(all[1].reply), 2);
  const auto seen = worker.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_NE(seen[0].identity, seen[1].identity) << "command 2 must use a fresh socket";
}

TEST_F(ControlChannel, CommandToAnUnreachableEndpointTimesOutAndIsNeverDeliveredLate) {
  std::string endpoint;
  {
    zmq::socket_t probe(ctx_, zmq::socket_type::rep);
    probe.set(zmq::sockopt::linger, 0);
    probe.bind("tcp://127.0.0.1:*");
    endpoint = endpoint_of(probe);
  } // nothing listens there now
  control_channel ch(ctx_, fast_timeout());
  ch.send(endpoint, clear_cmd("stale"), results_.make("stale"));
  ASSERT_TRUE(results_.wait_for(1));
  EXPECT_EQ(error_of(results_.entries()[0].reply),
            "worker " + endpoint + " did not answer within 200ms");

  fake_rep_worker worker(
      ctx_, [](const Msg&) { return clear_reply(3); }, "tcp://" + endpoint);
  ch.send(endpoint, clear_cmd("fresh"), results_.make("fresh"));
  ASSERT_TRUE(results_.wait_for(2));
  EXPECT_EQ(num_tokens(results_.entries()[1].reply), 3);
  const auto seen = worker.requests();
  ASSERT_EQ(seen.size(), 1u) << "the timed-out command must not reach the worker";
  EXPECT_EQ(std::get<ClearWorkerMsg>(seen[0]).worker_event_id, "fresh");
}

TEST_F(ControlChannel, SlowWorkerDoesNotDelayAnotherWorker) {
  fake_rep_worker slow(ctx_, [](const Msg&) {
    std::this_thread::sleep_for(500ms);
    return clear_reply(1);
  });
  fake_rep_worker fast(ctx_, [](const Msg&) { return clear_reply(2); });
  control_channel ch(ctx_, control_options{});
  ch.send(slow.endpoint(), clear_cmd("slow"), results_.make("slow"));
  // Only send to the fast worker once the slow one is busy with its command.
  ASSERT_TRUE(wait_until([&] { return !slow.requests().empty(); }));
  ch.send(fast.endpoint(), clear_cmd("fast"), results_.make("fast"));
  ASSERT_TRUE(results_.wait_for(2));

  const auto all = results_.entries();
  EXPECT_EQ(all[0].tag, "fast");
  EXPECT_EQ(num_tokens(all[0].reply), 2);
  EXPECT_EQ(all[1].tag, "slow");
  EXPECT_EQ(num_tokens(all[1].reply), 1);
}

TEST_F(ControlChannel, UndecodableReplyIsAnErrorAndTheSocketStaysUsable) {
  std::atomic<int> n{0};
  fake_rep_worker worker(ctx_, [&](const Msg&) {
    return ++n == 1 ? std::string("\xc1 not msgpack") : clear_reply(5);
  });
  control_channel ch(ctx_, control_options{});
  ch.send(worker.endpoint(), clear_cmd("bad"), results_.make("bad"));
  ch.send(worker.endpoint(), clear_cmd("good"), results_.make("good"));
  ASSERT_TRUE(results_.wait_for(2));

  const auto all = results_.entries();
  const std::string prefix = "undecodable reply from worker " + worker.endpoint() + ": ";
  const auto error = error_of(all[0].reply);
  EXPECT_EQ(error.substr(0, prefix.size()), prefix) << error;
  EXPECT_GT(error.size(), prefix.size()) << "the decoder's reason is included";
  EXPECT_EQ(num_tokens(all[1].reply), 5);
}

TEST_F(ControlChannel, MalformedReplyEnvelopeIsAnError) {
  // A ROUTER that forgets the empty delimiter: [identity, payload].
  zmq::socket_t router(ctx_, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  const auto endpoint = endpoint_of(router);
  control_channel ch(ctx_, control_options{});
  ch.send(endpoint, clear_cmd("x"), results_.make("x"));

  std::vector<zmq::message_t> frames;
  router.set(zmq::sockopt::rcvtimeo, 10'000);
  ASSERT_TRUE(zmq::recv_multipart(router, std::back_inserter(frames)));
  const std::string payload = clear_reply(1);
  std::array<zmq::const_buffer, 2> reply{zmq::buffer(frames[0].data(), frames[0].size()),
                                         zmq::buffer(payload)};
  ASSERT_TRUE(zmq::send_multipart(router, reply));
  ASSERT_TRUE(results_.wait_for(1));
  const auto error = error_of(results_.entries()[0].reply);
  EXPECT_NE(error.find("undecodable reply from worker " + endpoint +
                       ": expected 2 frames [\"\", payload], got 1 frame(s)"),
            std::string::npos)
      << error;
}

TEST_F(ControlChannel, QueueLimitRefusesExtraCommandsAtOnce) {
  fake_router_worker worker(ctx_, [](const auto&, const auto&) {}); // never answers
  control_options o;
  o.request_timeout = 30s;
  o.max_queued_per_worker = 1;
  auto ch = std::make_unique<control_channel>(ctx_, o);
  ch->send(worker.endpoint(), clear_cmd("a"), results_.make("a")); // in flight
  ch->send(worker.endpoint(), clear_cmd("b"), results_.make("b")); // queued
  ch->send(worker.endpoint(), clear_cmd("c"), results_.make("c")); // refused
  ASSERT_TRUE(results_.wait_for(1));
  auto all = results_.entries();
  EXPECT_EQ(all[0].tag, "c");
  EXPECT_EQ(error_of(all[0].reply), "too many queued commands for worker " + worker.endpoint());

  ch.reset();
  ASSERT_TRUE(results_.wait_for(3, 0ms));
  all = results_.entries();
  EXPECT_EQ(error_of(results_.get(all, "a").reply), "controller shutting down");
  EXPECT_EQ(error_of(results_.get(all, "b").reply), "controller shutting down");
}

TEST_F(ControlChannel, ForgetFailsQueuedAndInFlightCommands) {
  fake_router_worker worker(ctx_, [](const fake_router_worker::request& r, const auto& reply) {
    if (std::get<ClearWorkerMsg>(r.command).worker_event_id == "after") {
      reply(r.identity, clear_reply(4));
    }
  });
  control_channel ch(ctx_, control_options{});
  ch.send(worker.endpoint(), clear_cmd("a"), results_.make("a"));
  ch.send(worker.endpoint(), clear_cmd("b"), results_.make("b"));
  ASSERT_TRUE(wait_until([&] { return !worker.requests().empty(); }));
  ch.forget(worker.endpoint());
  ASSERT_TRUE(results_.wait_for(2));
  auto all = results_.entries();
  const std::string expected = "worker " + worker.endpoint() + " deregistered";
  EXPECT_EQ(all[0].tag, "a");
  EXPECT_EQ(error_of(all[0].reply), expected);
  EXPECT_EQ(all[1].tag, "b");
  EXPECT_EQ(error_of(all[1].reply), expected);

  // A worker that registers again at the same address gets a fresh socket.
  ch.send(worker.endpoint(), clear_cmd("after"), results_.make("after"));
  ASSERT_TRUE(results_.wait_for(3));
  EXPECT_EQ(num_tokens(results_.entries()[2].reply), 4);
}

TEST_F(ControlChannel, DestructorFailsPendingCommandsAndReturnsPromptly) {
  fake_router_worker worker(ctx_, [](const auto&, const auto&) {});     // never answers
  auto ch = std::make_unique<control_channel>(ctx_, control_options{}); // 30 s timeout
  ch->send(worker.endpoint(), clear_cmd("a"), results_.make("a"));
  ch->send(worker.endpoint(), clear_cmd("b"), results_.make("b"));
  ch->send("127.0.0.1:1", clear_cmd("c"), results_.make("c"));
  ASSERT_TRUE(wait_until([&] { return !worker.requests().empty(); }));

  const auto start = clock::now();
  ch.reset();
  EXPECT_LT(clock::now() - start, 1s);
  const auto all = results_.entries();
  ASSERT_EQ(all.size(), 3u) << "each callback exactly once, all before the destructor returns";
  for (const auto& e : all) {
    EXPECT_EQ(error_of(e.reply), "controller shutting down") << e.tag;
  }
}

TEST_F(ControlChannel, CallbackMaySendAgainAndMayThrow) {
  fake_rep_worker worker(ctx_, [](const Msg&) { return clear_reply(6); });
  control_channel ch(ctx_, control_options{});
  auto second = results_.make("second");
  ch.send(worker.endpoint(), clear_cmd("first"), [&](msg::expected<Msg> r) {
    EXPECT_EQ(num_tokens(r), 6);
    ch.send(worker.endpoint(), clear_cmd("second"), second);
    throw std::runtime_error("a careless callback");
  });
  ASSERT_TRUE(results_.wait_for(1));
  EXPECT_EQ(num_tokens(results_.entries()[0].reply), 6);
}
TEST_F(ControlChannel, MalformedEndpointFailsAtOnceAndDoesNotBlockOthers) {
  fake_rep_worker worker(ctx_, [](const Msg&) { return clear_reply(8); });
  control_channel ch(ctx_, control_options{});
  ch.send("no-port-here", clear_cmd("bad"), results_.make("bad"));
  ch.send("no-port-here", clear_cmd("bad2"), results_.make("bad2"));
  ch.send(worker.endpoint(), clear_cmd("good"), results_.make("good"));
  ASSERT_TRUE(results_.wait_for(3));
  const auto all = results_.entries();
  for (const char* tag : {"bad", "bad2"}) {
    const auto error = error_of(results_.get(all, tag).reply);
    EXPECT_EQ(error.rfind("cannot send to worker no-port-here: ", 0), 0u) << error;
  }
  EXPECT_EQ(num_tokens(results_.get(all, "good").reply), 8);
}

} // namespace
} // namespace lmcc::gateway
