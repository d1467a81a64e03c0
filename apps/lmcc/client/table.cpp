#include "apps/lmcc/client/table.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>

namespace lmcc::apps::client {

size_t display_width(const std::string& text) {
  // Continuation bytes (10xxxxxx) do not start a code point.
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

void text_table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void text_table::render(std::ostream& out) const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = display_width(columns_[c].header);
    for (const auto& row : rows_)
      widths[c] = std::max(widths[c], display_width(row[c]));
  }
  auto line = [&](auto cell_of) {
    std::string text;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cell_of(c);
      const std::string pad(widths[c] - display_width(cell), ' ');
      if (c > 0)
        text += "  ";
      text += columns_[c].alignment == align::right ? pad + cell : cell + pad;
    }
    while (!text.empty() && text.back() == ' ')
      text.pop_back();
    out << text << '\n';
  };
  line([&](size_t c) -> const std::string& { return columns_[c].header; });
  for (const auto& row : rows_)
    line([&](size_t c) -> const std::string& { return row[c]; });
}

std::string format_duration(int64_t ms) {
  const long long s = std::max<int64_t>(ms, 0) / 1000;
  char text[32];
  if (s >= 86400)
    std::snprintf(text, sizeof text, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
  else if (s >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  else if (s >= 60)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%llds", s);
  return text;
}

std::string text_table::str() const {
  std::ostringstream out;
  render(out);
  return out.str();
}

} // namespace lmcc::apps::client
