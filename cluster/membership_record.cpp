// membership_record: see membership_record.hpp.
#include "cluster/membership_record.hpp"

#include "cluster/hash.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace lmcc::cluster {

namespace {

error bad(std::string message) {
  return error{errc::bad_membership, std::move(message)};
}

void sort_members(std::vector<member_address>& members) {
  std::sort(members.begin(), members.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
}

} // namespace

membership_record membership_record::initial(const std::vector<member_address>& configured) {
  membership_record r;
  for (const auto& m : configured)
    if (!m.standby)
      r.members.push_back(member_address{m.id, m.host, m.port, false});
  sort_members(r.members);
  r.previous = r.member_ids();
  return r;
}

std::vector<std::string> membership_record::member_ids() const {
  std::vector<std::string> ids;
  for (const auto& m : members)
    ids.push_back(m.id);
  return ids;
}

bool membership_record::is_member(std::string_view id) const noexcept {
  return std::any_of(members.begin(), members.end(), [id](const auto& m) { return m.id == id; });
}

bool membership_record::was_member(std::string_view id) const noexcept {
  return std::find(previous.begin(), previous.end(), id) != previous.end();
}

uint64_t membership_record::identity() const noexcept {
  fnv1a_hasher h;
  h.add("lmcc-members-1").add_u64(epoch).add_u64(members.size());
  for (const auto& m : members)
    h.add(m.id);
  h.add_u64(previous.size());
  for (const auto& id : previous)
    h.add(id);
  return h.finish();
}

bool supersedes(const membership_record& a, const membership_record& b) noexcept {
  if (a.epoch != b.epoch)
    return a.epoch > b.epoch;
  const uint64_t ia = a.identity(), ib = b.identity();
  if (ia != ib)
    return ia > ib;
  return a.committed && !b.committed;
}

std::string to_json(const membership_record& r) {
  nlohmann::json members = nlohmann::json::array();
  for (const auto& m : r.members)
    members.push_back({{"id", m.id}, {"host", m.host}, {"port", m.port}});
  return nlohmann::json{{"epoch", r.epoch},
                        {"members", std::move(members)},
                        {"previous", r.previous},
                        {"committed", r.committed}}
      .dump();
}

expected<membership_record> record_from_json(std::string_view text) {
  if (text.size() > max_record_bytes)
    return bad("a membership record of " + std::to_string(text.size()) + " bytes is larger than " +
               std::to_string(max_record_bytes));
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return bad("a membership record is a JSON object");
  try {
    membership_record r;
    // get<T>() would convert any number (a float, a negative or larger one):
    // only an unsigned integer within the field's range is that field.
    const auto& epoch = j.at("epoch");
    if (!epoch.is_number_unsigned())
      return bad("a membership record's epoch is an integer >= 0");
    r.epoch = epoch.get<uint64_t>();
    for (const auto& m : j.at("members")) {
      const auto& port = m.at("port");
      if (!port.is_number_unsigned() || port.get<uint64_t>() > UINT16_MAX)
        return bad("a member's port is an integer in [1, 65535]");
      member_address a{m.at("id").get<std::string>(), m.at("host").get<std::string>(),
                       static_cast<uint16_t>(port.get<uint64_t>()), false};
      if (a.id.empty() || a.host.empty() || a.port == 0)
        return bad("a member needs an id, a host and a port");
      r.members.push_back(std::move(a));
    }
    r.previous = j.at("previous").get<std::vector<std::string>>();
    r.committed = j.at("committed").get<bool>();
    if (r.members.empty())
      return bad("a membership record names no member");
    sort_members(r.members);
    std::sort(r.previous.begin(), r.previous.end());
    for (size_t i = 1; i < r.members.size(); ++i)
      if (r.members[i].id == r.members[i - 1].id)
        return bad("member \"" + r.members[i].id + "\" is listed twice");
    return r;
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("membership record: ") + e.what());
  }
}

expected<std::optional<membership_record>> load_record(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT)
      return std::optional<membership_record>{};
    return bad("cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  auto r = record_from_json(text.str());
  if (!r)
    return bad(path + ": " + r.error().message);
  return std::optional<membership_record>{std::move(*r)};
}

expected<bool> store_record(const std::string& path, const membership_record& r) {
  const std::string tmp = path + ".tmp";
  const std::string text = to_json(r) + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return bad("cannot write " + tmp + ": " + std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!written)
    return bad("cannot write " + tmp + ": " + std::strerror(saved));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return bad("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  return true;
}

} // namespace lmcc::cluster
