// Aligned plain-text tables, as every text report prints them (vstack info, bench, space ...): a
// header row, a dashed rule, then the rows, each column as wide as its widest cell.
#ifndef VSTACK_LIB_TEXT_TABLE_H_
#define VSTACK_LIB_TEXT_TABLE_H_

#include <string>
#include <vector>

namespace vstack {

// A text table with a header row; columns are left-aligned unless marked numeric (right). Widths
// count UTF-8 code points, so "µs" and "–" take one column.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header, std::vector<bool> numeric = {});
  // A row of cells; a shorter row is padded with empty cells, a longer one cut to the header.
  void AddRow(std::vector<std::string> cells);
  void AddRule();  // a dashed separator row
  // Every line starts with `indent`; trailing spaces are dropped; each line ends with "\n".
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> numeric_;
  std::vector<std::vector<std::string>> rows_;  // empty row = rule
};

}  // namespace vstack

#endif  // VSTACK_LIB_TEXT_TABLE_H_
