// table: aligned text tables for the operator's client (`lmcc status`,
// `lmcc workers`), as `etcdctl -w table` or `consul members` print them: a
// header row in capitals, one row per item, columns two spaces apart, each
// column as wide as its widest cell, numbers right-aligned.
//
//   text_table t{{"NODE"}, {"KEYS", align::right}};
//   t.add_row({"n1", "1200"});
//   t.render(std::cout);
//   -> NODE  KEYS
//      n1    1200
//
// Context: a value type; pure (no I/O beyond the stream it is given).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace lmcc::apps::client {

enum class align { left, right };

struct column {
  std::string header;
  align alignment = align::left;
};

class text_table {
public:
  explicit text_table(std::vector<column> columns) : columns_(std::move(columns)) {}

  /// Appends a row; missing cells are blank, extra cells are dropped.
  void add_row(std::vector<std::string> cells);

  size_t rows() const noexcept { return rows_.size(); }

  /// The header and every row, each line ending in '\n', with no trailing
  /// spaces. Widths count UTF-8 code points, not bytes.
  void render(std::ostream& out) const;
  std::string str() const;

private:
  std::vector<column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

/// The width of `text` on a terminal: its UTF-8 code points.
size_t display_width(const std::string& text);

/// A duration as people read it, two units at most: 90061000 ms -> "1d01h",
/// 3725000 -> "1h02m", 125000 -> "2m05s", 9000 -> "9s" (negative: "0s").
std::string format_duration(int64_t ms);

} // namespace lmcc::apps::client
