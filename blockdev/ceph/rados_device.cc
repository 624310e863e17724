#include "blockdev/ceph/rados_device.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "blockdev/ceph/ceph_queue.h"
#include "lib/size.h"

namespace vstack::ceph {
namespace {

constexpr char kHeaderMagic[] = "vstack-rados v1";

// One asynchronous RADOS operation: a read, write, remove or zero on one object.
struct Piece {
  CephQueue::Pending* pending;
  Op op;
  char* buf = nullptr;  // reads: zero-filled where the object has no data
  size_t len = 0;
  rados_write_op_t write_op = nullptr;
};

class RadosQueue final : public CephQueue {
 public:
  explicit RadosQueue(RadosDevice& dev) : CephQueue(dev), dev_(dev), io_(dev.io()) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    for (IoRequest* r : batch) {
      switch (r->op) {
        case Op::kRead:
        case Op::kWrite:
          SubmitData(*r);
          break;
        case Op::kFlush:
          Issued(Start(*r, 0));
          break;  // writes are durable on completion
        case Op::kDiscard:
        case Op::kWriteZeroes:
          SubmitZero(*r);
          break;
      }
    }
  }

 private:
  // Pieces of a read or write: one per (object, iovec) pair.
  void SubmitData(IoRequest& r) {
    const uint64_t osize = dev_.object_size();
    uint32_t count = 0;
    ForEachPiece(r, osize, [&](uint64_t, uint64_t, char*, size_t) { ++count; });
    Pending* p = Start(r, count);
    ForEachPiece(r, osize, [&](uint64_t obj, uint64_t off, char* buf, size_t len) {
      Piece* piece = new Piece{p, r.op, buf, len};
      rados_completion_t c = nullptr;
      int rc = rados_aio_create_completion2(piece, &OnDone, &c);
      if (rc == 0) {
        const std::string oid = dev_.ObjectName(obj);
        rc = r.op == Op::kRead ? rados_aio_read(io_, oid.c_str(), c, buf, len, off)
                               : rados_aio_write(io_, oid.c_str(), c, buf, len, off);
      }
      if (rc < 0) Fail(piece, c, rc);
    });
    Issued(p);
  }

  // Whole objects are removed, parts of objects zeroed.
  void SubmitZero(IoRequest& r) {
    const uint64_t osize = dev_.object_size();
    const uint64_t end = r.offset + r.length;
    const uint32_t count = static_cast<uint32_t>((end - 1) / osize - r.offset / osize + 1);
    Pending* p = Start(r, count);
    for (uint64_t pos = r.offset; pos < end;) {
      const uint64_t obj = pos / osize;
      const uint64_t off = pos % osize;
      const uint64_t len = std::min(osize - off, end - pos);
      Piece* piece = new Piece{p, r.op};
      piece->write_op = rados_create_write_op();
      if (len == osize) {
        rados_write_op_remove(piece->write_op);
      } else {
        rados_write_op_zero(piece->write_op, off, len);
      }
      rados_completion_t c = nullptr;
      int rc = rados_aio_create_completion2(piece, &OnDone, &c);
      if (rc == 0) {
        rc = rados_aio_write_op_operate(piece->write_op, io_, c, dev_.ObjectName(obj).c_str(),
                                        nullptr, 0);
      }
      if (rc < 0) Fail(piece, c, rc);
      pos += len;
    }
    Issued(p);
  }

  template <typename F>
  static void ForEachPiece(const IoRequest& r, uint64_t osize, F&& f) {
    uint64_t pos = r.offset;
    for (uint32_t i = 0; i < r.iovcnt; ++i) {
      char* base = static_cast<char*>(r.iov[i].iov_base);
      for (size_t done = 0; done < r.iov[i].iov_len;) {
        const uint64_t off = pos % osize;
        const size_t len =
            static_cast<size_t>(std::min<uint64_t>(osize - off, r.iov[i].iov_len - done));
        f(pos / osize, off, base + done, len);
        done += len;
        pos += len;
      }
    }
  }

