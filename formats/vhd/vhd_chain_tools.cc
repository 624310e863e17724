#include "formats/vhd/vhd_chain_tools.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "formats/vhd/vhd_chain.h"
#include "formats/vhd/vhd_parent.h"
#include "lib/aligned_buffer.h"
#include "lib/registry.h"
#include "lib/spec.h"
#include "lib/sync_io.h"

namespace vstack::vhd {
namespace {

constexpr uint64_t kChunk = 1 << 20;

std::string FileSpec(const std::string& prefix, const std::string& path) {
  return prefix + FormatSpecPart(SpecPart{"file", path, {}});
}

Error IoError(std::error_code ec, const std::string& what, uint64_t offset) {
  return MakeError(ec, "vhd: " + what + " at offset " + std::to_string(offset) + ": " +
                           ec.message());
}

// Reads `buf` at `offset` through `io`. Errors: IoError naming `what` and the lowest offset that
// fails (a chunk that fails is read again in smaller pieces to find it).
Status ReadAt(SyncIo& io, uint64_t offset, std::span<std::byte> buf, const std::string& what) {
  std::error_code ec = io.Read(offset, buf);
  if (!ec) return OkStatus();
  const FailedRead at = io.LowestFailedRead(offset, buf, ec);
  return IoError(at.error, what, at.offset);
}

// Counts bytes done of a fixed total and reports each step to a ChainProgress (if any).
class ProgressCounter {
 public:
  ProgressCounter(const ChainProgress& progress, uint64_t total)
      : progress_(progress), total_(total) {}
  void Add(uint64_t n) {
    done_ += n;
    if (progress_) progress_(done_, total_);
  }
  uint64_t done() const { return done_; }

 private:
  const ChainProgress& progress_;
  const uint64_t total_;
  uint64_t done_ = 0;
};

bool Stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(); }

Error Cancelled() { return MakeError(Errc::kCancelled, "interrupted"); }

// Copies [offset, offset + length) from `from` to `to`, through `buf`, counting each chunk;
// fails with Errc::kCancelled before a chunk once `stop` is set.
Status Copy(SyncIo& from, SyncIo& to, uint64_t offset, uint64_t length, AlignedBuffer& buf,
            ProgressCounter& counter, const std::atomic<bool>* stop) {
  for (uint64_t done = 0; done < length;) {
    if (Stopped(stop)) return Cancelled();
    const uint64_t n = std::min<uint64_t>(kChunk, length - done);
    std::span<std::byte> s = buf.span().first(static_cast<size_t>(n));
    VSTACK_RETURN_IF_ERROR(ReadAt(from, offset + done, s, "read"));
    if (std::error_code ec = to.Write(offset + done, s)) return IoError(ec, "write", offset + done);
    done += n;
    counter.Add(n);
  }
  return OkStatus();
}

// The differencing VhdDevice on top of `dev`, or an error naming `path`.
Result<const VhdDevice*> Differencing(const BlockDevice& dev, const std::string& path) {
  const auto* vhd = dynamic_cast<const VhdDevice*>(&dev);
  if (vhd == nullptr || !vhd->image().footer.is_differencing()) {
    return MakeError(Errc::kInvalidArgument, "'" + path + "' is not a differencing VHD");
  }
  return vhd;
}

// Rewrites the child's header and locators to point at the parent whose footer is `parent`.
Status RewriteLink(const std::string& child_path, const std::string& parent_path,
                   const Footer& parent) {
  VSTACK_ASSIGN_OR_RETURN(DevicePtr file, Open(FileSpec("", child_path)));
  VSTACK_ASSIGN_OR_RETURN(VhdImage img, LoadImage(*file, /*lenient=*/false));
  if (!img.footer.is_differencing()) {  // rebase -u alone gets here without Differencing()
    return MakeError(Errc::kInvalidArgument, "'" + child_path + "' is not a differencing VHD");
  }
  const NewParentLink link = MakeParentLink(parent_path, child_path, parent);
  DynamicHeader h = img.header;
  // The existing locator slots (data inside the file), largest first, receive the new paths.
  std::vector<size_t> slots;
  for (size_t i = 0; i < h.locators.size(); ++i) {
    const ParentLocator& l = h.locators[i];
    if (l.platform_code != 0 && l.data_offset % kSectorSize == 0 &&
        l.data_offset >= kFooterSize && l.data_offset <= img.footer_offset &&
        LocatorSpaceBytes(l) <= img.footer_offset - l.data_offset) {
      slots.push_back(i);
    }
  }
  std::sort(slots.begin(), slots.end(), [&](size_t a, size_t b) {
    return LocatorSpaceBytes(h.locators[a]) > LocatorSpaceBytes(h.locators[b]);
  });
  std::array<ParentLocator, 8> fresh{};
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> writes;
  std::vector<bool> used(h.locators.size(), false);
  for (const NewParentLink::Entry& e : link.entries) {
    const uint64_t need = (e.data.size() + kSectorSize - 1) / kSectorSize * kSectorSize;
    bool placed = false;
    for (size_t i : slots) {
      const uint64_t space = LocatorSpaceBytes(h.locators[i]);
      if (used[i] || space < need) continue;
      used[i] = true;
      fresh[i] = ParentLocator{e.code, static_cast<uint32_t>(space),
                               static_cast<uint32_t>(e.data.size()), h.locators[i].data_offset};
      std::vector<uint8_t> data = e.data;
      data.resize(space, 0);
      writes.emplace_back(h.locators[i].data_offset, std::move(data));
      placed = true;
      break;
    }
    if (!placed && e.code != kLocatorMacX) {
      return MakeError(Errc::kNoSpace,
                       "vhd: the new parent path (" + std::to_string(e.data.size()) +
                           " bytes as " + LocatorCodeName(e.code) +
                           ") does not fit in the child's parent-locator space");
    }
  }
  h.locators = fresh;
  h.parent_uuid = link.uuid;
  h.parent_timestamp = link.timestamp;
  h.parent_name = link.name;
  std::optional<SyncIo> io_holder(std::in_place, *file);
  SyncIo& io = *io_holder;
  for (const auto& [at, data] : writes) {
    AlignedBuffer buf(data.size(), 4096);
    std::memcpy(buf.data(), data.data(), data.size());
    if (std::error_code ec = io.Write(at, buf.span())) return IoError(ec, "locator write", at);
  }
  if (std::error_code ec = io.Flush()) return IoError(ec, "flush", 0);
  AlignedBuffer header(kHeaderSize, 4096);
  SerializeHeader(h, std::span<uint8_t, kHeaderSize>(reinterpret_cast<uint8_t*>(header.data()),
                                                      kHeaderSize));
  const uint64_t at = img.footer.data_offset;
  if (std::error_code ec = io.Write(at, header.span())) return IoError(ec, "header write", at);
  if (std::error_code ec = io.Flush()) return IoError(ec, "flush", 0);
  io_holder.reset();
  return file->Close();
}

}  // namespace

