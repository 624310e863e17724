#include "blockdev/ceph/rbd_device.h"

#include "blockdev/ceph/ceph_queue.h"
#include "lib/size.h"

namespace vstack::ceph {
namespace {

class RbdQueue final : public CephQueue {
 public:
  explicit RbdQueue(RbdDevice& dev) : CephQueue(dev), image_(dev.image()) {}

 protected:
  void DoSubmit(std::span<IoRequest* const> batch) override {
    for (IoRequest* r : batch) {
      Pending* p = Start(*r, 1);
      rbd_completion_t c = nullptr;
      int rc = rbd_aio_create_completion(p, &OnDone, &c);
      if (rc == 0) rc = Issue(*r, c);
      if (rc < 0) {
        if (c) rbd_aio_release(c);
        PieceDone(p, rc);
      }
      Issued(p);
    }
  }

 private:
  int Issue(IoRequest& r, rbd_completion_t c) {
    switch (r.op) {
      case Op::kRead:
        return rbd_aio_readv(image_, r.iov, static_cast<int>(r.iovcnt), r.offset, c);
      case Op::kWrite:
        return rbd_aio_writev(image_, r.iov, static_cast<int>(r.iovcnt), r.offset, c);
      case Op::kFlush:
        return rbd_aio_flush(image_, c);
      case Op::kDiscard:
        return rbd_aio_discard(image_, r.offset, r.length, c);
      case Op::kWriteZeroes:
        return rbd_aio_write_zeroes(image_, r.offset, r.length, c, 0, 0);
    }
    return -EINVAL;
  }

  static void OnDone(rbd_completion_t c, void* arg) {
    const int rc = static_cast<int>(rbd_aio_get_return_value(c));
    rbd_aio_release(c);
    PieceDone(static_cast<Pending*>(arg), rc < 0 ? rc : 0);
  }

  rbd_image_t image_;
};

// Splits "POOL/IMAGE".
Result<std::pair<std::string, std::string>> ParsePoolImage(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != std::string::npos) {
    return MakeError(Errc::kInvalidArgument,
                     "rbd: expected POOL/IMAGE, got '" + text + "' (e.g. rbd:rbd/disk1)");
  }
  return std::make_pair(text.substr(0, slash), text.substr(slash + 1));
}

Result<DevicePtr> OpenRbd(const OptionValues& o, const OpenOptions& open) {
  VSTACK_ASSIGN_OR_RETURN(auto pool_image, ParsePoolImage(o.positional()));
  // Plain names, not a structured binding: clang 14 (the TSan build) cannot capture one.
  const std::string& pool = pool_image.first;
  const std::string& name = pool_image.second;
  VSTACK_ASSIGN_OR_RETURN(ConnectParams cp, ParseConnectParams(o));
  VSTACK_ASSIGN_OR_RETURN(bool create, o.Bool("create"));
  if (create && !o.Has("size")) {
    return MakeError(Errc::kInvalidArgument, "rbd: create=on needs size=");
  }
  if (!create && (o.Has("size") || o.Has("data_pool"))) {
    return MakeError(Errc::kInvalidArgument,
                     "rbd: size= and data_pool= apply when creating an image (create=on)");
  }
  if (create && open.read_only) {
    return MakeError(Errc::kReadOnly, "rbd: cannot create an image read-only");
  }
  VSTACK_ASSIGN_OR_RETURN(std::shared_ptr<Cluster> cluster, Cluster::Connect("rbd", cp));
  VSTACK_ASSIGN_OR_RETURN(PoolFacts meta, cluster->Pool(pool));
  if (meta.erasure) {
    return MakeError(Errc::kNotSupported,
                     "rbd: pool '" + pool +
                         "' is erasure-coded and cannot hold image metadata "
                         "(EC pools have no omap); use a replicated pool with data_pool=" +
                         pool);
  }
  VSTACK_ASSIGN_OR_RETURN(rados_ioctx_t io, cluster->OpenPool(pool));
  bool created = false;
  auto fail = [&](Error e) -> Error {
    rados_ioctx_destroy(io);
    if (created) (void)cluster->RemoveImage(pool, name);  // nothing is left behind
    return e;
  };

  if (create) {
    VSTACK_ASSIGN_OR_RETURN(uint64_t size, o.Size("size"));
    rbd_image_options_t opts;
    rbd_image_options_create(&opts);
    if (o.Has("data_pool")) {
      const std::string dp = o.Get("data_pool");
      Result<PoolFacts> facts = cluster->Pool(dp);
      Status st = facts ? cluster->RequireOverwrites(*facts) : Status(facts.error());
      if (!st) {
        rbd_image_options_destroy(opts);
        return fail(st.error());
      }
      rbd_image_options_set_string(opts, RBD_IMAGE_OPTION_DATA_POOL, dp.c_str());
    }
    const int rc = rbd_create4(io, name.c_str(), size, opts);
    rbd_image_options_destroy(opts);
    if (rc == -EEXIST) {
      return fail(MakeError(Errc::kInvalidArgument, "rbd: image '" + pool + "/" + name +
                                                        "' already exists (drop create=on)"));
    }
    if (rc < 0) return fail(RadosError("rbd", "creating image '" + pool + "/" + name + "'", rc));
    created = true;
  }

  rbd_image_t image = nullptr;
  int rc = open.read_only ? rbd_open_read_only(io, name.c_str(), &image, nullptr)
                          : rbd_open(io, name.c_str(), &image, nullptr);
  if (rc == -ENOENT) {
    return fail(MakeError(
        Errc::kNotFound,
        "rbd: image '" + pool + "/" + name + "' does not exist (create it with create=on,size=)"));
  }
  if (rc < 0) return fail(RadosError("rbd", "opening image '" + pool + "/" + name + "'", rc));

  rbd_image_info_t info{};
  rc = rbd_stat(image, &info, sizeof(info));
  int64_t data_pool_id = rbd_get_data_pool_id(image);
  PoolFacts data = meta;
  if (rc == 0 && data_pool_id >= 0 && data_pool_id != rados_ioctx_get_id(io)) {
    char dp[256] = {};
    if (rados_pool_reverse_lookup(cluster->handle(), data_pool_id, dp, sizeof(dp) - 1) >= 0) {
      Result<PoolFacts> facts = cluster->Pool(dp);
      if (facts) data = *facts;
    }
  }
  Status st = rc < 0 ? Status(RadosError("rbd", "rbd_stat", rc)) : cluster->RequireOverwrites(data);
  if (!st) {
    rbd_close(image);
    return fail(st.error());
  }
  Geometry g;
  g.size_bytes = info.size;
  g.logical_block = 512;
  g.physical_block = std::max<uint32_t>(512, data.stripe_width);
  g.optimal_transfer = static_cast<uint32_t>(info.obj_size);
  return MakeDevice<RbdDevice>(std::move(cluster), io, image, pool, name, g, data, open.read_only,
                               create);
}

ComponentInfo RbdComponent() {
  return BackendComponent(
      "rbd", "Ceph RBD image via librbd (asynchronous), data optionally in an EC pool",
      "POOL/IMAGE",
      JoinOptions(ConnectOptionInfos(),
                  {{"create", "create the image (fails if it exists)", "off"},
                   {"size", "virtual size of a new image (with create=on)", ""},
                   {"data_pool", "pool for a new image's data, e.g. an EC pool", ""}}),
      OpenRbd);
}

}  // namespace

