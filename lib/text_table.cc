#include "lib/text_table.h"

#include <algorithm>

namespace vstack {
namespace {

// The columns a UTF-8 string takes: its code points (bytes that do not continue one).
size_t Columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> numeric)
    : header_(std::move(header)), numeric_(std::move(numeric)) {
  numeric_.resize(header_.size(), false);
}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

void TextTable::AddRule() { rows_.emplace_back(); }

std::string TextTable::Render(const std::string& indent) const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) width[c] = Columns(header_[c]);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], Columns(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) out += "  ";
      const std::string& s = cells[c];
      const std::string pad(width[c] - Columns(s), ' ');
      out += numeric_[c] ? pad + s : (c + 1 == cells.size() ? s : s + pad);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_);
  size_t total = 0;
  for (size_t w : width) total += w;
  const std::string rule = indent + std::string(total + 2 * (width.size() - 1), '-') + "\n";
  out += rule;
  for (const auto& row : rows_) out += row.empty() ? rule : line(row);
  return out;
}

}  // namespace vstack