  static void Fail(Piece* piece, rados_completion_t c, int rc) {
    if (c) rados_aio_release(c);
    Pending* p = piece->pending;
    if (piece->write_op) rados_release_write_op(piece->write_op);
    delete piece;
    PieceDone(p, rc);
  }

  static void OnDone(rados_completion_t c, void* arg) {
    auto* piece = static_cast<Piece*>(arg);
    int rc = rados_aio_get_return_value(c);
    rados_aio_release(c);
    if (piece->op == Op::kRead) {
      // A missing object, or the part past its end, is a hole: zeros.
      const size_t got = rc == -ENOENT ? 0 : rc > 0 ? static_cast<size_t>(rc) : 0;
      if (rc >= 0 || rc == -ENOENT) {
        std::memset(piece->buf + got, 0, piece->len - std::min(got, piece->len));
        rc = 0;
      }
    } else if (rc == -ENOENT && piece->write_op != nullptr) {
      rc = 0;  // zeroing or removing an object that does not exist
    }
    if (piece->write_op) rados_release_write_op(piece->write_op);
    Pending* p = piece->pending;
    delete piece;
    PieceDone(p, rc < 0 ? rc : 0);
  }

  RadosDevice& dev_;
  rados_ioctx_t io_;
};

// "POOL" or "POOL/PREFIX".
std::pair<std::string, std::string> ParsePoolPrefix(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos) return {text, "vstack"};
  return {text.substr(0, slash), text.substr(slash + 1)};
}

Error BadSpec(const std::string& why) { return MakeError(Errc::kInvalidArgument, "rados: " + why); }

// The header object: "vstack-rados v1 size=N object_size=M\n".
Result<std::pair<uint64_t, uint64_t>> ReadHeader(rados_ioctx_t io, const std::string& oid,
                                                 const std::string& where) {
  char buf[256] = {};
  const int rc = rados_read(io, oid.c_str(), buf, sizeof(buf) - 1, 0);
  if (rc == -ENOENT) {
    return MakeError(Errc::kNotFound, "rados: no device at " + where + " (header object '" + oid +
                                          "' is missing; create one with create=on,size=)");
  }
  if (rc < 0) return RadosError("rados", "reading header object '" + oid + "'", rc);
  unsigned long long size = 0, osize = 0;
  if (std::sscanf(buf, "vstack-rados v1 size=%llu object_size=%llu", &size, &osize) != 2 ||
      size == 0 || size % 512 != 0 || osize < 4096 || (osize & (osize - 1)) != 0 ||
      osize > (1u << 30)) {
    return MakeError(Errc::kCorruption, "rados: header object '" + oid + "' of " + where +
                                            " is not a vstack rados header");
  }
  return std::make_pair(static_cast<uint64_t>(size), static_cast<uint64_t>(osize));
}

// Removes the device PREFIX of `pool`: its data objects ("PREFIX." and 16 hex digits), found by
// listing the pool (the failure path of an open: a device just created holds what the layers
// below the one that failed wrote), then its header.
Status RemoveDevice(const Cluster& cluster, const std::string& pool, const std::string& prefix) {
  VSTACK_ASSIGN_OR_RETURN(rados_ioctx_t io, cluster.OpenPool(pool));
  std::vector<std::string> objects;
  rados_list_ctx_t list = nullptr;
  int rc = rados_nobjects_list_open(io, &list);
  if (rc == 0) {
    const char* name = nullptr;
    while (rados_nobjects_list_next(list, &name, nullptr, nullptr) == 0) {
      const std::string_view n(name);
      const bool data =
          n.size() == prefix.size() + 17 && n.starts_with(prefix) && n[prefix.size()] == '.' &&
          n.find_first_not_of("0123456789abcdef", prefix.size() + 1) == std::string_view::npos;
      if (data) objects.emplace_back(n);
    }
    rados_nobjects_list_close(list);
  }
  objects.push_back(prefix + ".header");
  for (const std::string& o : objects) {
    const int r = rados_remove(io, o.c_str());
    if (r < 0 && r != -ENOENT && rc == 0) rc = r;
  }
  rados_ioctx_destroy(io);
  if (rc < 0) return RadosError("rados", "removing '" + pool + "/" + prefix + "'", rc);
  return OkStatus();
}

