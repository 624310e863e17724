#include "lib/suggest.h"

#include <algorithm>
#include <cstdint>

#include "lib/registry.h"

namespace vstack {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
// neighbours each cost 1.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string NearestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  std::vector<std::string> prefixed;
  for (const std::string& c : candidates) {
    if (c.size() > word.size() && c.compare(0, word.size(), word) == 0) prefixed.push_back(c);
    const size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  // A typo: at most one edit in four characters (and at least one allowed).
  const size_t allowed = std::max<size_t>(1, word.size() / 4);
  if (best_distance <= allowed) return best;
  if (prefixed.size() == 1 && word.size() >= 2) return prefixed[0];
  return "";
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string m = NearestMatch(word, candidates);
  return m.empty() ? "" : "; did you mean `" + m + "`?";
}

std::string DidYouMeanComponent(const std::string& name, ComponentKind kind) {
  std::vector<std::string> names;
  for (const ComponentInfo* c : Registry::Global().All()) {
    if (c->kind == kind) names.push_back(c->name);
  }
  return DidYouMean(name, names);
}

}  // namespace vstack
