// Image formats vstack does not read (qcow2, VMDK, VDI, ...), recognised by their signatures.
// OpenImage (registry.h) refuses a bare path that carries one instead of opening it as raw
// bytes: a qcow2 read as raw gives wrong answers (`vstack space` would count its clusters as a
// guest's data) and a guest writing it destroys the image. The raw guard (probe_guard.h) also
// refuses writes that would place one, so a guest cannot make a raw image open as one of them.
// The signatures are those the formats' own readers check (qemu's block drivers' probes).
#ifndef VSTACK_LIB_FOREIGN_FORMATS_H_
#define VSTACK_LIB_FOREIGN_FORMATS_H_

#include <string>
#include <vector>

#include "lib/block_device.h"
#include "lib/probe_guard.h"

namespace vstack {

// The signatures of the formats vstack recognises but does not read; `format` names each.
const std::vector<ProbeSignature>& ForeignFormatSignatures();

// The first of ForeignFormatSignatures() that `device` carries, or nullptr (also when reading
// it fails: an I/O error says nothing about the contents).
const ProbeSignature* FindForeignFormat(BlockDevice& device);

}  // namespace vstack

#endif  // VSTACK_LIB_FOREIGN_FORMATS_H_
