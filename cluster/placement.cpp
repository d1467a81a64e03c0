// placement: see placement.hpp.
#include "cluster/placement.hpp"

#include "cluster/hash.hpp"

#include <algorithm>

namespace lmcc::cluster {

namespace {

/// Bumped whenever the ring or the placement rules change, so that nodes
/// running different rules never report the same fingerprint.
constexpr std::string_view algorithm_version = "lmcc-placement-1";

uint64_t fingerprint_of(const hash_ring& ring, const std::vector<uint8_t>& live) {
  const ring_options& o = ring.options();
  fnv1a_hasher h;
  h.add(algorithm_version).add_u64(o.slot_count).add_u64(o.virtual_nodes).add_u64(o.replicas);
  h.add_u64(ring.members().size());
  for (std::size_t n = 0; n < ring.members().size(); ++n) // ids are sorted
    h.add(ring.members().id(static_cast<node_index>(n))).add_byte(live[n] ? 1 : 0);
  return h.finish();
}

} // namespace

// -- construction ------------------------------------------------------------------------

expected<placement> placement::compute(std::shared_ptr<const hash_ring> ring,
                                       const std::vector<std::string>& live) {
  std::vector<uint8_t> flags(ring->members().size(), 0);
  for (const std::string& id : live) {
    const std::optional<node_index> n = ring->members().index_of(id);
    if (!n)
      return error{errc::unknown_node, "live node \"" + id + "\" is not a member"};
    flags[*n] = 1;
  }
  return placement{std::move(ring), std::move(flags)};
}

expected<placement> placement::compute(std::vector<std::string> members,
                                       const std::vector<std::string>& live,
                                       const ring_options& opts) {
  expected<member_set> m = member_set::make(std::move(members));
  if (!m)
    return m.error();
  expected<hash_ring> r = hash_ring::make(std::move(*m), opts);
  if (!r)
    return r.error();
  return compute(std::make_shared<const hash_ring>(std::move(*r)), live);
}

placement::placement(std::shared_ptr<const hash_ring> ring, std::vector<uint8_t> live)
  : ring_(std::move(ring)), live_(std::move(live)) {
  const auto live_count = static_cast<uint32_t>(std::count(live_.begin(), live_.end(), 1));
  per_slot_ = std::min(ring_->options().replicas, live_count);
  owners_.reserve(std::size_t{ring_->slot_count()} * per_slot_);
  for (uint32_t s = 0; s < ring_->slot_count(); ++s)
    ring_->first_live(s, live_, per_slot_, owners_);
  fingerprint_ = fingerprint_of(*ring_, live_);
}

// -- properties --------------------------------------------------------------------------

bool placement::is_live(std::string_view id) const noexcept {
  const std::optional<node_index> n = members().index_of(id);
  return n && live_[*n];
}

std::vector<std::string_view> placement::live_members() const {
  std::vector<std::string_view> out;
  for (std::size_t n = 0; n < live_.size(); ++n)
    if (live_[n])
      out.emplace_back(members().id(static_cast<node_index>(n)));
  return out;
}

// -- queries -----------------------------------------------------------------------------

std::vector<std::string_view> placement::owners(uint32_t slot) const {
  std::vector<std::string_view> out;
  out.reserve(per_slot_);
  for (node_index n : owner_indices(slot))
    out.emplace_back(members().id(n));
  return out;
}

std::optional<std::string_view> placement::primary(uint32_t slot) const {
  if (per_slot_ == 0)
    return std::nullopt;
  return members().id(owner_indices(slot)[0]);
}

slot_roles placement::slots_of(std::string_view id) const {
  slot_roles out;
  const std::optional<node_index> n = members().index_of(id);
  if (!n || !live_[*n])
    return out;
  for (uint32_t s = 0; s < slot_count(); ++s) {
    std::span<const node_index> o = owner_indices(s);
    if (auto it = std::find(o.begin(), o.end(), *n); it == o.begin())
      out.primary.push_back(s);
    else if (it != o.end())
      out.replica.push_back(s);
  }
  return out;
}

expected<std::vector<uint32_t>> changed_slots(const placement& before, const placement& after) {
  if (before.slot_count() != after.slot_count())
    return error{errc::slot_count_mismatch,
                 "slot counts differ: " + std::to_string(before.slot_count()) + " and " +
                     std::to_string(after.slot_count())};
  // Member indices are ranks in each side's own member set, so compare ids.
  const bool same_members = before.members() == after.members();
  std::vector<uint32_t> out;
  for (uint32_t s = 0; s < before.slot_count(); ++s) {
    std::span<const node_index> a = before.owner_indices(s);
    std::span<const node_index> b = after.owner_indices(s);
    bool same = a.size() == b.size();
    for (std::size_t i = 0; same && i < a.size(); ++i)
      same = same_members ? a[i] == b[i] : before.members().id(a[i]) == after.members().id(b[i]);
    if (!same)
      out.push_back(s);
  }
  return out;
}

} // namespace lmcc::cluster
