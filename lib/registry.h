// The registry of backends and layers, and vstack::Open(spec), which builds a stack from a
// spec string (docs/stack-spec.md) such as "dedup+zstd:level=1+vhd+file:/var/tmp/d.vhd".
//
// Components register themselves by name from a static initialiser in their own .cc file:
//
//   VSTACK_REGISTER_COMPONENT(memory, MemoryComponent());
//
// (libvstack.a is one prelinked object, so the initialisers always run; docs/library.md.)
// Open() checks every name and option against the registry before anything is opened, and
// names the valid choices in its errors.
#ifndef VSTACK_LIB_REGISTRY_H_
#define VSTACK_LIB_REGISTRY_H_

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "lib/block_device.h"
#include "lib/errors.h"
#include "lib/export.h"
#include "lib/spec.h"

VSTACK_PUBLIC_BEGIN
namespace vstack {

class Clock;  // lib/clock.h

struct OptionInfo {
  std::string name;
  std::string help;
  std::string default_value;  // used when the spec omits the option; "" = none
};

// Options apply to the whole stack being opened.
struct OpenOptions {
  bool read_only = false;
  // Opening for `vstack check`: layers accept metadata they would normally refuse (a bad
  // checksum, a BAT entry past the end of the file) so that Check() can report and repair it;
  // data I/O that depends on the broken parts fails with Errc::kCorruption. Metadata that
  // cannot be read at all still fails the open.
  bool for_check = false;
  // Files are opened without taking or checking the advisory locks qemu honours (the file and
  // uring backends' lock=off, at every level of the stack and for the parents of a
  // differencing VHD): qemu-img's -U (force-share), to read an image another process has open
  // for writing. What is read may be inconsistent while that process writes. Read-only opens
  // only: a writable open with it is refused (Errc::kInvalidArgument).
  bool force_share = false;
  // The clock of the layers that model time (delay, hv, ready); nullptr: SystemClock(). A
  // simulator gives its virtual clock (analysis/sim). Must outlive the stack.
  Clock* clock = nullptr;

  // `clock`, or SystemClock() when it is nullptr.
  Clock& clock_or_system() const;
};

// The error for a bad value of option `key` of `component` in a spec or in create options:
// Errc::kBadSpec, "<component>: option '<key>': <why>" (e.g. "dedup: option 'grain': 3072 is not
// a power of two from 4K to 64K"). A usage error: the CLI exits 2.
Error BadOptionValue(std::string_view component, std::string_view key, const std::string& why);

// The options of one spec part, checked against its component's OptionInfo list. Getters fall
// back to the declared default and return errors that name the component and the option.
class OptionValues {
 public:
  OptionValues(std::string component, std::string positional, std::vector<SpecOption> given,
               const std::vector<OptionInfo>* declared)
      : component_(std::move(component)),
        positional_(std::move(positional)),
        given_(std::move(given)),
        declared_(declared) {}

  const std::string& component() const { return component_; }
  const std::string& positional() const { return positional_; }
  // True if the spec gave `key` explicitly.
  bool Has(std::string_view key) const;
  // The given value, else the declared default, else "".
  std::string Get(std::string_view key) const;
  Result<uint64_t> Size(std::string_view key) const;
  // on/off, true/false, yes/no, 1/0. An empty value given in the spec ("verify=") is an error
  // (Errc::kBadSpec), never off.
  Result<bool> Bool(std::string_view key) const;
  Result<int64_t> Int(std::string_view key, int64_t min, int64_t max) const;
  Result<std::string> Choice(std::string_view key,
                             std::initializer_list<std::string_view> choices) const;
  // A logical block size option: 512 or 4096.
  Result<uint32_t> LogicalBlock(std::string_view key) const;
  // The positional argument as a size that is a positive multiple of `multiple`.
  Result<uint64_t> PositionalSize(uint64_t multiple) const;

 private:
  Error Bad(std::string_view key, const std::string& why) const;