std::vector<const VhdDevice*> ChainLevels(const BlockDevice& top) {
  std::vector<const VhdDevice*> out;
  for (const auto* v = dynamic_cast<const VhdDevice*>(&top); v != nullptr;
       v = v->parent() != nullptr ? dynamic_cast<const VhdDevice*>(v->parent()) : nullptr) {
    out.push_back(v);
  }
  return out;
}

std::string ParentLoop(const std::string& image_path, const BlockDevice& parent) {
  auto shown = [](const std::string& path) {
    return std::filesystem::path(path).lexically_normal().string();
  };
  const std::string self = FileIdentity(image_path);
  std::string loop = shown(image_path);
  for (const VhdDevice* level : ChainLevels(parent)) {
    const std::string path = level->lower() ? DevicePath(*level->lower()) : "";
    if (path.empty()) return "";
    if (FileIdentity(path) == self) return loop + " -> " + shown(image_path);
    loop += " -> " + shown(path);
  }
  return "";
}

Status MapLevels(const std::vector<const VhdDevice*>& levels, uint64_t offset, uint64_t length,
                 std::vector<LevelExtent>* out) {
  // Level by level: what a level does not hold is asked of the next one (within its size).
  struct Todo {
    size_t level;
    uint64_t offset, length;
  };
  std::vector<LevelExtent> found;
  std::vector<Todo> todo = {{0, offset, length}};
  while (!todo.empty()) {
    const Todo t = todo.back();
    todo.pop_back();
    if (t.level >= levels.size()) {
      found.push_back({t.offset, t.length, kExtentHole | kExtentZero, -1});
      continue;
    }
    const VhdDevice& dev = *levels[t.level];
    const uint64_t size = dev.geometry().size_bytes;
    const uint64_t inside = t.offset < size ? std::min(t.length, size - t.offset) : 0;
    if (inside < t.length) {
      found.push_back({t.offset + inside, t.length - inside, kExtentHole | kExtentZero, -1});
    }
    if (inside == 0) continue;
    std::vector<Extent> own;
    VSTACK_RETURN_IF_ERROR(const_cast<VhdDevice&>(dev).MapOwnExtents(t.offset, inside, &own));
    const bool last = t.level + 1 == levels.size();
    for (const Extent& e : own) {
      if (e.flags == 0 || (last && dev.image().footer.is_fixed())) {
        found.push_back({e.offset, e.length, e.flags, static_cast<int>(t.level)});
      } else if (!dev.image().footer.is_differencing()) {
        found.push_back({e.offset, e.length, e.flags, e.flags & kExtentHole ? -1 : int(t.level)});
      } else {
        todo.push_back({t.level + 1, e.offset, e.length});
      }
    }
  }
  std::sort(found.begin(), found.end(),
            [](const LevelExtent& a, const LevelExtent& b) { return a.offset < b.offset; });
  for (const LevelExtent& e : found) {
    if (!out->empty() && out->back().offset + out->back().length == e.offset &&
        out->back().flags == e.flags && out->back().level == e.level) {
      out->back().length += e.length;
    } else {
      out->push_back(e);
    }
  }
  return OkStatus();
}

