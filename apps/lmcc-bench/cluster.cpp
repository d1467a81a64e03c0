#include "apps/lmcc-bench/cluster.hpp"

#include <spdlog/spdlog.h>

#include <numeric>
#include <stdexcept>

namespace lmcc::bench {
namespace {

worker_config make_worker_config(const bench_options& o) {
  worker_config c;
  c.location = o.location;
  c.batch_ops = o.batch_ops;
  c.msgs_per_multipart = o.msgs_per_multipart;
  c.evict_ratio = o.evict_ratio;
  c.heartbeat_interval_s = o.heartbeat_interval_s;
  c.full_sync_on_request = o.full_sync_on_request;
  c.timeout_ms = o.request_timeout_ms;
  c.register_timeout_s = o.register_timeout_s;
  c.full_sync_batch_keys = o.full_sync_batch_keys;
  c.full_sync_poll_ms = o.full_sync_poll_ms;
  c.full_sync_timeout_s =
      o.full_sync_timeout_s > 0 ? o.full_sync_timeout_s : o.settle_timeout_s + o.duration_s;
  c.seed = o.seed;
  return c;
}

void rethrow_first(const std::vector<std::exception_ptr>& errors) {
  for (const auto& e : errors)
    if (e)
      std::rethrow_exception(e);
}

} // namespace

cluster::cluster(zmq::context_t& ctx, const bench_options& opts, const std::string& sink_url)
  : opts_(&opts) {
  const auto common = make_worker_config(opts);
  for (uint32_t k = 0; k < opts.workers; ++k)
    for (uint32_t rank = 0; rank < opts.tp; ++rank) {
      worker_config config = common;
      const size_t index = workers_.size();
      if (sink_url.empty()) {
        config.push_url = pick_node(opts, node_role::push, index).pull.tcp();
        config.reply_url = pick_node(opts, node_role::reply, index).reply.tcp();
      } else {
        config.push_url = sink_url;
      }
      workers_.push_back(std::make_unique<simulated_worker>(
          ctx,
          worker_identity{opts.instance_prefix + "-" + std::to_string(k),
                          static_cast<int64_t>(rank), k},
          std::move(config)));
    }
}

cluster::~cluster() {
  if (!opts_->keep_registered)
    deregister_all();
}

void cluster::register_all() {
  for (auto& w : workers_) {
    w->register_with_controller();
    ++registered_;
    w->start_service();
  }
}

size_t cluster::index_of(const simulated_worker& w) const {
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].get() == &w)
      return i;
  throw std::logic_error("worker not in this cluster");
}

uint64_t cluster::truth_total() const {
  return std::accumulate(workers_.begin(), workers_.end(), uint64_t{0},
                         [](uint64_t s, const auto& w) { return s + w->truth_size(); });
}

uint64_t cluster::sum(const std::atomic<uint64_t> worker_counters::*counter) const {
  uint64_t total = 0;
  for (const auto& w : workers_)
    total += (w->counters().*counter).load(std::memory_order_relaxed);
  return total;
}

void cluster::run_all(const worker_fn& fn) {
  auto handle = start_all(fn);
  for (auto& t : handle.threads_)
    t.join();
  rethrow_first(*handle.errors_);
}

cluster::running cluster::start_all(const worker_fn& fn) {
  running handle;
  handle.errors_ = std::make_shared<std::vector<std::exception_ptr>>(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    handle.threads_.emplace_back(
        [fn, errors = handle.errors_, i, w = workers_[i].get()](std::stop_token stop) {
          try {
            fn(*w, std::move(stop));
          } catch (...) {
            (*errors)[i] = std::current_exception();
          }
        });
  }
  return handle;
}

cluster::running::~running() {
  try {
    stop();
  } catch (const std::exception& e) {
    // A destructor must not throw; the scenario already failed or finished.
    spdlog::error("worker thread failed: {}", e.what());
  }
}

void cluster::running::stop() {
  for (auto& t : threads_)
    t.request_stop();
  for (auto& t : threads_)
    if (t.joinable())
      t.join();
  threads_.clear();
  if (errors_)
    rethrow_first(std::exchange(*errors_, {}));
}

void cluster::admit_prompts(const prompt_corpus& corpus, steady::time_point deadline) {
  for (auto& w : workers_) {
    std::vector<int64_t> keys;
    for (const auto& p : corpus.of_instance(w->identity().instance_index))
      keys.insert(keys.end(), p.keys.begin(), p.keys.end());
    if (!w->admit_pinned(keys, deadline))
      throw std::runtime_error("the controller's PULL socket took no KV events for " +
                               w->identity().instance_id);
  }
}

uint64_t cluster::sync_epoch(size_t instance) const {
  uint64_t sum = 0;
  for (uint32_t rank = 0; rank < opts_->tp; ++rank)
    sum += workers_[instance * opts_->tp + rank]->sync_epoch();
  return sum;
}

bool cluster::syncing(size_t instance) const {
  for (uint32_t rank = 0; rank < opts_->tp; ++rank)
    if (workers_[instance * opts_->tp + rank]->sync_epoch() % 2 == 1)
      return true;
  return false;
}

std::vector<instance_info> cluster::instance_infos() const {
  std::vector<instance_info> infos(opts_->workers);
  for (const auto& w : workers_) {
    auto& info = infos[w->identity().instance_index];
    info.instance_id = w->identity().instance_id;
    info.peer_urls.push_back(w->peer_init_url());
  }
  return infos;
}

void cluster::deregister_all() {
  // Every heartbeat stops (and its last reply is in) before any DeRegisterMsg:
  // a later beat would register the worker again.
  for (auto& w : workers_)
    w->request_service_stop();
  for (auto& w : workers_)
    w->stop_service();
  for (size_t i = 0; i < registered_; ++i)
    workers_[i]->deregister();
  registered_ = 0;
}

} // namespace lmcc::bench
