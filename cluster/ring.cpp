// ring: see ring.hpp.
#include "cluster/ring.hpp"

#include "cluster/hash.hpp"

#include <algorithm>
#include <bit>
#include <numeric>

namespace lmcc::cluster {

// -- options -----------------------------------------------------------------------------

expected<void> check(const ring_options& opts) {
  if (opts.slot_count == 0 || !std::has_single_bit(opts.slot_count) ||
      opts.slot_count > max_slot_count)
    return error{errc::bad_slot_count, "slot count " + std::to_string(opts.slot_count) +
                                           " is not a power of two between 1 and " +
                                           std::to_string(max_slot_count)};
  if (opts.virtual_nodes == 0 || opts.virtual_nodes > max_virtual_nodes)
    return error{errc::bad_virtual_nodes, "virtual nodes " + std::to_string(opts.virtual_nodes) +
                                              " is not between 1 and " +
                                              std::to_string(max_virtual_nodes)};
  if (opts.replicas == 0)
    return error{errc::zero_replicas, "replicas must be at least 1"};
  return {};
}

// -- member set --------------------------------------------------------------------------

expected<member_set> member_set::make(std::vector<std::string> ids) {
  if (ids.empty())
    return error{errc::empty_member_set, "the member set is empty"};
  if (ids.size() > max_members)
    return error{errc::too_many_members,
                 std::to_string(ids.size()) + " members, at most " + std::to_string(max_members)};
  std::sort(ids.begin(), ids.end());
  if (ids.front().empty())
    return error{errc::empty_node_id, "a node id is empty"};
  if (auto dup = std::adjacent_find(ids.begin(), ids.end()); dup != ids.end())
    return error{errc::duplicate_node_id, "node id \"" + *dup + "\" is listed twice"};
  return member_set{std::move(ids)};
}

std::optional<node_index> member_set::index_of(std::string_view id) const noexcept {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  if (it == ids_.end() || *it != id)
    return std::nullopt;
  return static_cast<node_index>(it - ids_.begin());
}

// -- ring --------------------------------------------------------------------------------

expected<hash_ring> hash_ring::make(member_set members, const ring_options& opts) {
  if (auto ok = check(opts); !ok)
    return ok.error();
  return hash_ring{std::move(members), opts};
}

uint64_t hash_ring::vnode_point(std::string_view id, uint32_t i) noexcept {
  return fnv1a_hasher{}.add(id).add_u64(i).finish();
}

hash_ring::hash_ring(member_set members, const ring_options& opts)
  : members_(std::move(members)), opts_(opts) {
  struct point {
    uint64_t at;
    node_index node;
  };
  std::vector<point> all;
  all.reserve(members_.size() * opts_.virtual_nodes);
  for (std::size_t n = 0; n < members_.size(); ++n)
    for (uint32_t i = 0; i < opts_.virtual_nodes; ++i)
      all.push_back(
          {vnode_point(members_.id(static_cast<node_index>(n)), i), static_cast<node_index>(n)});
  // Equal points (a 64-bit collision) are ordered by node index, i.e. by id, so
  // the order does not depend on how the ids were listed.
  std::sort(all.begin(), all.end(), [](const point& a, const point& b) {
    return a.at != b.at ? a.at < b.at : a.node < b.node;
  });
  points_.reserve(all.size());
  owner_.reserve(all.size());
  for (const point& p : all) {
    points_.push_back(p.at);
    owner_.push_back(p.node);
  }
}

std::size_t hash_ring::start_of(uint32_t slot) const noexcept {
  const uint64_t at = slot_point(slot, opts_.slot_count);
  auto it = std::lower_bound(points_.begin(), points_.end(), at);
  return it == points_.end() ? 0 : static_cast<std::size_t>(it - points_.begin());
}

void hash_ring::first_live(uint32_t slot, std::span<const uint8_t> live, std::size_t limit,
                           std::vector<node_index>& out) const {
  const std::size_t begin = out.size();
  const std::size_t start = start_of(slot);
  // At most once around the ring: every member has a point on it, so `limit`
  // live members are found within one turn.
  for (std::size_t step = 0; step < points_.size() && out.size() - begin < limit; ++step) {
    const node_index n = owner_[(start + step) % points_.size()];
    if (live[n] && std::find(out.begin() + begin, out.end(), n) == out.end())
      out.push_back(n);
  }
}

std::vector<node_index> hash_ring::preference(uint32_t slot) const {
  const std::vector<uint8_t> all_live(members_.size(), 1);
  std::vector<node_index> out;
  out.reserve(members_.size());
  first_live(slot, all_live, members_.size(), out);
  return out;
}

} // namespace lmcc::cluster
