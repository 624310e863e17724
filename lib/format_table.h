// What image formats register beside their ComponentInfo, one entry per format name: the probe
// details OpenImage uses (probe_guard.h), the compactions CompactImage finds (compact.h). Filled
// by static initialisers, so each table is made on first use (no initialisation-order
// dependence); not locked: registration happens before main().
#ifndef VSTACK_LIB_FORMAT_TABLE_H_
#define VSTACK_LIB_FORMAT_TABLE_H_

#include <map>
#include <string>
#include <vector>

namespace vstack {

template <typename T>
class FormatTable {
 public:
  // The one table of entries of type T.
  static FormatTable& Get() {
    static FormatTable table;
    return table;
  }

  // Sets `format`'s entry, replacing an earlier one. Returns true, to initialise a static.
  bool Set(const std::string& format, T entry) {
    entries_[format] = std::move(entry);
    return true;
  }
  // `format`'s entry, or nullptr.
  const T* Find(const std::string& format) const {
    auto it = entries_.find(format);
    return it == entries_.end() ? nullptr : &it->second;
  }
  // The formats with an entry, sorted.
  std::vector<std::string> Formats() const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
  }

 private:
  std::map<std::string, T> entries_;
};

}  // namespace vstack

#endif  // VSTACK_LIB_FORMAT_TABLE_H_