Result<uint64_t> CommitImage(const std::string& child_path, const ChainProgress& progress,
                             const std::atomic<bool>* stop) {
  uint64_t bytes = 0;
  OpenOptions ro;
  ro.read_only = true;
  std::string parent_path;
  {
    VSTACK_ASSIGN_OR_RETURN(DevicePtr chain, Open(FileSpec("vhd+", child_path), ro));
    VSTACK_ASSIGN_OR_RETURN(const VhdDevice* vhd, Differencing(*chain, child_path));
    parent_path = DevicePath(*vhd->parent()->lower());
    if (parent_path.empty()) {
      return MakeError(Errc::kInvalidArgument, "vhd: the parent of '" + child_path +
                                                   "' is not a file; commit needs one");
    }
  }
  VSTACK_ASSIGN_OR_RETURN(DevicePtr child, Open(FileSpec("vhd:parent=none+", child_path), ro));
  VSTACK_ASSIGN_OR_RETURN(DevicePtr parent, Open(FileSpec("vhd+", parent_path)));
  std::vector<Extent> extents;
  VSTACK_RETURN_IF_ERROR(child->MapExtents(0, child->geometry().size_bytes, &extents));
  const uint64_t parent_size = parent->geometry().size_bytes;
  uint64_t total = 0;
  for (const Extent& e : extents) {
    if (e.flags == 0) total += e.length;
    if (e.flags == 0 && e.offset + e.length > parent_size) {
      return MakeError(Errc::kNoSpace, "vhd: the child holds data at offset " +
                                           std::to_string(e.offset) + ", past the end of its " +
                                           std::to_string(parent_size) + "-byte parent '" +
                                           parent_path + "' (vstack does not resize VHDs)");
    }
  }
  // A copy that fails part way (a full disk, a read error) loses nothing: the child is only
  // read, and what reached the parent is the child's own data, which the child still shows over
  // it. The message says so, and what to do.
  ProgressCounter counter(progress, total);
  const auto interrupted = [&](Error e) {
    e.message = e.ToString() + " (committing into the parent '" + parent_path + "'). The " +
                "commit stopped after " + std::to_string(counter.done()) + " of " +
                std::to_string(total) +
                " bytes and nothing is lost: '" + child_path +
                "' is unchanged and the chain reads as before. Run the commit again once the " +
                "cause is gone; `vstack compact` on the parent afterwards gives back the room it " +
                "reserved for the blocks (a full disk leaves it in the file as a hole)";
    return e;
  };
  bool cancelled = false;
  {
    SyncIo from(*child), to(*parent);
    AlignedBuffer buf(kChunk, 4096);
    for (const Extent& e : extents) {
      if (e.flags != 0) continue;
      if (Status s = Copy(from, to, e.offset, e.length, buf, counter, stop); !s) {
        if (s.error().code != make_error_code(Errc::kCancelled)) return interrupted(s.error());
        cancelled = true;
        break;
      }
      bytes += e.length;
    }
    if (std::error_code ec = to.Flush()) return interrupted(IoError(ec, "flush of the parent", 0));
  }
  // Asked to stop: the parent is closed as after a whole commit (its unused reservation given
  // back), so that it checks clean, and the copy so far stays in it.
  if (Status s = parent->Close(); !s) return interrupted(s.error());
  if (cancelled) {
    return MakeError(Errc::kCancelled,
                     "vhd: interrupted after " + std::to_string(counter.done()) + " of " +
                         std::to_string(total) + " bytes committed into the parent '" +
                         parent_path + "'; nothing is lost: '" + child_path +
                         "' is unchanged and the chain reads as before. Run the commit again to "
                         "finish it");
  }
  VSTACK_RETURN_IF_ERROR(child->Close());
  return bytes;
}

