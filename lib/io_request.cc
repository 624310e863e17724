#include "lib/io_request.h"

namespace vstack {

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kRead: return "read";
    case Op::kWrite: return "write";
    case Op::kFlush: return "flush";
    case Op::kDiscard: return "discard";
    case Op::kWriteZeroes: return "write_zeroes";
  }
  return "unknown";
}

}  // namespace vstack
