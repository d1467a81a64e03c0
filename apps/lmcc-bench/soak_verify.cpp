#include "apps/lmcc-bench/soak_verify.hpp"

#include "apps/lmcc-bench/controller_http.hpp"
#include "apps/lmcc-bench/zmq_io.hpp"

#include <fmt/format.h>

#include <map>

namespace lmcc::bench {
namespace {

/// Keys per BatchedP2PLookupMsg: a few hundred requests per million keys,
/// each a frame of ~20 KB.
constexpr size_t scan_batch = 2000;

/// The asker of the presence scan: an instance no worker has, so that the
/// controller excludes nobody (spec 4.6).
constexpr const char* asker = "soak-verifier";

} // namespace

nlohmann::json soak_verdict::to_json() const {
  nlohmann::json j{{"exact", exact},
                   {"truth_keys", truth_keys},
                   {"copies", copies},
                   {"detail", detail},
                   {"nodes", nlohmann::json::array()}};
  if (index_total)
    j["index_keys_total"] = *index_total;
  for (const auto& n : nodes) {
    nlohmann::json row{{"node", n.node},
                       {"counts_ok", n.counts_ok},
                       {"counts_detail", n.counts_detail},
                       {"scanned", n.scanned},
                       {"keys_checked", n.keys_checked},
                       {"missing", n.missing},
                       {"missing_detail", n.missing_detail}};
    if (n.index_keys)
      row["index_keys"] = *n.index_keys;
    j["nodes"].push_back(std::move(row));
  }
  return j;
}

soak_verifier::soak_verifier(zmq::context_t& ctx, const bench_options& o, const cluster& workers,
                             uint32_t replicas)
  : ctx_(&ctx), opts_(&o), workers_(&workers), replicas_(replicas) {}

soak_verdict soak_verifier::check(bool count_all) {
  soak_verdict v;
  v.copies = replicas_;
  std::vector<std::vector<int64_t>> truth;
  for (size_t i = 0; i < workers_->size(); ++i) {
    truth.push_back((*workers_)[i].truth().snapshot());
    v.truth_keys += truth.back().size();
  }
  double index_total = 0;
  bool index_known = true;
  for (const auto& node : opts_->nodes) {
    v.nodes.push_back(check_node(node, count_all, truth));
    const auto& n = v.nodes.back();
    if (n.index_keys)
      index_total += *n.index_keys;
    else
      index_known = false;
    if (v.detail.empty() && !n.counts_ok)
      v.detail = fmt::format("{}: {}", n.node, n.counts_detail);
    if (v.detail.empty() && n.missing > 0)
      v.detail =
          fmt::format("{}: {} key(s) not credited, first {}", n.node, n.missing, n.missing_detail);
  }
  if (index_known)
    v.index_total = index_total;
  const double want = static_cast<double>(replicas_) * static_cast<double>(v.truth_keys);
  if (v.detail.empty() && !index_known)
    v.detail = "lmcc_index_keys not read from every node";
  if (v.detail.empty() && index_total != want)
    v.detail = fmt::format("the nodes' indexes hold {:.0f} keys in all, {} x {} = {:.0f} expected",
                           index_total, replicas_, v.truth_keys, want);
  v.exact = v.detail.empty();
  return v;
}

node_verdict soak_verifier::check_node(const node_endpoints& node, bool count_all,
                                       const std::vector<std::vector<int64_t>>& truth) {
  const auto& o = *opts_;
  node_verdict n;
  n.node = node.http.str();
  controller_http api{node.http, "key-stats", o.instance_prefix, o.request_timeout_ms};
  n.index_keys = api.metric("lmcc_index_keys");
  std::map<std::string, uint64_t> want;
  for (size_t i = 0; i < workers_->size(); ++i)
    want[(*workers_)[i].identity().instance_id] += truth[i].size();
  if (const auto got = api.get("/controller/key-stats"); !got || got->status != 200) {
    n.counts_detail =
        got ? fmt::format("key-stats answered HTTP {}", got->status) : "key-stats not answered";
  } else {
    std::map<std::string, uint64_t> have;
    try {
      const auto body = nlohmann::json::parse(got->body);
      for (const auto& inst : body.at("instances"))
        have[inst.at("instance_id").get<std::string>()] = inst.at("key_count").get<uint64_t>();
      n.counts_ok = true;
      for (const auto& [instance, keys] : want)
        if (have[instance] != keys) {
          n.counts_ok = false;
          n.counts_detail =
              fmt::format("instance {} counted {} keys, truth {}", instance, have[instance], keys);
          break;
        }
    } catch (const nlohmann::json::exception& e) {
      n.counts_detail = std::string{"key-stats unreadable: "} + e.what();
    }
  }
  if (!n.counts_ok && !count_all)
    return n;

  dealer_channel channel{*ctx_, node.reply.tcp(), o.request_timeout_ms};
  msg::BatchedP2PLookupMsg request{.hashes = {}, .instance_id = asker, .worker_id = 0};
  for (size_t w = 0; w < workers_->size(); ++w) {
    const auto& id = (*workers_)[w].identity();
    const auto& keys = truth[w];
    size_t at = 0;
    while (at < keys.size()) {
      const size_t end = std::min(keys.size(), at + scan_batch);
      request.hashes.assign(keys.begin() + static_cast<ptrdiff_t>(at),
                            keys.begin() + static_cast<ptrdiff_t>(end));
      auto r = channel.request(request);
      const auto* ret = r.reply ? std::get_if<msg::BatchedP2PLookupRetMsg>(&*r.reply) : nullptr;
      if (ret == nullptr || ret->layout_info.size() != 1) {
        n.missing_detail =
            fmt::format("{} rank {}: a P2P lookup was not answered", id.instance_id, id.worker_id);
        return n; // not scanned to the end
      }
      const auto& [instance, location, hits, url] = ret->layout_info[0];
      size_t held = 0;
      if (instance == id.instance_id && location == o.location)
        held = static_cast<size_t>(std::max<int64_t>(0, hits.to_int64().value_or(0)));
      held = std::min(held, end - at);
      n.keys_checked += held;
      if (at + held == end) {
        at = end;
        continue;
      }
      // keys[at + held] is not credited to this worker.
      ++n.missing;
      ++n.keys_checked;
      if (n.missing_detail.empty())
        n.missing_detail = fmt::format("{} rank {} key #{} ({}) of {}", id.instance_id,
                                       id.worker_id, at + held, keys[at + held], keys.size());
      if (!count_all)
        break;
      at += held + 1;
    }
  }
  n.scanned = true;
  return n;
}

} // namespace lmcc::bench
