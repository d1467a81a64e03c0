#include "cluster/membership.hpp"

#include "cluster/hash.hpp"

#include <algorithm>

namespace lmcc::cluster {

uint64_t owner_mask(const placement& owners, uint32_t slot) noexcept {
  uint64_t mask = 0;
  for (node_index n : owners.owner_indices(slot))
    mask |= uint64_t{1} << n;
  return mask;
}

std::vector<uint64_t> owner_masks(const placement& owners) {
  std::vector<uint64_t> masks(owners.slot_count());
  for (uint32_t s = 0; s < owners.slot_count(); ++s)
    masks[s] = owner_mask(owners, s);
  return masks;
}

node_index home_of(const placement& owners, uint64_t worker_uid) noexcept {
  const uint32_t slot = slot_of(worker_uid, owners.slot_count());
  const auto list = owners.owner_indices(slot);
  // No member live (the last one is leaving): the slot's first choice.
  return list.empty() ? owners.ring().preference(slot).front() : list.front();
}

namespace {

std::vector<std::string> ids_of(const std::vector<member_address>& members) {
  std::vector<std::string> ids;
  for (const auto& m : members)
    ids.push_back(m.id);
  return ids;
}

} // namespace

expected<membership> membership::make(const cluster_options& opts, std::string self_id,
                                      uint32_t slot_count) {
  // Owner sets travel as 64-bit masks (one bit per member) to the worker
  // actors' split; the ring itself would take up to max_members.
  constexpr size_t max_cluster_members = 64;
  if (opts.members.size() > max_cluster_members)
    return error{errc::too_many_members, std::to_string(opts.members.size()) +
                                             " members; a cluster has at most " +
                                             std::to_string(max_cluster_members)};
  ring_options ro;
  ro.slot_count = slot_count;
  ro.virtual_nodes = opts.virtual_nodes;
  ro.replicas = opts.replicas;
  auto all_ids = ids_of(opts.members);
  auto owners = placement::compute(all_ids, all_ids, ro);
  if (!owners)
    return owners.error();
  auto self = owners->members().index_of(self_id);
  if (!self)
    return error{errc::unknown_node, "this node \"" + self_id + "\" is not a member"};
  auto live = placement::compute(owners->shared_ring(), {self_id});
  if (!live)
    return live.error();
  // Addresses in node_index order (ids sorted), whatever order the config used.
  std::vector<member_address> addresses(opts.members.size());
  for (const auto& m : opts.members)
    addresses[*owners->members().index_of(m.id)] = m;
  return membership{std::move(addresses), *self, std::move(*owners), std::move(*live),
                    opts.failure_timeout};
}

membership::membership(std::vector<member_address> addresses, node_index self, placement owners,
                       placement live_placement, std::chrono::milliseconds timeout)
  : addresses_(std::move(addresses)), self_(self), owners_(std::move(owners)),
    live_placement_(std::move(live_placement)), live_(addresses_.size(), 0),
    leaving_(addresses_.size(), 0), last_seen_(addresses_.size()), timeout_(timeout) {
  live_[self_] = 1;
}

void membership::recompute_live_placement() {
  std::vector<std::string> live_ids;
  for (size_t i = 0; i < live_.size(); ++i)
    if (live_[i])
      live_ids.push_back(addresses_[i].id);
  // Cannot fail: the ids are members of the ring.
  live_placement_ = std::move(*placement::compute(owners_.shared_ring(), live_ids));
}

void membership::presume_live(time_point now) {
  std::fill(live_.begin(), live_.end(), uint8_t{1});
  std::fill(leaving_.begin(), leaving_.end(), uint8_t{0});
  std::fill(last_seen_.begin(), last_seen_.end(), now);
  recompute_live_placement();
}

bool membership::on_greeting(std::string_view id, time_point now, bool leaving) {
  auto i = index_of(id);
  if (!i || *i == self_)
    return false;
  last_seen_[*i] = now;
  const uint8_t live = leaving ? 0 : 1;
  if (live_[*i] == live && leaving_[*i] == (leaving ? 1 : 0))
    return false;
  live_[*i] = live;
  leaving_[*i] = leaving ? 1 : 0;
  recompute_live_placement();
  return true;
}

void membership::leave() {
  live_[self_] = 0;
  leaving_[self_] = 1;
  recompute_live_placement();
}

bool membership::on_lost(std::string_view id) {
  auto i = index_of(id);
  if (!i || *i == self_)
    return false;
  leaving_[*i] = 0;
  if (!live_[*i])
    return false;
  live_[*i] = 0;
  recompute_live_placement();
  return true;
}

bool membership::tick(time_point now) {
  bool changed = false;
  for (size_t i = 0; i < live_.size(); ++i)
    if (i != self_ && live_[i] && now - last_seen_[i] > timeout_) {
      live_[i] = 0;
      changed = true;
    }
  if (changed)
    recompute_live_placement();
  return changed;
}

bool membership::all_live() const noexcept {
  return std::all_of(live_.begin(), live_.end(), [](uint8_t l) { return l != 0; });
}

size_t membership::live_count() const noexcept {
  return static_cast<size_t>(std::count(live_.begin(), live_.end(), 1));
}

std::vector<membership::member_view> membership::view() const {
  std::vector<member_view> out;
  for (size_t i = 0; i < addresses_.size(); ++i) {
    const auto roles = owners_.slots_of(addresses_[i].id);
    out.push_back(member_view{addresses_[i], i == self_, live_[i] != 0,
                              static_cast<uint32_t>(roles.primary.size()),
                              static_cast<uint32_t>(roles.replica.size())});
  }
  return out;
}

} // namespace lmcc::cluster
