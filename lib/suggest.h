// "Did you mean": the valid word a mistyped one most likely meant, for every message that
// names a bad word (a command, an option, a choice, a layer or a spec option), in the library
// and in the CLI alike.
#ifndef VSTACK_LIB_SUGGEST_H_
#define VSTACK_LIB_SUGGEST_H_

#include <string>
#include <vector>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// The candidate a mistyped `word` most likely meant (at most one edit, a swap of neighbours
// included, per four characters; or the only candidate `word` is a prefix of), or "" if none
// is close.
std::string NearestMatch(const std::string& word, const std::vector<std::string>& candidates);

// "; did you mean `X`?" for the nearest match of `word`, or "".
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

enum class ComponentKind;  // lib/registry.h
// The same for a mistyped name of a registered component of `kind` (a backend or a layer).
std::string DidYouMeanComponent(const std::string& name, ComponentKind kind);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_SUGGEST_H_
