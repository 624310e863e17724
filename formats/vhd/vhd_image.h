// Reading and validating a VHD's metadata from the device below: footer (end, legacy 511-byte,
// or the copy at offset 0), dynamic header, BAT, and the layout of every structure in the
// file. Used by the layer's open, by `vstack check`, by probe and by compact.
//
// Memory is bounded by what the file holds, never by what a header claims: the BAT is capped
// at what the format allows for the stated size, read in bounded chunks only once it is known
// to lie inside the file and to hold data (not a hole), and at most kMaxStoredFindings
// findings are kept (the rest are counted).
#ifndef VSTACK_FORMATS_VHD_VHD_IMAGE_H_
#define VSTACK_FORMATS_VHD_VHD_IMAGE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/vhd/vhd_footer.h"
#include "formats/vhd/vhd_header.h"
#include "lib/block_device.h"

namespace vstack::vhd {

// What `vstack check -r` may do about a finding.
enum class Repair {
  kNone,              // report only: repairing could lose data
  kRewriteEndFooter,  // -r all: write the valid footer at the end of the file
  kRewriteCopy,       // -r all: write the footer copy at offset 0
  kRewriteHeader,     // -r all: rewrite the dynamic header with a correct checksum
  kRewriteFooter,     // -r all: rewrite the (only) footer of a fixed disk with a correct checksum
  kClearEntry,        // -r all: mark BAT entry `index` unallocated (its block lies wholly past
                      // the end of the file: nothing is behind it)
  kTruncateTail,      // -r leaks: move the end footer down to the end of the last structure
  kExtendFile,        // -r all: extend the file to `extend_to`, the end of the blocks its end
                      // cuts (truncation), and write the footer there: nothing is lost (what
                      // was cut reads as zeros, as it does already)
};

struct Finding {
  enum Kind { kCorruption, kLeak, kWarning };
  Kind kind = kCorruption;
  std::string message;  // names the field and the offset
  Repair repair = Repair::kNone;
  uint32_t index = 0;  // kClearEntry: the BAT index
  uint64_t bytes = 0;  // kLeak: leaked bytes
};

enum class FooterSource {
  kEnd,         // the last 512 bytes
  kEndShort,    // a pre-2004 511-byte footer at the end
  kCopyAtZero,  // the end footer is missing or corrupt; the dynamic disk's copy at offset 0
};
std::string FooterSourceName(FooterSource s);

struct VhdImage {
  uint64_t device_size = 0;
  // The device below is resizable (a regular file): new blocks go past the end footer, which
  // moves. Otherwise (memory, a block device) the footer stays in the last sector and blocks
  // fill the space before it.
  bool growable = false;
  Footer footer;
  std::array<uint8_t, kFooterSize> footer_bytes{};  // `footer` as it should be on disk
  FooterSource source = FooterSource::kEnd;
  uint64_t footer_offset = 0;  // where the end footer is, or belongs

  // Dynamic disks only.
  DynamicHeader header;
  std::vector<uint32_t> bat;       // max_table_entries entries
  std::vector<uint32_t> unusable;  // BAT indices with corrupt entries (lenient loads only)
  std::vector<uint32_t> past_end;  // the subset of `unusable` whose blocks run past the end
  std::vector<uint32_t> clear_entries;  // BAT indices `-r all` clears (Repair::kClearEntry)
  uint64_t cut_blocks = 0;  // blocks the end of a growable file cuts (Repair::kExtendFile)
  uint64_t extend_to = 0;   // the end of the last of them; 0 if none
  uint64_t blocks_needed = 0;      // BAT entries that cover current_size
  uint64_t metadata_end = 0;       // end of the footer copy, header, BAT and locators
  uint64_t data_end = 0;           // end of the last structure, metadata or block
  uint64_t unaligned_blocks = 0;   // blocks whose data area is not 4 KiB-aligned

  // At most kMaxStoredFindings; `omitted` counts the rest, by kind. Repairs do not depend on
  // them being stored: BAT entries to clear are in `clear_entries`.
  static constexpr size_t kMaxStoredFindings = 200;
  std::vector<Finding> findings;
  std::array<uint64_t, 3> omitted{};

  bool is_dynamic() const { return footer.is_dynamic(); }
  // Stores `f`, or counts it in `omitted` once kMaxStoredFindings are stored.
  void AddFinding(Finding f);
  // The same, calling `message()` for the text only if the finding is stored: a scan that can
  // find one problem per BAT entry builds at most kMaxStoredFindings messages.
  template <typename MakeMessage>
  void AddFinding(Finding::Kind kind, MakeMessage&& message, Repair repair = Repair::kNone,
                  uint32_t index = 0, uint64_t bytes = 0) {
    if (findings.size() < kMaxStoredFindings) {
      findings.push_back({kind, message(), repair, index, bytes});
    } else {
      ++omitted[kind];
    }
  }
  // Stored and omitted findings of `kind`.
  uint64_t CountFindings(Finding::Kind kind) const;
};

// Reads the metadata of the VHD on `device`. Strict (lenient = false): every corruption that
// makes data unreliable is an error naming the field and offset, except what the spec says to
// recover from (a corrupt end footer of a dynamic disk whose copy at offset 0 is good), which
// is recorded as a finding. Lenient (for `vstack check`): such corruption is recorded too, and
// corrupt BAT entries are listed in `unusable`; what cannot be read at all (no footer, no
// header, a BAT outside the file) is still an error. Leaks and warnings are always findings.
// REQUIRES: the device has 512-byte logical blocks and opens a queue.
Result<VhdImage> LoadImage(BlockDevice& device, bool lenient);

// True if the device holds a VHD: a valid footer at the end (512 or 511 bytes before it), or a
// valid dynamic-disk footer copy at offset 0. A 'conectix' cookie alone is not enough (raw
// guest data can hold one): if one is seen but no valid footer, `problem` (if given) receives
// what is wrong with it, naming the offset; otherwise it is left empty.
bool ProbeImage(BlockDevice& device, std::string* problem = nullptr);

}  // namespace vstack::vhd

#endif  // VSTACK_FORMATS_VHD_VHD_IMAGE_H_
