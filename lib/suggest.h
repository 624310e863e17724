// "Did you mean": the valid word a mistyped one most likely meant, for every error that names
// what would have been accepted: the registry's unknown layers, backends, options and image
// formats (lib/registry.cc), and the CLI's unknown commands, flags and choices (tools/usage.cc).
#ifndef VSTACK_LIB_SUGGEST_H_
#define VSTACK_LIB_SUGGEST_H_

#include <string>
#include <vector>

namespace vstack {

// The candidate a mistyped `word` most likely meant (a small edit distance, or a unique prefix),
// or "" if none is close.
std::string NearestMatch(const std::string& word, const std::vector<std::string>& candidates);

// "; did you mean `X`?" for the nearest match of `word`, or "".
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace vstack

#endif  // VSTACK_LIB_SUGGEST_H_
