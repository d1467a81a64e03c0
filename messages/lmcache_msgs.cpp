#include "messages/lmcache_msgs.hpp"

namespace lmcc::msg {

std::string_view type_tag_of(const Msg& m) noexcept {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::type_tag; }, m);
}

msg_family family_of(const Msg& m) noexcept {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::family; }, m);
}

} // namespace lmcc::msg
