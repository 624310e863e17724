#include "lib/compact.h"

#include "lib/format_table.h"

namespace vstack {

bool RegisterCompactor(const std::string& format, CompactFunction compact) {
  return FormatTable<CompactFunction>::Get().Set(format, std::move(compact));
}

const CompactFunction* FindCompactor(const std::string& format) {
  return FormatTable<CompactFunction>::Get().Find(format);
}

std::vector<std::string> CompactableFormats() {
  return FormatTable<CompactFunction>::Get().Formats();
}

}  // namespace vstack
