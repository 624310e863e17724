// The guard OpenImage puts over a bare path that it opened writable as raw because no format
// probe recognised it (docs/stack-spec.md, "Specs or paths"): writes that would put a format's
// signature where that format's probe looks (e.g. a VHD footer cookie in the last sector) fail
// with Errc::kReadOnly, so a guest of `vstack serve disk.raw` cannot make the next open of the
// same path choose another format. This is qemu's answer to raw probing (writes to a probed
// raw image may not change what it probes as). Naming the format (`file:PATH`) opens the file
// without the guard.
#ifndef VSTACK_LIB_PROBE_GUARD_H_
#define VSTACK_LIB_PROBE_GUARD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/block_device.h"

namespace vstack {

// Bytes a format's probe recognises at one place of a device.
struct ProbeSignature {
  int64_t offset;      // from the start, or (negative) from the end of the device
  std::string bytes;   // e.g. "conectix"
  std::string format;  // the format that probes for it, for the error message
};

// What an image format tells OpenImage beyond its ComponentInfo::probe, registered once per
// format (e.g. by a static initializer next to its component).
struct ProbeDetails {
  // The signatures its probe looks for.
  std::vector<ProbeSignature> signatures;
  // For a device the probe rejected: what makes it look like this format without being a
  // valid image (e.g. a footer cookie with a bad checksum), naming the offset; empty if
  // nothing does. OpenImage reports it rather than guessing.
  std::function<std::string(BlockDevice& device)> problem;
};
bool RegisterProbeDetails(const std::string& format, ProbeDetails details);
// The details of a format whose `Probe(device, &problem)` both recognises its images and, for
// a device it rejects, explains in `problem` what looks like the format.
template <auto Probe>
ProbeDetails ProbeDetailsOf(std::vector<ProbeSignature> signatures) {
  return {std::move(signatures), [](BlockDevice& device) {
            std::string problem;
            Probe(device, &problem);
            return problem;
          }};
}
// The details registered for `format`, or nullptr.
const ProbeDetails* FindProbeDetails(const std::string& format);

// Wraps `raw` (opened writable) so that writes cannot place any of `signatures`.
DevicePtr GuardProbedRaw(DevicePtr raw, std::vector<ProbeSignature> signatures);

}  // namespace vstack

#endif  // VSTACK_LIB_PROBE_GUARD_H_