  std::string component_;
  std::string positional_;
  std::vector<SpecOption> given_;
  const std::vector<OptionInfo>* declared_;
};

enum class ComponentKind { kBackend, kLayer };

struct ComponentInfo {
  std::string name;
  ComponentKind kind = ComponentKind::kLayer;
  std::string summary;     // one line, shown by `vstack help stacks` and in errors
  std::string positional;  // backends: what the first item is ("PATH", "SIZE"); required
  std::vector<OptionInfo> options;
  // Exactly one of these is set, matching `kind`.
  std::function<Result<DevicePtr>(const OptionValues&, const OpenOptions&)> open_backend;
  std::function<Result<DevicePtr>(DevicePtr lower, const OptionValues&, const OpenOptions&)>
      open_layer;
  // Image formats only: true if `device` holds an image of this format, so that a bare path
  // can be opened as "<name>+file:PATH" (OpenImage).
  std::function<bool(BlockDevice& device)> probe;
  // Image formats only: creates a new image of virtual size `size` at `path` (an existing file
  // is an error), like `qemu-img create -f <name> -o <options>`, and returns the file holding
  // it, still open for writing on the descriptor that created it (the backend below this
  // format's layer; never reopened by path). On failure nothing it created is left at `path`.
  // `options` are checked against `create_options` first.
  std::function<Result<DevicePtr>(const std::string& path, uint64_t size,
                                  const OptionValues& options)>
      create;
  std::vector<OptionInfo> create_options;
};

using OpenBackendFn = decltype(ComponentInfo::open_backend);
using OpenLayerFn = decltype(ComponentInfo::open_layer);

// The entry of a backend: its name, one-line summary, what its positional item is ("PATH",
// "SIZE"), its options and how to open it. Formats and backends with more (probe, create) set
// those fields on the result.
ComponentInfo BackendComponent(std::string name, std::string summary, std::string positional,
                               std::vector<OptionInfo> options, OpenBackendFn open);
// The entry of a layer: its name, one-line summary, its options and how to open it over `lower`.
ComponentInfo LayerComponent(std::string name, std::string summary, std::vector<OptionInfo> options,
                             OpenLayerFn open);
// Makes the layer entry `layer` an image format: `Probe(device, nullptr)` recognises its images
// (OpenImage opens a bare path as "<name>+file:PATH"), and `Create(path, Parse(size, options))`
// makes one (CreateImage, `vstack create`), taking `create_options`.
template <auto Probe, auto Parse, auto Create>
ComponentInfo ImageFormatComponent(ComponentInfo layer, std::vector<OptionInfo> create_options) {
  layer.probe = [](BlockDevice& device) { return Probe(device, nullptr); };
  layer.create = [](const std::string& path, uint64_t size,
                    const OptionValues& options) -> Result<DevicePtr> {
    VSTACK_ASSIGN_OR_RETURN(auto params, Parse(size, options));
    return Create(path, params);
  };
  layer.create_options = std::move(create_options);
  return layer;
}
// `shared` followed by `own`: a family's shared options (e.g. Ceph's connection options), then
// one component's.
std::vector<OptionInfo> JoinOptions(std::vector<OptionInfo> shared,
                                    std::initializer_list<OptionInfo> own);

class Registry {
 public:
  static Registry& Global();

  // Adds a component; a duplicate name is a programming error and aborts. Returns true so it
  // can initialise a static.
  bool Add(ComponentInfo info);
  const ComponentInfo* Find(std::string_view name) const;
  // Every component, backends first, each group sorted by name.
  std::vector<const ComponentInfo*> All() const;
  // "a, b, c": the names of one kind, for error messages.
  std::string Names(ComponentKind kind) const;

 private:
  std::vector<std::unique_ptr<ComponentInfo>> components_;
};

#define VSTACK_REGISTER_COMPONENT(ident, info)                   \
  static const bool vstack_registered_##ident [[maybe_unused]] = \
      ::vstack::Registry::Global().Add(info)

// Builds the stack described by `spec`.
Result<DevicePtr> Open(std::string_view spec, const OpenOptions& options = {});

// Opens the layers of `layers` (a spec without its backend, e.g. "dedup+zstd:level=1") on top
// of `lower`, bottom layer first, exactly as Open() does over a backend.
Result<DevicePtr> OpenLayers(std::string_view layers, DevicePtr lower,
                             const OpenOptions& options = {});

// True if `text` parses as a spec whose last part is a registered backend.
bool IsStackSpec(std::string_view text);

// The formats CreateImage makes: "raw", then every registered format with a `create` hook,
// sorted ("raw", "vhd", "vhdx").
std::vector<std::string> CreatableFormats();

// Creates an image file, like `qemu-img create -f FORMAT -o OPTIONS PATH SIZE`. FORMAT is "raw"
// (a sparse file) or a registered format with a `create` hook; OPTIONS is "k=v,k=v" checked
// against the format's create_options. Never overwrites an existing file. A path holding a
// NUL byte is refused (Errc::kInvalidArgument, RefuseNul in lib/spec.h).
Status CreateImage(std::string_view format, const std::string& path, uint64_t size,
                   std::string_view options = "");

// CreateImage, then the new image open for reading and writing: the format's layer over the file
// that the creating open(O_CREAT | O_EXCL) returned. The image is never reopened by path, so a
// file or symlink swapped in at `path` meanwhile cannot receive the writes. A raw image needs a
// size > 0 (an empty file cannot be opened). On failure nothing is left at `path`.
Result<DevicePtr> CreateAndOpenImage(std::string_view format, const std::string& path,
                                     uint64_t size, std::string_view options = "");

// Opens a spec, or a path: a path is opened with the file backend and every registered format
// probe (e.g. VHD's footer check) decides which format layer goes on top; a file no format
// recognises is opened raw. `chosen_spec`, if given, receives the spec actually used. Text
// holding a NUL byte is refused (RefuseNul in lib/spec.h): Errc::kBadSpec when what precedes
// the NUL is a spec, kInvalidArgument (a path) otherwise.
Result<DevicePtr> OpenImage(std::string_view spec_or_path, const OpenOptions& options = {},
                            std::string* chosen_spec = nullptr);

}  // namespace vstack
VSTACK_PUBLIC_END

#endif  // VSTACK_LIB_REGISTRY_H_
