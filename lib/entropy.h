// Where the library's random identifiers and the time stamps of new images come from: a VHD's
// unique ID and time stamp, VHDX GUIDs, the volume IDs of the grain layers' metadata.
//
// Outside a simulation they are std::random_device and the wall clock. A simulator installs a
// seeded source on its thread (analysis/sim), so that two runs of one seed write the same bytes
// and make the same trace: a layer below (dedup, zstd) hashes and places what it is given, so
// a random ID in a footer changes where its grains go.
#ifndef VSTACK_LIB_ENTROPY_H_
#define VSTACK_LIB_ENTROPY_H_

#include <cstdint>

#include "lib/export.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class EntropySource {
 public:
  virtual ~EntropySource() = default;
  // 64 random bits.
  virtual uint64_t Random64() = 0;
  // The current time, in seconds since 1970-01-01 UTC.
  virtual uint64_t UnixSeconds() = 0;
};

// Installs `source` for the calling thread (nullptr: the system's, the default); returns the
// previous one.
EntropySource* SetEntropySource(EntropySource* source);

// 64 random bits from the calling thread's source.
uint64_t RandomBits64();
// The calling thread's source's time, in seconds since 1970-01-01 UTC.
uint64_t NowUnixSeconds();

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_ENTROPY_H_