Result<uint64_t> RebaseImage(const std::string& child_path, const std::string& new_parent_path,
                             bool unsafe, const ChainProgress& progress,
                             const std::atomic<bool>* stop) {
  namespace fs = std::filesystem;
  uint64_t bytes = 0;
  fs::path np(new_parent_path);
  if (np.is_relative()) {
    const fs::path dir = fs::path(child_path).parent_path();
    np = (dir.empty() ? fs::path(".") : dir) / np;
  }
  OpenOptions ro;
  ro.read_only = true;
  VSTACK_ASSIGN_OR_RETURN(DevicePtr parent, Open(FileSpec("vhd+", np.string()), ro));
  if (const std::string loop = ParentLoop(child_path, *parent); !loop.empty()) {
    return MakeError(Errc::kInvalidArgument,
                     "vhd: '" + new_parent_path + "' cannot be the parent of '" + child_path +
                         "': its chain holds '" + child_path + "', so the chain would loop (" +
                         loop + "); '" + child_path + "' is left as it was");
  }
  const Footer parent_footer = static_cast<const VhdDevice&>(*parent).image().footer;
  if (!unsafe) {
    VSTACK_ASSIGN_OR_RETURN(DevicePtr child, Open(FileSpec("vhd+", child_path)));
    VSTACK_ASSIGN_OR_RETURN(const VhdDevice* vhd, Differencing(*child, child_path));
    std::vector<Extent> own;
    VSTACK_RETURN_IF_ERROR(
        const_cast<VhdDevice*>(vhd)->MapOwnExtents(0, child->geometry().size_bytes, &own));
    std::optional<SyncIo> old_io_holder(std::in_place, *child), new_io_holder(std::in_place, *parent);
    SyncIo& old_io = *old_io_holder;
    SyncIo& new_io = *new_io_holder;
    AlignedBuffer a(kChunk, 4096), b(kChunk, 4096);
    const uint64_t new_size = parent->geometry().size_bytes;
    uint64_t total = 0;
    for (const Extent& e : own) total += e.flags == 0 ? 0 : e.length;
    ProgressCounter counter(progress, total);
    // Copies what differs; Errc::kCancelled once asked to stop.
    const auto copy = [&]() -> Status {
      for (const Extent& e : own) {
        if (e.flags == 0) continue;  // the child's own data stays
        for (uint64_t pos = e.offset; pos < e.offset + e.length;) {
          if (Stopped(stop)) return Cancelled();
          const uint64_t n = std::min<uint64_t>(kChunk, e.offset + e.length - pos);
          auto sa = a.span().first(static_cast<size_t>(n));
          auto sb = b.span().first(static_cast<size_t>(n));
          VSTACK_RETURN_IF_ERROR(ReadAt(old_io, pos, sa, "read"));
          std::memset(sb.data(), 0, sb.size());
          const uint64_t in_new = pos < new_size ? std::min(n, new_size - pos) : 0;
          if (in_new > 0) {
            VSTACK_RETURN_IF_ERROR(ReadAt(new_io, pos, sb.first(static_cast<size_t>(in_new)),
                                          "read of the new parent"));
          }
          // Write the differing sectors, in runs.
          for (uint64_t s = 0; s < n;) {
            if (std::memcmp(sa.data() + s, sb.data() + s, kSectorSize) == 0) {
              s += kSectorSize;
              continue;
            }
            uint64_t t = s + kSectorSize;
            while (t < n && std::memcmp(sa.data() + t, sb.data() + t, kSectorSize) != 0) {
              t += kSectorSize;
            }
            if (std::error_code ec = old_io.Write(pos + s, sa.subspan(s, t - s))) {
              return IoError(ec, "write", pos + s);
            }
            bytes += t - s;
            s = t;
          }
          pos += n;
          counter.Add(n);
        }
      }
      if (std::error_code ec = old_io.Flush()) return IoError(ec, "flush", 0);
      return OkStatus();
    };
    Status copied = copy();
    old_io_holder.reset();
    new_io_holder.reset();
    // Stopped (asked to, or by an error), the child is closed as after a whole copy (its
    // unused reservation given back, if there is room to move its footer) with its old link:
    // what was copied into it is what the old chain shows there, so it reads as before.
    Status closed = child->Close();
    if (copied && !closed) copied = closed;
    if (!copied) {
      const std::string how_far =
          std::to_string(counter.done()) + " of " + std::to_string(total) + " bytes compared";
      if (copied.error().code == make_error_code(Errc::kCancelled)) {
        return MakeError(Errc::kCancelled, "vhd: interrupted after " + how_far + "; '" +
                                               child_path +
                                               "' keeps its old parent and reads as before. Run "
                                               "the rebase again to finish it");
      }
      Error e = copied.error();
      e.message = e.ToString() + " (rebasing '" + child_path + "' onto '" + new_parent_path +
                  "'). The rebase stopped after " + how_far + " and nothing is lost: '" +
                  child_path +
                  "' keeps its old parent and reads as before. Run the rebase again once the "
                  "cause is gone; `vstack compact` on the child afterwards gives back the room "
                  "it reserved for new blocks (a full disk leaves it in the file as a hole)";
      return e;
    }
  }
  VSTACK_RETURN_IF_ERROR(parent->Close());
  VSTACK_RETURN_IF_ERROR(RewriteLink(child_path, np.string(), parent_footer));
  return bytes;
}

}  // namespace vstack::vhd
