#include "cluster/membership_change.hpp"

#include <algorithm>

namespace lmcc::cluster {
namespace {

error refused(std::string why) {
  return error{errc::member_change_refused, std::move(why)};
}

} // namespace

expected<membership_record> propose_members(const membership& members,
                                            std::span<const std::string> ids, uint32_t replicas) {
  const auto& now = members.record();
  if (!now.committed)
    return refused("a membership change (epoch " + std::to_string(now.epoch) +
                   ") is still moving slots; wait until it commits");
  membership_record next;
  next.epoch = now.epoch + 1;
  next.previous = now.member_ids();
  next.committed = false;
  for (const auto& id : ids) {
    auto n = members.index_of(id);
    if (!n)
      return refused("\"" + id +
                     "\" is not in this node's lmcc_cluster_members: add its address "
                     "(standby: true) to every node's config first");
    if (next.is_member(id))
      return refused("\"" + id + "\" is listed twice");
    auto address = members.address(*n);
    address.standby = false;
    next.members.push_back(std::move(address));
  }
  if (next.members.empty())
    return refused("the new member set is empty");
  if (next.members.size() < replicas)
    return refused("lmcc_replicas is " + std::to_string(replicas) +
                   ": a member set needs at least that many nodes");
  std::sort(next.members.begin(), next.members.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  if (next.member_ids() == now.member_ids())
    return refused("that is the current member set");
  for (const auto& m : next.members)
    if (auto n = members.index_of(m.id);
        !now.is_member(m.id) && *n != members.self() && !members.live(*n))
      return refused("\"" + m.id + "\" is not live: start it before adding it");
  return next;
}

} // namespace lmcc::cluster
