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

bool owns(const placement& p, node_index n, uint32_t slot) noexcept {
  auto list = p.owner_indices(slot);
  return std::find(list.begin(), list.end(), n) != list.end();
}

bool gained(const placement& owners, const placement& previous, node_index n,
            uint32_t slot) noexcept {
  return owns(owners, n, slot) && !owns(previous, n, slot);
}

uint64_t write_mask(const placement& owners, const placement* previous, uint32_t slot) noexcept {
  return owner_mask(owners, slot) | (previous ? owner_mask(*previous, slot) : uint64_t{0});
}

std::vector<uint64_t> write_masks(const placement& owners, const placement* previous) {
  std::vector<uint64_t> masks(owners.slot_count());
  for (uint32_t s = 0; s < owners.slot_count(); ++s)
    masks[s] = write_mask(owners, previous, s);
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

namespace {

/// The placements of `r` over `ring`: its members', and its previous
/// members' (the ids the ring lacks left out: a node removed and no longer
/// configured owns nothing this node could reach).
expected<std::pair<placement, placement>> place_record(const std::shared_ptr<const hash_ring>& ring,
                                                       const membership_record& r) {
  auto owners = placement::compute(ring, r.member_ids());
  if (!owners)
    return error{errc::bad_membership,
                 "the member set names a node without a known address: " + owners.error().message};
  std::vector<std::string> before;
  for (const auto& id : r.previous)
    if (ring->members().index_of(id))
      before.push_back(id);
  if (before.empty())
    return std::pair{*owners, *owners};
  auto previous = placement::compute(ring, before);
  return std::pair{std::move(*owners), std::move(*previous)};
}

} // namespace

expected<membership> membership::make(const cluster_options& opts, std::string self_id,
                                      uint32_t slot_count,
                                      std::optional<membership_record> record) {
  membership_record rec = record ? std::move(*record) : membership_record::initial(opts.members);
  if (rec.members.empty())
    return error{errc::empty_member_set, "every configured node is a standby: no member owns data"};
  // The address book: the configured nodes, plus members only the record knows.
  std::vector<member_address> known = opts.members;
  for (const auto& m : rec.members)
    if (std::none_of(known.begin(), known.end(), [&](const auto& k) { return k.id == m.id; }))
      known.push_back(m);
  // Owner sets travel as 64-bit masks (one bit per node) to the worker
  // actors' split; the ring itself would take up to max_members.
  constexpr size_t max_cluster_members = 64;
  if (known.size() > max_cluster_members)
    return error{errc::too_many_members, std::to_string(known.size()) +
                                             " members; a cluster has at most " +
                                             std::to_string(max_cluster_members)};
  ring_options ro;
  ro.slot_count = slot_count;
  ro.virtual_nodes = opts.virtual_nodes;
  ro.replicas = opts.replicas;
  auto all_ids = ids_of(known);
  auto everyone = placement::compute(all_ids, all_ids, ro);
  if (!everyone)
    return everyone.error();
  const auto& ring = everyone->shared_ring();
  auto self = ring->members().index_of(self_id);
  if (!self)
    return error{errc::unknown_node, "this node \"" + self_id + "\" is not a member"};
  auto placed = place_record(ring, rec);
  if (!placed)
    return placed.error();
  auto live = placement::compute(ring, rec.is_member(self_id) ? std::vector<std::string>{self_id}
                                                              : std::vector<std::string>{});
  if (!live)
    return live.error();
  // Addresses in node_index order (ids sorted), whatever order the config used.
  std::vector<member_address> addresses(known.size());
  for (const auto& m : known)
    addresses[*ring->members().index_of(m.id)] = m;
  return membership{std::move(addresses),
                    *self,
                    std::move(rec),
                    std::move(placed->first),
                    std::move(placed->second),
                    std::move(*live),
                    opts.failure_timeout};
}

membership::membership(std::vector<member_address> addresses, node_index self,
                       membership_record record, placement owners, placement previous,
                       placement live_placement, std::chrono::milliseconds timeout)
  : addresses_(std::move(addresses)), self_(self), record_(std::move(record)),
    member_(addresses_.size(), 0), owners_(std::move(owners)), previous_(std::move(previous)),
    live_placement_(std::move(live_placement)), live_(addresses_.size(), 0),
    leaving_(addresses_.size(), 0), last_seen_(addresses_.size()), timeout_(timeout) {
  live_[self_] = 1;
  for (size_t i = 0; i < addresses_.size(); ++i)
    member_[i] = record_.is_member(addresses_[i].id) ? 1 : 0;
}

expected<bool> membership::adopt(const membership_record& r) {
  if (r.members.empty())
    return error{errc::empty_member_set, "a membership record names no member"};
  auto placed = place_record(owners_.shared_ring(), r);
  if (!placed)
    return placed.error();
  record_ = r;
  owners_ = std::move(placed->first);
  previous_ = std::move(placed->second);
  for (size_t i = 0; i < addresses_.size(); ++i)
    member_[i] = record_.is_member(addresses_[i].id) ? 1 : 0;
  recompute_live_placement();
  return true;
}

bool membership::gained(node_index n, uint32_t slot) const noexcept {
  return cluster::gained(owners_, previous_, n, slot);
}

uint64_t membership::write_mask(uint32_t slot) const noexcept {
  return cluster::write_mask(owners_, joint() ? &previous_ : nullptr, slot);
}

std::vector<uint64_t> membership::write_masks() const {
  return cluster::write_masks(owners_, joint() ? &previous_ : nullptr);
}

void membership::recompute_live_placement() {
  std::vector<std::string> live_ids;
  for (size_t i = 0; i < live_.size(); ++i)
    if (live_[i] && member_[i])
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
  if (last_tick_ && now - *last_tick_ > timeout_) {
    ++stalls_;
    last_stall_ = std::chrono::duration_cast<std::chrono::milliseconds>(now - *last_tick_);
    for (size_t i = 0; i < live_.size(); ++i)
      if (i != self_ && live_[i])
        last_seen_[i] = std::max(last_seen_[i], now);
  }
  last_tick_ = now;
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

std::optional<membership::time_point> membership::next_silence_deadline() const {
  std::optional<time_point> first;
  for (size_t i = 0; i < live_.size(); ++i)
    if (i != self_ && live_[i] && (!first || last_seen_[i] + timeout_ < *first))
      first = last_seen_[i] + timeout_;
  return first;
}

bool membership::all_live() const noexcept {
  for (size_t i = 0; i < live_.size(); ++i)
    if (member_[i] && !live_[i])
      return false;
  return true;
}

size_t membership::live_count() const noexcept {
  return static_cast<size_t>(std::count(live_.begin(), live_.end(), 1));
}

std::vector<membership::member_view> membership::view() const {
  std::vector<member_view> out;
  for (size_t i = 0; i < addresses_.size(); ++i) {
    const auto roles = owners_.slots_of(addresses_[i].id);
    out.push_back(member_view{addresses_[i], i == self_, live_[i] != 0, member_[i] != 0,
                              static_cast<uint32_t>(roles.primary.size()),
                              static_cast<uint32_t>(roles.replica.size())});
  }
  return out;
}

} // namespace lmcc::cluster