Result<DevicePtr> OpenRados(const OptionValues& o, const OpenOptions& open) {
  const auto [pool, prefix] = ParsePoolPrefix(o.positional());
  if (pool.empty() || prefix.empty() || prefix.find('/') != std::string::npos) {
    return BadSpec("expected POOL or POOL/PREFIX, got '" + o.positional() + "'");
  }
  VSTACK_ASSIGN_OR_RETURN(ConnectParams cp, ParseConnectParams(o));
  VSTACK_ASSIGN_OR_RETURN(bool create, o.Bool("create"));
  if (create != o.Has("size")) return BadSpec("create=on and size= go together");
  if (create && open.read_only) return BadSpec("cannot create a device read-only");
  VSTACK_ASSIGN_OR_RETURN(uint64_t osize, o.Size("object_size"));
  if (osize < 4096 || osize > (1u << 30) || (osize & (osize - 1)) != 0) {
    return BadSpec("object_size must be a power of two from 4K to 1G");
  }
  VSTACK_ASSIGN_OR_RETURN(std::shared_ptr<Cluster> cluster, Cluster::Connect("rados", cp));
  VSTACK_ASSIGN_OR_RETURN(PoolFacts facts, cluster->Pool(pool));
  if (!open.read_only) VSTACK_RETURN_IF_ERROR(cluster->RequireOverwrites(facts));
  VSTACK_ASSIGN_OR_RETURN(rados_ioctx_t io, cluster->OpenPool(pool));
  const std::string where = "rados:" + pool + "/" + prefix;
  const std::string header = prefix + ".header";
  uint64_t size = 0;
  if (create) {
    VSTACK_ASSIGN_OR_RETURN(size, o.Size("size"));
    if (size == 0 || size % 512 != 0) {
      rados_ioctx_destroy(io);
      return BadSpec("size must be a positive multiple of 512");
    }
    char text[128];
    const int n = std::snprintf(text, sizeof(text), "%s size=%" PRIu64 " object_size=%" PRIu64 "\n",
                                kHeaderMagic, size, osize);
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
    rados_write_op_write_full(op, text, static_cast<size_t>(n));
    const int rc = rados_write_op_operate(op, io, header.c_str(), nullptr, 0);
    rados_release_write_op(op);
    if (rc < 0) {
      rados_ioctx_destroy(io);
      if (rc == -EEXIST) return BadSpec(where + " already exists (drop create=on)");
      return RadosError("rados", "creating header object '" + header + "'", rc);
    }
  } else {
    Result<std::pair<uint64_t, uint64_t>> h = ReadHeader(io, header, where);
    if (!h) {
      rados_ioctx_destroy(io);
      return h.error();
    }
    if (o.Has("object_size") && h->second != osize) {
      rados_ioctx_destroy(io);
      return BadSpec(where + " has object_size " + std::to_string(h->second) + ", not " +
                     std::to_string(osize));
    }
    size = h->first;
    osize = h->second;
  }
  Geometry g;
  g.size_bytes = size;
  g.logical_block = 512;
  g.physical_block = std::max<uint32_t>(512, facts.stripe_width);
  g.optimal_transfer = static_cast<uint32_t>(osize);
  return MakeDevice<RadosDevice>(std::move(cluster), io, pool, prefix, g, facts, open.read_only,
                                 create);
}

