#include "lib/registry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "lib/clock.h"
#include "lib/foreign_formats.h"
#include "lib/new_file.h"
#include "lib/probe_guard.h"
#include "lib/size.h"
#include "lib/spec_check.h"
#include "lib/suggest.h"

namespace vstack {

// ---------------------------------------------------------------------------------------------
// OptionValues

bool OptionValues::Has(std::string_view key) const {
  return std::any_of(given_.begin(), given_.end(), [&](const SpecOption& o) { return o.key == key; });
}

std::string OptionValues::Get(std::string_view key) const {
  for (const SpecOption& o : given_) {
    if (o.key == key) return o.value;
  }
  if (declared_) {
    for (const OptionInfo& d : *declared_) {
      if (d.name == key) return d.default_value;
    }
  }
  return "";
}

Error BadOptionValue(std::string_view component, std::string_view key, const std::string& why) {
  return MakeError(Errc::kBadSpec,
                   std::string(component) + ": option '" + std::string(key) + "': " + why);
}

Error OptionValues::Bad(std::string_view key, const std::string& why) const {
  return BadOptionValue(component_, key, why);
}

Result<uint64_t> OptionValues::Size(std::string_view key) const {
  auto v = ParseSize(Get(key));
  if (!v) return Bad(key, v.error().message);
  return *v;
}

Result<bool> OptionValues::Bool(std::string_view key) const {
  const std::string v = Get(key);
  if (v == "on" || v == "true" || v == "yes" || v == "1") return true;
  if (v == "off" || v == "false" || v == "no" || v == "0") return false;
  if (v.empty() && !Has(key)) return false;  // neither given nor declared with a default
  // "verify=" is a typo or a value lost to the shell, not a choice: it meant off silently.
  const std::string got = v.empty() ? "an empty value" : "'" + v + "'";
  const std::string spellings = v.empty() ? " (or true/false, yes/no, 1/0)" : "";
  return Bad(key, "expected on or off" + spellings + ", got " + got);
}

Result<int64_t> OptionValues::Int(std::string_view key, int64_t min, int64_t max) const {
  const std::string v = Get(key);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) return Bad(key, "expected an integer, got '" + v + "'");
  if (x < min || x > max) {
    return Bad(key, std::to_string(x) + " is outside " + std::to_string(min) + ".." +
                        std::to_string(max));
  }
  return static_cast<int64_t>(x);
}

Result<std::string> OptionValues::Choice(std::string_view key,
                                         std::initializer_list<std::string_view> choices) const {
  const std::string v = Get(key);
  std::string list;
  for (std::string_view c : choices) {
    if (c == v) return v;
    if (!list.empty()) list += ", ";
    list += c;
  }
  return Bad(key, "'" + v + "' is not one of: " + list);
}

Result<uint32_t> OptionValues::LogicalBlock(std::string_view key) const {
  VSTACK_ASSIGN_OR_RETURN(std::string b, Choice(key, {"512", "4096"}));
  return b == "512" ? 512u : 4096u;
}

Result<uint64_t> OptionValues::PositionalSize(uint64_t multiple) const {
  auto size = ParseSize(positional_);
  if (!size) return MakeError(Errc::kBadSpec, component_ + ": " + size.error().message);
  if (*size == 0 || *size % multiple != 0) {
    return MakeError(Errc::kBadSpec, component_ + ": size " + std::to_string(*size) +
                                         " must be a positive multiple of " +
                                         std::to_string(multiple));
  }
  return *size;
}

// ---------------------------------------------------------------------------------------------
// ComponentInfo builders

ComponentInfo BackendComponent(std::string name, std::string summary, std::string positional,
                               std::vector<OptionInfo> options, OpenBackendFn open) {
  ComponentInfo c;
  c.name = std::move(name);
  c.kind = ComponentKind::kBackend;
  c.summary = std::move(summary);
  c.positional = std::move(positional);
  c.options = std::move(options);
  c.open_backend = std::move(open);
  return c;
}

ComponentInfo LayerComponent(std::string name, std::string summary, std::vector<OptionInfo> options,
                             OpenLayerFn open) {
  ComponentInfo c;
  c.name = std::move(name);
  c.kind = ComponentKind::kLayer;
  c.summary = std::move(summary);
  c.options = std::move(options);
  c.open_layer = std::move(open);
  return c;
}

std::vector<OptionInfo> JoinOptions(std::vector<OptionInfo> shared,
                                    std::initializer_list<OptionInfo> own) {
  shared.insert(shared.end(), own.begin(), own.end());
  return shared;
}

// ---------------------------------------------------------------------------------------------
// Registry

