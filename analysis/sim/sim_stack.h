// SimStack: the layers `vstack sim --stack LAYERS` puts over simulated disks, and how the
// simulator makes, opens and reopens them.
//
// LAYERS is a spec without its backend (docs/stack-spec.md), top layer first. A `vhd` or `vhdx`
// part is an image the simulator formats on the device below it at the first open: besides its
// layer options it takes the format's create options (`vhd:subformat=fixed`, `block_size=...`),
// and `vhd:subformat=diff` is a differencing VHD whose parent, a dynamic VHD on a disk of its
// own ("parent", filled with known data first), is opened through `vhd:parent=`. Layers that
// keep metadata (dedup, zstd, crc32c) are formatted at the first open (format=on). Options
// LAYERS leaves out are drawn from the seed where they change how a layer works (a VHD's
// block size and reservation, a VHDX's block size, a grain layer's grain).
//
// The bottom of the stack is the disk "disk" (sim_device.h), a file-like disk (it grows and
// punches holes) or a fixed-size one, with FUA and write-zeroes native or emulated, a
// transfer limit or none: drawn from the seed.
#ifndef VSTACK_ANALYSIS_SIM_SIM_STACK_H_
#define VSTACK_ANALYSIS_SIM_SIM_STACK_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/sim/scheduler.h"
#include "analysis/sim/unwritten_trace.h"
#include "lib/block_device.h"
#include "lib/spec.h"

namespace vstack::sim {

class SimStack {
 public:
  // Checks LAYERS (unknown layers, a backend, bad create options, more than one differencing
  // VHD): errors are the command line's (exit 2).
  static Result<SimStack> Parse(std::string_view layers);

  const std::string& text() const { return text_; }

  // True if a request `op` of the top device may fail with `ec` because an `error` layer
  // injects it: its errno (or any error code equivalent to it); when it is the top layer, on
  // reads if it fails reads and on every write-type request (write, write-zeroes, discard,
  // flush) if it fails any (the device's emulations turn one into another: write-zeroes into
  // writes, FUA into a write and a flush); when it sits below another layer, on any request (a
  // format reads its metadata for a read, may read before a write). Known once the stack has
  // opened; an `error` layer with rate=0 injects nothing.
  bool MayInject(Op op, std::error_code ec) const;
  // True if the stack's own I/O (opening, `Check`, closing) may fail with `ec` because an
  // `error` layer below another injects it.
  bool InjectsBelow(std::error_code ec) const;

  // Draws the run's variations (disk traits, options LAYERS leaves out) and registers the
  // disks with `sched`, whose virtual clock the layers that model time (delay, hv, ready) read.
  void Prepare(Scheduler& sched, SimRng& rng);
  // Opens the stack (on a simulated thread). `first`: formats every layer and creates the
  // images (and before that fills the differencing VHD's parent).
  Result<DevicePtr> Open(bool first);
  // What each unit of the top device holds right after the first open, as unit hashes, by
  // what each layer says it shows where nothing has been written (unwritten_trace.h): the
  // parent's data where a differencing VHD shows through (it is the top layer; the layers above
  // it keep the data below as they are, ForwardingLayers; a fixed VHD or a fixed VHDX maps its
  // data onto it), else zeros. Fails if a layer does not say: the simulator cannot model the
  // stack.
  Result<std::vector<uint64_t>> InitialContent(uint64_t units) const;
  // A power cut: each disk the stack writes becomes what the cut leaves of it (the stack
  // opened so far keeps the old one).
  void PowerCut(Scheduler& sched, SimRng& rng, double land, double torn);

 private:
  struct Part {
    SpecPart layer;            // the layer's own options
    std::string format;        // "vhd", "vhdx", or empty
    std::vector<SpecOption> create;  // the format's create options
    bool diff = false;         // vhd:subformat=diff
    bool formats_below = false;  // the layer takes format=on
  };

  Status MakeParent();
  Result<DevicePtr> OpenPart(const Part& part, DevicePtr below, bool first);
  // Notes what the `error` layers of the open stack `top` inject (MayInject).
  void NoteInjectors(BlockDevice& top);
  Status CreateImage(const Part& part, BlockDevice& below);

  std::string text_;
  std::vector<Part> parts_;  // bottom first
  uint64_t parent_seed_ = 0;
  uint64_t image_size_ = 16 << 20;  // of an image over a disk that grows
  // What the top device shows after the first open (InitialContent), or why that is unknown.
  std::vector<ShownRun> shown_;
  std::optional<Error> unmodelled_;
  struct Injector {
    int error = 0;     // errno
    uint32_t ops = 0;  // bit (1 << Op) per kind of top-device request that may fail with it
    bool top = false;  // the top layer: the layers' own I/O does not pass through it
    bool Injects(std::error_code ec) const {
      return ec == SystemError(error) || ec == std::error_condition(error, std::generic_category());
    }
  };
  std::vector<Injector> injectors_;
  Clock* clock_ = nullptr;          // the scheduler's (Prepare)
};

}  // namespace vstack::sim

#endif  // VSTACK_ANALYSIS_SIM_SIM_STACK_H_
