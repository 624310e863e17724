#include "lib/compact.h"

#include <map>

namespace vstack {
namespace {

// Filled by static initialisers, so made on first use (no initialisation-order dependence).
std::map<std::string, CompactFunction>& Compactors() {
  static std::map<std::string, CompactFunction> compactors;
  return compactors;
}

}  // namespace

bool RegisterCompactor(const std::string& format, CompactFunction compact) {
  Compactors()[format] = std::move(compact);
  return true;
}

const CompactFunction* FindCompactor(const std::string& format) {
  auto it = Compactors().find(format);
  return it == Compactors().end() ? nullptr : &it->second;
}

std::vector<std::string> CompactableFormats() {
  std::vector<std::string> names;
  for (const auto& [name, compact] : Compactors()) names.push_back(name);
  return names;
}

}  // namespace vstack