Registry& Registry::Global() {
  static Registry* registry = new Registry();  // never destroyed: used by static initialisers
  return *registry;
}

bool Registry::Add(ComponentInfo info) {
  if (Find(info.name) != nullptr) {
    std::fprintf(stderr, "vstack: component '%s' registered twice\n", info.name.c_str());
    std::abort();
  }
  components_.push_back(std::make_unique<ComponentInfo>(std::move(info)));
  return true;
}

const ComponentInfo* Registry::Find(std::string_view name) const {
  for (const auto& c : components_) {
    if (c->name == name) return c.get();
  }
  return nullptr;
}

std::vector<const ComponentInfo*> Registry::All() const {
  std::vector<const ComponentInfo*> all;
  for (const auto& c : components_) all.push_back(c.get());
  std::sort(all.begin(), all.end(), [](const ComponentInfo* a, const ComponentInfo* b) {
    if (a->kind != b->kind) return a->kind == ComponentKind::kBackend;
    return a->name < b->name;
  });
  return all;
}

std::string Registry::Names(ComponentKind kind) const {
  std::string out;
  for (const ComponentInfo* c : All()) {
    if (c->kind != kind) continue;
    if (!out.empty()) out += ", ";
    out += c->name;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Open

namespace {

// The option every part of a spec takes: what the part's device measures (lib/stats.h).
constexpr std::string_view kStatsOption = "stats";

// Checks one part against its component; returns the component.
Result<const ComponentInfo*> Resolve(const SpecPart& part, bool is_last) {
  const Registry& reg = Registry::Global();
  const ComponentInfo* info = reg.Find(part.name);
  if (info == nullptr) {
    std::vector<std::string> names;
    for (const ComponentInfo* c : reg.All()) names.push_back(c->name);
    return MakeError(Errc::kBadSpec,
                     "unknown " + std::string(is_last ? "backend" : "layer") + " '" + part.name +
                         "'; backends: " + reg.Names(ComponentKind::kBackend) +
                         "; layers: " + reg.Names(ComponentKind::kLayer) +
                         DidYouMean(part.name, names));
  }
  if (is_last && info->kind != ComponentKind::kBackend) {
    return MakeError(Errc::kBadSpec, "'" + part.name +
                                         "' is a layer, but a spec must end with a backend (" +
                                         reg.Names(ComponentKind::kBackend) + "), e.g. " +
                                         part.name + "+file:/var/tmp/disk.img");
  }
  if (!is_last && info->kind != ComponentKind::kLayer) {
    return MakeError(Errc::kBadSpec,
                     "'" + part.name + "' is a backend and must come last in the spec");
  }
  if (info->kind == ComponentKind::kBackend && part.positional.empty() &&
      !info->positional.empty()) {
    return MakeError(Errc::kBadSpec,
                     "backend '" + part.name + "' needs a " + info->positional + ", e.g. " +
                         part.name + ":" +
                         (info->positional == "SIZE" ? "64M" : "/var/tmp/disk.img"));
  }
  if (info->kind == ComponentKind::kLayer && !part.positional.empty()) {
    return MakeError(
        Errc::kBadSpec,
        "layer '" + part.name + "' takes only key=value options, not '" + part.positional + "'");
  }
  for (const SpecOption& o : part.options) {
    if (o.key == kStatsOption) continue;  // every part takes it (TakeStatsOption)
    const bool known = std::any_of(info->options.begin(), info->options.end(),
                                   [&](const OptionInfo& d) { return d.name == o.key; });
    if (!known) {
      std::string valid;
      std::vector<std::string> names;
      for (const OptionInfo& d : info->options) {
        valid += d.name + ", ";
        names.push_back(d.name);
      }
      names.emplace_back(kStatsOption);
      return MakeError(Errc::kBadSpec,
                       "unknown option '" + o.key + "' for '" + part.name + "'; valid options: " +
                           valid + std::string(kStatsOption) + " (every part)" +
                           DidYouMean(o.key, names));
    }
  }
  return info;
}

// Removes the `stats=counts|latency` option, which every part takes, from `part`: the mode
// that part's device keeps (PinStatsMode), or nullopt if the spec does not say.
Result<std::optional<StatsMode>> TakeStatsOption(SpecPart& part) {
  auto it = std::find_if(part.options.begin(), part.options.end(),
                         [](const SpecOption& o) { return o.key == kStatsOption; });
  if (it == part.options.end()) return std::optional<StatsMode>();
  std::optional<StatsMode> mode;
  if (it->value == "counts") mode = StatsMode::kCounts;
  if (it->value == "latency") mode = StatsMode::kLatency;
  if (!mode) {
    return MakeError(Errc::kBadSpec, "option 'stats' of '" + part.name +
                                         "' must be counts or latency, not '" + it->value + "'");
  }
  part.options.erase(it);
  return mode;
}

}  // namespace

namespace {

// What to say when the backend `parts[k]` (options `values`) found no file: that its create=
// makes one, where that would be what the spec means. Nothing for a read-only open, which wants
// what exists, nor under an image format (compact, commit, a parent: the image was meant to
// exist, and create=on would make an empty file, not an image), nor when the spec says
// create=on already (the file could not be made: a directory of its path is missing).
std::string MissingFileHint(const std::vector<const ComponentInfo*>& infos, size_t k,
                            const OptionValues& values, const OpenOptions& options) {
  if (options.read_only || (k > 0 && infos[k - 1]->create)) return "";
  if (const Result<bool> create = values.Bool("create"); create && *create) return "";
  const auto& o = infos[k]->options;
  const bool creates =
      std::any_of(o.begin(), o.end(), [](const auto& x) { return x.name == "create"; });
  return creates ? " (use create=on,size=N to create it)" : "";
}

// Resolves `parts` (the last one a backend if `with_backend`) and opens them from the bottom
// up, the first over `device` (the backend's, or the one given). If a layer fails to open over
// a file that the backend made (create=on), the file is removed; over a file that existed and
// that size= made larger, the file gets its old size back; an image it created is removed:
// nothing is left behind (BlockDevice::open_undo).
Result<DevicePtr> OpenParts(std::vector<SpecPart> parts, bool with_backend, DevicePtr device,
                            const OpenOptions& options) {
  std::vector<const ComponentInfo*> infos;
  std::vector<std::optional<StatsMode>> stats;
  for (size_t i = 0; i < parts.size(); ++i) {
    VSTACK_ASSIGN_OR_RETURN(const ComponentInfo* info,
                            Resolve(parts[i], with_backend && i + 1 == parts.size()));
    infos.push_back(info);
    VSTACK_ASSIGN_OR_RETURN(std::optional<StatsMode> mode, TakeStatsOption(parts[i]));
    stats.push_back(mode);
  }
  // Build from the backend up.
  std::function<void()> undo;  // the backend's open_undo
  for (size_t k = parts.size(); k-- > 0;) {
    const SpecPart& part = parts[k];
    OptionValues values(part.name, part.positional, part.options, &infos[k]->options);
    const bool backend = device == nullptr;
    Result<DevicePtr> next = device ? infos[k]->open_layer(std::move(device), values, options)
                                    : infos[k]->open_backend(values, options);
    if (!next) {
      Error e = std::move(next).error();
      if (backend && e.code == SystemError(ENOENT))
        e.message += MissingFileHint(infos, k, values, options);
      if (undo) undo();  // the failed layer closed the stack below it
      return e;
    }
    device = std::move(*next);
    if (backend) undo = device->open_undo();
    if (stats[k]) device->PinStatsMode(*stats[k]);
  }
  return device;
}

}  // namespace

Clock& OpenOptions::clock_or_system() const { return clock != nullptr ? *clock : SystemClock(); }

Result<DevicePtr> Open(std::string_view spec, const OpenOptions& options) {
  VSTACK_ASSIGN_OR_RETURN(std::vector<SpecPart> parts, ParseSpec(spec));
  return OpenParts(std::move(parts), /*with_backend=*/true, nullptr, options);
}

Result<DevicePtr> OpenLayers(std::string_view layers, DevicePtr lower,
                             const OpenOptions& options) {
  VSTACK_ASSIGN_OR_RETURN(std::vector<SpecPart> parts, ParseSpec(layers));
  return OpenParts(std::move(parts), /*with_backend=*/false, std::move(lower), options);
}

bool IsStackSpec(std::string_view text) {
  auto parts = ParseSpec(text);
  if (!parts) return false;
  const ComponentInfo* last = Registry::Global().Find(parts->back().name);
  return last != nullptr && last->kind == ComponentKind::kBackend;
}

namespace {

// The one part of "FORMAT:k=v,k=v", checked: the format's component (nullptr for raw) and the
// options against its create_options.
Result<std::pair<SpecPart, const ComponentInfo*>> ResolveCreate(std::string_view format,
                                                                std::string_view options) {
  VSTACK_RETURN_IF_ERROR(RefuseNul(format, Errc::kInvalidArgument, "format"));
  VSTACK_RETURN_IF_ERROR(RefuseNul(options, Errc::kInvalidArgument, "create options string"));
  // Reuse the spec grammar for the option list: "fmt:k=v,k=v".
  std::string text(format);
  if (!options.empty()) text += ":" + std::string(options);
  VSTACK_ASSIGN_OR_RETURN(std::vector<SpecPart> parts, ParseSpec(text));
  if (parts.size() != 1 || !parts[0].positional.empty()) {
    return MakeError(Errc::kInvalidArgument, "invalid create options '" + std::string(options) + "'");
  }
  SpecPart& part = parts[0];
  if (part.name == "raw") {
    if (!part.options.empty()) {
      return MakeError(Errc::kInvalidArgument, "format 'raw' takes no create options");
    }
    return std::make_pair(std::move(part), static_cast<const ComponentInfo*>(nullptr));
  }
  const ComponentInfo* info = Registry::Global().Find(part.name);
  if (info == nullptr || !info->create) {
    const std::vector<std::string> names = CreatableFormats();
    std::string formats;
    for (const std::string& n : names) formats += (formats.empty() ? "" : ", ") + n;
    return MakeError(Errc::kNotFound, "unknown image format '" + part.name +
                                          "'; formats that can be created: " + formats +
                                          DidYouMean(part.name, names));
  }
  for (const SpecOption& o : part.options) {
    const bool known = std::any_of(info->create_options.begin(), info->create_options.end(),
                                   [&](const OptionInfo& d) { return d.name == o.key; });
    if (!known) {
      std::string valid;
      std::vector<std::string> names;
      for (const OptionInfo& d : info->create_options) {
        valid += (valid.empty() ? "" : ", ") + d.name;
        names.push_back(d.name);
      }
      return MakeError(Errc::kInvalidArgument, "unknown create option '" + o.key + "' for '" +
                                                   part.name + "'; valid options: " + valid +
                                                   DidYouMean(o.key, names));
    }
  }
  return std::make_pair(std::move(part), info);
}

// A spec or path holding a NUL byte, refused (RefuseNul): named a spec, Errc::kBadSpec, when
// the text before the NUL is one; a path, Errc::kInvalidArgument, otherwise.
Status RefuseNulInSpecOrPath(std::string_view text) {
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return OkStatus();
  if (IsStackSpec(text.substr(0, nul))) return RefuseNul(text, Errc::kBadSpec, "spec");
  return RefuseNul(text, Errc::kInvalidArgument, "path");
}

}  // namespace

std::vector<std::string> CreatableFormats() {
  std::vector<std::string> formats = {"raw"};
  for (const ComponentInfo* c : Registry::Global().All()) {
    if (c->create) formats.push_back(c->name);
  }
  return formats;
}

Result<DevicePtr> CreateAndOpenImage(std::string_view format, const std::string& path,
                                     uint64_t size, std::string_view options) {
  VSTACK_RETURN_IF_ERROR(RefuseNul(path, Errc::kInvalidArgument, "path"));
  VSTACK_ASSIGN_OR_RETURN(auto resolved, ResolveCreate(format, options));
  const auto& [part, info] = resolved;
  if (info == nullptr) {  // raw: the file itself, created by this open
    if (size == 0) {
      return MakeError(Errc::kInvalidArgument, "a raw image of size 0 cannot be opened");
    }
    // Whole 512-byte sectors, as qemu-img create -f raw makes it: the size the file backend
    // reports (rounded up to its logical block) is then the file's.
    return CreateNewFile(path, (size + 511) / 512 * 512);
  }
  OptionValues values(part.name, "", part.options, &info->create_options);
  VSTACK_ASSIGN_OR_RETURN(DevicePtr file, info->create(path, size, values));
  OptionValues defaults(info->name, "", {}, &info->options);
  Result<DevicePtr> image = info->open_layer(std::move(file), defaults, OpenOptions{});
  if (!image) ::unlink(path.c_str());  // the layer closed the file it was given
  return image;
}

Status CreateImage(std::string_view format, const std::string& path, uint64_t size,
                   std::string_view options) {
  VSTACK_RETURN_IF_ERROR(RefuseNul(path, Errc::kInvalidArgument, "path"));
  if (size == 0 && format == "raw" && options.empty()) {  // an empty file, which no open accepts
    const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int err = errno;
      return MakeError(SystemError(err), "cannot create '" + path + "': " + SystemError(err).message());
    }
    ::close(fd);
    return OkStatus();
  }
  VSTACK_ASSIGN_OR_RETURN(DevicePtr image, CreateAndOpenImage(format, path, size, options));
  return image->Close();
}

Status CheckSpecNames(std::string_view spec_or_path) {
  VSTACK_RETURN_IF_ERROR(RefuseNulInSpecOrPath(spec_or_path));
  const std::string path(spec_or_path);
  struct stat st;
  if (!IsStackSpec(spec_or_path) && ::stat(path.c_str(), &st) == 0) return OkStatus();
  auto parts = ParseSpec(spec_or_path);
  if (!parts) {  // as OpenImage: an error only for text that starts with a component's name
    const size_t name_end = path.find_first_of(":+");
    const bool meant = name_end != std::string::npos &&
                       Registry::Global().Find(path.substr(0, name_end)) != nullptr;
    return meant ? Status(std::move(parts).error()) : OkStatus();
  }
  for (size_t i = 0; i < parts->size(); ++i) {
    VSTACK_RETURN_IF_ERROR(Resolve((*parts)[i], i + 1 == parts->size()));
    VSTACK_RETURN_IF_ERROR(TakeStatsOption((*parts)[i]));
  }
  return OkStatus();
}

Result<DevicePtr> OpenImage(std::string_view spec_or_path, const OpenOptions& options,
                            std::string* chosen_spec) {
  VSTACK_RETURN_IF_ERROR(RefuseNulInSpecOrPath(spec_or_path));
  if (IsStackSpec(spec_or_path)) {
    if (chosen_spec) *chosen_spec = std::string(spec_or_path);
    return Open(spec_or_path, options);
  }
  const std::string path(spec_or_path);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    // Text that parses as a spec of several parts or with options, or that starts with a
    // component's name, was meant as one: explain what is wrong with it, not that no such
    // file exists. Another lone word ("disk", "old.img") is a file name.
    const size_t name_end = path.find_first_of(":+");
    auto parts = ParseSpec(spec_or_path);
    const bool names_component = Registry::Global().Find(path.substr(0, name_end)) != nullptr;
    if (parts && (name_end != std::string::npos || names_component)) {
      return Open(spec_or_path, options).error();
    }
    if (name_end != std::string::npos &&
        Registry::Global().Find(path.substr(0, name_end)) != nullptr) {
      return std::move(parts).error();
    }
    return MakeError(SystemError(err), "cannot open '" + path + "': " + SystemError(err).message());
  }
  SpecPart file_part{"file", path, {}};
  const std::string file_spec = FormatSpecPart(file_part);
  VSTACK_ASSIGN_OR_RETURN(DevicePtr device, Open(file_spec, options));
  std::vector<ProbeSignature> signatures;
  for (const ComponentInfo* c : Registry::Global().All()) {
    if (!c->probe) continue;
    const ProbeDetails* details = FindProbeDetails(c->name);
    if (details != nullptr) {
      signatures.insert(signatures.end(), details->signatures.begin(), details->signatures.end());
    }
    bool take = c->probe(*device);
    if (!take && details != nullptr && details->problem) {
      const std::string problem = details->problem(*device);
      if (!problem.empty()) {
        // Inspection may look at it as that format, to say what is wrong.
        take = options.for_check && options.read_only;
        if (!take) {
          const std::string named = c->name + "+" + file_spec;
          // A repair does not guess a format from an invalid structure: it needs it named.
          const std::string next =
              options.for_check
                  ? "a repair needs the format named: give '" + named + "' to `vstack check -r`"
                  : "name the format: '" + named + "' (`vstack check` it), or '" + file_spec +
                        "' to open it raw";
          return MakeError(Errc::kCorruption, "'" + path + "' looks like a " + c->name +
                                                  " image but is not a valid one (" + problem +
                                                  "); " + next);
        }
      }
    }
    if (!take) continue;
    if (chosen_spec) *chosen_spec = c->name + "+" + file_spec;
    OptionValues values(c->name, "", {}, &c->options);
    return c->open_layer(std::move(device), values, options);
  }
  // No format of vstack's took it: one vstack does not read would be misread as raw bytes,
  // and a guest writing it would destroy that image.
  if (const ProbeSignature* foreign = FindForeignFormat(*device)) {
    return MakeError(Errc::kNotSupported,
                     "'" + path + "' is a " + foreign->format + " image (its signature at offset " +
                         std::to_string(foreign->offset) +
                         "), which vstack does not read: convert it first (e.g. `qemu-img "
                         "convert -O vpc -o subformat=dynamic " +
                         path + " disk.vhd`), or name '" + file_spec + "' to use its bytes as raw");
  }
  const std::vector<ProbeSignature>& foreign = ForeignFormatSignatures();
  signatures.insert(signatures.end(), foreign.begin(), foreign.end());
  if (chosen_spec) *chosen_spec = file_spec;
  if (options.read_only) return device;
  // Probed as raw: keep it raw (guest writes must not change what the next open probes).
  return GuardProbedRaw(std::move(device), std::move(signatures));
}

}  // namespace vstack