ComponentInfo RadosComponent() {
  return BackendComponent(
      "rados",
      "fixed-size RADOS objects via librados (asynchronous), missing objects read as zeros",
      "POOL[/PREFIX]",
      JoinOptions(ConnectOptionInfos(),
                  {{"object_size", "bytes per object, a power of two (4K..1G)", "4M"},
                   {"create", "create the device (fails if its header exists)", "off"},
                   {"size", "virtual size of a new device (with create=on)", ""}}),
      OpenRados);
}

}  // namespace

RadosDevice::RadosDevice(std::shared_ptr<Cluster> cluster, rados_ioctx_t io, std::string pool,
                         std::string prefix, Geometry geometry, PoolFacts facts, bool read_only,
                         bool created)
    : BlockDevice("rados", geometry,
                  kCapRead | kCapFlush | kCapExtents | kCapPersistent | kCapThreadSafe |
                      (read_only ? 0
                                 : kCapWrite | kCapFua | kCapDiscard | kCapDiscardZeroes |
                                       kCapWriteZeroes | kCapFastZeroes)),
      cluster_(std::move(cluster)),
      io_(io),
      pool_(std::move(pool)),
      prefix_(std::move(prefix)),
      facts_(std::move(facts)),
      created_(created) {}

std::function<void()> RadosDevice::open_undo() const {
  if (!created_) return {};
  return [cluster = cluster_, pool = pool_, prefix = prefix_] {
    (void)RemoveDevice(*cluster, pool, prefix);
  };
}

RadosDevice::~RadosDevice() { (void)DoClose(); }

std::string RadosDevice::ObjectName(uint64_t index) const {
  char suffix[24];
  std::snprintf(suffix, sizeof(suffix), ".%016" PRIx64, index);
  return prefix_ + suffix;
}

std::string RadosDevice::Describe() const {
  return "rados " + pool_ + "/" + prefix_ + " (" + FormatSize(size_bytes()) + " in " +
         FormatSize(object_size()) + " objects, " + (facts_.erasure ? "EC" : "replicated") +
         " pool)";
}

void RadosDevice::Properties(PropertyList& out) const {
  out.push_back({"pool", pool_, ""});
  out.push_back({"prefix", prefix_, ""});
  out.push_back({"pool_type", std::string(facts_.erasure ? "erasure" : "replicated"), ""});
  out.push_back({"pool_size", static_cast<uint64_t>(facts_.size), ""});
  out.push_back({"object_size", object_size(), "bytes"});
  if (facts_.erasure) {
    out.push_back({"stripe_width", static_cast<uint64_t>(facts_.stripe_width), "bytes"});
  }
}

Status RadosDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  const uint64_t osize = object_size();
  const uint64_t end = offset + length;
  for (uint64_t pos = offset; pos < end;) {
    const uint64_t obj = pos / osize;
    const uint64_t obj_start = obj * osize;
    const uint64_t piece_end = std::min(obj_start + osize, end);
    uint64_t have = 0;
    time_t mtime;
    const int rc = rados_stat(io_, ObjectName(obj).c_str(), &have, &mtime);
    if (rc < 0 && rc != -ENOENT) {
      return RadosError("rados", "stat of object '" + ObjectName(obj) + "'", rc);
    }
    const uint64_t data_end = rc == -ENOENT ? obj_start : std::min(obj_start + have, piece_end);
    if (data_end > pos) AppendExtent(out, pos, data_end - pos, 0);
    const uint64_t hole_start = std::max(data_end, pos);
    if (piece_end > hole_start) {
      AppendExtent(out, hole_start, piece_end - hole_start, kExtentHole | kExtentZero);
    }
    pos = piece_end;
  }
  return OkStatus();
}

Result<std::unique_ptr<IoQueue>> RadosDevice::DoOpenQueue() {
  return std::unique_ptr<IoQueue>(new RadosQueue(*this));
}

Status RadosDevice::DoClose() {
  if (io_ == nullptr) return OkStatus();
  rados_ioctx_destroy(io_);
  io_ = nullptr;
  cluster_.reset();
  return OkStatus();
}

VSTACK_REGISTER_COMPONENT(rados, RadosComponent());

}  // namespace vstack::ceph
