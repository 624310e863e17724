// The stack-spec grammar (docs/stack-spec.md), parsed without knowing any layer:
//
//   spec    := part ('+' part)*            layers first, the backend last
//   part    := name [':' item (',' item)*]
//   item    := key '=' value | positional   a positional (path, size) only as the first item
//
// A backslash escapes the next character, so paths may contain '+', ',' or ':'. A first item
// whose text before '=' is not an identifier ([a-z_][a-z0-9_]*) is positional, so
// "file:/tmp/a=b.img" needs no escape.
#ifndef VSTACK_LIB_SPEC_H_
#define VSTACK_LIB_SPEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

struct SpecOption {
  std::string key;
  std::string value;
  bool operator==(const SpecOption&) const = default;
};

struct SpecPart {
  std::string name;
  std::string positional;  // empty when absent
  std::vector<SpecOption> options;
  bool operator==(const SpecPart&) const = default;
};

// Errors (Errc::kBadSpec) say what is wrong and where: "spec 'a++b': empty part at character 2".
// A spec holding a NUL byte is refused (RefuseNul).
Result<std::vector<SpecPart>> ParseSpec(std::string_view spec);

// Refuses a spec or path that holds a NUL byte: the C library would read it only up to the
// NUL, and another file would be used ("b.raw\0.evil" would create "b.raw"). The error has
// `code` and says "the WHAT contains a NUL byte at position N", N counted in bytes from 0;
// the text itself is left out of it, the NUL would cut it short wherever it is printed.
Status RefuseNul(std::string_view text, Errc code, std::string_view what);

// The canonical text of a part or a whole spec, escaping '+', ',', ':', '=' and '\' in values,
// so that ParseSpec(FormatSpec(p)) == p.
std::string FormatSpecPart(const SpecPart& part);
std::string FormatSpec(const std::vector<SpecPart>& parts);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_SPEC_H_
