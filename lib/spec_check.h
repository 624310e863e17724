// Checking a stack spec's names without opening anything: for a command that hands the spec
// to another process (vstack serve starts nbdkit with it) and must still answer a mistyped
// layer, backend or option with a usage error (exit status 2) before it starts.
#ifndef VSTACK_LIB_SPEC_CHECK_H_
#define VSTACK_LIB_SPEC_CHECK_H_

#include <string_view>

#include "lib/errors.h"
#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

// What OpenImage(spec_or_path) would say about the text's grammar, component names and option
// keys (Errc::kBadSpec, with "did you mean"), found without opening a device. OK for an
// existing path, for a path that does not exist and does not look like a spec (the open says
// so), and for a spec whose every part resolves. Option values are checked by the open.
Status CheckSpecNames(std::string_view spec_or_path);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_SPEC_CHECK_H_
