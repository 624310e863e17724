// The text helpers every report shares: the aligned table (lib/text_table.h) and the XML escaper
// (lib/xml_escape.h).
#include <gtest/gtest.h>

#include "lib/text_table.h"
#include "lib/xml_escape.h"

namespace vstack {
namespace {

TEST(TextTable, AlignsColumnsByTheirWidestCellAndRightAlignsNumbers) {
  TextTable t({"stack", "IOPS", "note"}, {false, true, false});
  t.AddRow({"raw", "12,345", "the baseline"});
  t.AddRule();
  t.AddRow({"vhd-dynamic", "7", ""});
  // Widths 11, 6 and 12, two spaces apart: a rule of 33 dashes.
  EXPECT_EQ(t.Render("  "),
            "  stack          IOPS  note\n"
            "  ---------------------------------\n"
            "  raw          12,345  the baseline\n"
            "  ---------------------------------\n"
            "  vhd-dynamic       7\n");
}

TEST(TextTable, CountsCodePointsNotBytesAndPadsShortRows) {
  TextTable t({"µs", "range"});
  t.AddRow({"1", "1 – 2"});  // an en dash: three bytes, one column
  t.AddRow({"22"});
  EXPECT_EQ(t.Render(),
            "µs  range\n"
            "---------\n"
            "1   1 – 2\n"
            "22\n");
}

TEST(XmlEscape, EscapesWhatWouldEndTextOrAnAttribute) {
  EXPECT_EQ(XmlEscape("a<b&\"c\">"), "a&lt;b&amp;&quot;c&quot;&gt;");
  EXPECT_EQ(XmlEscape("plain 1.82x – 4 KiB's"), "plain 1.82x – 4 KiB's");
  EXPECT_EQ(XmlEscape(""), "");
}

}  // namespace
}  // namespace vstack