RbdDevice::RbdDevice(std::shared_ptr<Cluster> cluster, rados_ioctx_t io, rbd_image_t image,
                     std::string pool, std::string image_name, Geometry geometry,
                     PoolFacts data_pool, bool read_only, bool created)
    : BlockDevice("rbd", geometry,
                  kCapRead | kCapFlush | kCapExtents | kCapPersistent | kCapThreadSafe |
                      (read_only ? 0
                                 : kCapWrite | kCapDiscard | kCapWriteZeroes | kCapFastZeroes |
                                       kCapResizable)),
      cluster_(std::move(cluster)),
      io_(io),
      image_(image),
      pool_(std::move(pool)),
      image_name_(std::move(image_name)),
      name_(pool_ + "/" + image_name_),
      data_pool_(std::move(data_pool)),
      created_(created) {}

RbdDevice::~RbdDevice() { (void)DoClose(); }

std::function<void()> RbdDevice::open_undo() const {
  if (!created_) return {};
  return [cluster = cluster_, pool = pool_, image = image_name_] {
    (void)cluster->RemoveImage(pool, image);
  };
}

std::string RbdDevice::Describe() const {
  return "rbd " + name_ + " (" + FormatSize(size_bytes()) + ", data in " +
         (data_pool_.erasure ? "EC" : "replicated") + " pool '" + data_pool_.name + "')";
}

void RbdDevice::Properties(PropertyList& out) const {
  out.push_back({"image", name_, ""});
  out.push_back({"data_pool", data_pool_.name, ""});
  out.push_back({"data_pool_type", std::string(data_pool_.erasure ? "erasure" : "replicated"), ""});
  out.push_back({"data_pool_size", static_cast<uint64_t>(data_pool_.size), ""});
  out.push_back({"object_size", static_cast<uint64_t>(geometry().optimal_transfer), "bytes"});
  if (data_pool_.erasure) {
    out.push_back({"stripe_width", static_cast<uint64_t>(data_pool_.stripe_width), "bytes"});
  }
}

Status RbdDevice::MapExtents(uint64_t offset, uint64_t length, std::vector<Extent>* out) {
  VSTACK_RETURN_IF_ERROR(CheckRange(offset, length));
  struct Walk {
    std::vector<Extent>* out;
    uint64_t pos;
  } walk{out, offset};
  auto cb = [](uint64_t off, size_t len, int exists, void* arg) -> int {
    auto* w = static_cast<Walk*>(arg);
    if (off > w->pos) AppendExtent(w->out, w->pos, off - w->pos, kExtentHole | kExtentZero);
    AppendExtent(w->out, off, len, exists ? 0 : (kExtentHole | kExtentZero));
    w->pos = off + len;
    return 0;
  };
  const int rc = rbd_diff_iterate2(image_, nullptr, offset, length, 1, 0, cb, &walk);
  if (rc < 0) return RadosError("rbd", "rbd_diff_iterate2 on '" + name_ + "'", rc);
  if (walk.pos < offset + length) {
    AppendExtent(out, walk.pos, offset + length - walk.pos, kExtentHole | kExtentZero);
  }
  return OkStatus();
}

Result<std::unique_ptr<IoQueue>> RbdDevice::DoOpenQueue() {
  return std::unique_ptr<IoQueue>(new RbdQueue(*this));
}

Status RbdDevice::DoResize(uint64_t size) {
  const int rc = rbd_resize(image_, size);
  if (rc < 0) return RadosError("rbd", "resizing '" + name_ + "'", rc);
  return OkStatus();
}

Status RbdDevice::DoClose() {
  if (image_ == nullptr) return OkStatus();
  const int rc = rbd_close(image_);
  image_ = nullptr;
  rados_ioctx_destroy(io_);
  cluster_.reset();
  if (rc < 0) return RadosError("rbd", "closing '" + name_ + "'", rc);
  return OkStatus();
}

VSTACK_REGISTER_COMPONENT(rbd, RbdComponent());

}  // namespace vstack::ceph
