// vstack.Device: an open stack driven from Python. Each call converts its arguments and calls
// the library's SharedSyncIo (lib/shared_sync_io.h) with the GIL released, so several Python
// threads drive one stack in parallel, each on its own queue; buffers pass by the buffer
// protocol, with no copy.
#include <unistd.h>

#include <memory>
#include <string>

#include "imagetools/info.h"
#include "lib/registry.h"
#include "lib/shared_sync_io.h"
#include "tools/python/binding.h"

namespace vstack::python {
namespace {

// A contiguous buffer of a Python object (bytes, bytearray, memoryview, numpy array...), held
// for the object's lifetime. Raises TypeError/BufferError as Python does for a bad one.
class BufferView {
 public:
  BufferView(py::handle object, bool writable) {
    const int flags = PyBUF_ANY_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object.ptr(), &view_, flags) != 0) throw py::error_already_set();
  }
  ~BufferView() { PyBuffer_Release(&view_); }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;

  std::byte* data() const { return static_cast<std::byte*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_;
};

// "read of 4096 bytes at offset 0", or the operation's name alone for a flush.
std::string What(const char* op, uint64_t length, uint64_t offset) {
  if (length == 0 && offset == 0) return op;
  return std::string(op) + " of " + std::to_string(length) + " bytes at offset " +
         std::to_string(offset);
}

class Device {
 public:
  Device(std::string spec, DevicePtr device)
      : io_(std::make_unique<SharedSyncIo>(std::move(spec), std::move(device))) {}
  // In a child made by os.fork(), the copy is never closed: closing it would write the
  // parent's metadata as the child's stale copy has it (a child exiting normally shortened the
  // parent's VHD, losing the blocks the parent wrote meanwhile). It is left to the process's end.
  ~Device() {
    if (Inherited()) (void)io_.release();
  }

  const std::string& spec() const { return io_->spec(); }
  uint64_t size() const { return io_->device().size_bytes(); }
  uint32_t block_size() const { return io_->device().geometry().logical_block; }
  bool read_only() const { return io_->device().read_only(); }
  bool closed() const { return io_->closing(); }

  py::bytes Read(IntArg offset_arg, IntArg length_arg) {
    const uint64_t offset = ByteCount(offset_arg.object, "offset");
    const uint64_t length = ByteCount(length_arg.object, "length");
    // Checked before the buffer is allocated; the queue checks everything else.
    if (offset > size() || length > size() - offset) {
      RaiseIo(make_error_code(Errc::kOutOfRange), What("read", length, offset), block_size(),
              size());
    }
    PyObject* out = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(length));
    if (out == nullptr) throw py::error_already_set();
    auto bytes = py::reinterpret_steal<py::bytes>(out);
    auto* data = reinterpret_cast<std::byte*>(PyBytes_AS_STRING(out));
    Run("read", length, offset, [&] { return io_->Read(offset, {data, length}); });
    return bytes;
  }

  size_t ReadInto(IntArg offset_arg, py::handle buffer) {
    const uint64_t offset = ByteCount(offset_arg.object, "offset");
    BufferView view(buffer, /*writable=*/true);
    Run("read", view.size(), offset, [&] { return io_->Read(offset, {view.data(), view.size()}); });
    return view.size();
  }

  size_t Write(IntArg offset_arg, py::handle data) {
    const uint64_t offset = ByteCount(offset_arg.object, "offset");
    BufferView view(data, /*writable=*/false);
    Run("write", view.size(), offset,
        [&] { return io_->Write(offset, {view.data(), view.size()}); });
    return view.size();
  }

  void Flush() {
    Run("flush", 0, 0, [&] { return io_->Flush(); });
  }

  void Discard(IntArg offset_arg, IntArg length_arg) {
    const uint64_t offset = ByteCount(offset_arg.object, "offset");
    const uint64_t length = ByteCount(length_arg.object, "length");
    Run("discard", length, offset, [&] { return io_->Discard(offset, length); });
  }

  void WriteZeroes(IntArg offset_arg, IntArg length_arg) {
    const uint64_t offset = ByteCount(offset_arg.object, "offset");
    const uint64_t length = ByteCount(length_arg.object, "length");
    Run("write_zeroes", length, offset, [&] { return io_->WriteZeroes(offset, length); });
  }

  py::object Stats() {
    std::string json;
    Run("stats", 0, 0, [&] {
      return io_->Query([&](BlockDevice& d) { json = InfoJson(spec(), d, {.stats = true}); });
    });
    return FromJson(json);
  }

  void Close() {
    if (Inherited()) return;  // the parent's to close (atexit in a child lands here)
    Status status;
    {
      GilRelease unlocked;
      status = io_->Close();  // later calls return the first call's status
    }
    // A failed close is raised once, by the call that closed (or, closing from several threads
    // at once, by the first back): the device is closed all the same, and later calls return
    // None, as a Python file's close() does.
    if (!status && !close_error_raised_) {
      close_error_raised_ = true;
      Raise(status.error());
    }
  }

  // `with device:` on a closed device: ValueError, as a closed Python file gives.
  void Enter() const {
    if (closed()) throw py::value_error("I/O operation on a closed device");
  }

  std::string Repr() const {
    return "<vstack.Device '" + spec() + "' " + std::to_string(size()) + " bytes" +
           (closed() ? ", closed>" : ">");
  }

 private:
  // Runs `call` (one SharedSyncIo call) with the GIL released, then raises for its status.
  template <typename Call>
  void Run(const char* op, uint64_t length, uint64_t offset, Call call) {
    if (Inherited()) {
      throw py::value_error(std::string(op) + ": this Device was opened by process " +
                            std::to_string(owner_) + "; a forked child cannot use it (its " +
                            "metadata is the parent's): open the stack again in the child");
    }
    std::error_code ec;
    {
      GilRelease unlocked;
      ec = call();
    }
    if (ec) RaiseIo(ec, What(op, length, offset), block_size(), size());
  }

  // True in a process forked from the one that opened the device.
  bool Inherited() const { return ::getpid() != owner_; }

  std::unique_ptr<SharedSyncIo> io_;
  const pid_t owner_ = ::getpid();
  bool close_error_raised_ = false;  // read and written with the GIL held
};

std::unique_ptr<Device> OpenDevice(const PathArg& spec, const FlagArg& read_only_arg,
                                   const FlagArg& latency_arg) {
  const bool read_only = Flag(read_only_arg, "read_only");
  const bool latency = Flag(latency_arg, "latency");
  OpenOptions options;
  options.read_only = read_only;
  std::string opened;
  Result<DevicePtr> device = MakeError(Errc::kIo, "not opened");
  {
    GilRelease unlocked;
    device = OpenImage(spec.value, options, &opened);
  }
  if (!device) Raise(device.error());
  // As `vstack bench` and the NBD export's stats file ask for it: every layer keeps latency,
  // but a part whose spec says `stats=counts` (lib/stats.h). Set before the first queue opens.
  if (latency) {
    for (BlockDevice* d = device->get(); d != nullptr; d = d->lower()) {
      d->SetStatsMode(StatsMode::kLatency);
    }
  }
  return std::make_unique<Device>(opened, std::move(*device));
}

}  // namespace

void AddDevice(py::module_& m) {
  py::class_<Device>(m, "Device", R"(An open stack: a block device made of a backend and its layers.

Made by vstack.open(). Every I/O method blocks until the stack completes the request, with the
GIL released: several Python threads may drive one Device at once, each on its own queue (a
queue per thread, as the library's contract asks). Offsets and lengths are in bytes and must be
multiples of block_size; out-of-range or misaligned requests, and offsets or lengths that are
negative or above 2**64-1, raise ValueError (one that is not an integer, or is a bool,
TypeError); I/O errors raise vstack.IoError (an OSError with .errno). Use it as a context manager, or call close().)")
      .def_property_readonly("spec", &Device::spec,
                             "The spec opened (a probed path's, e.g. 'vhd+file:d.vhd').")
      .def_property_readonly("size", &Device::size, "The virtual size in bytes.")
      .def_property_readonly("block_size", &Device::block_size,
                             "The logical block size: offsets and lengths are multiples of it.")
      .def_property_readonly("read_only", &Device::read_only, "True if writes are refused.")
      .def_property_readonly("closed", &Device::closed, "True once close() has started.")
      .def("read", &Device::Read, py::arg("offset"), py::arg("length"),
           "Reads `length` bytes at `offset` and returns them as bytes.")
      .def("readinto", &Device::ReadInto, py::arg("offset"), py::arg("buffer"),
           R"(Reads len(buffer) bytes at `offset` into `buffer`, any writable contiguous object
of the buffer protocol (bytearray, memoryview, numpy array, mmap), with no copy; returns the
number of bytes read.)")
      .def("write", &Device::Write, py::arg("offset"), py::arg("data"),
           "Writes `data` (any contiguous bytes-like object) at `offset`; returns its length.")
      .def("flush", &Device::Flush,
           "Makes every write completed so far durable (the stack's flush).")
      .def("discard", &Device::Discard, py::arg("offset"), py::arg("length"),
           "Discards (trims) a range: a hint; its content is unspecified afterwards.")
      .def("write_zeroes", &Device::WriteZeroes, py::arg("offset"), py::arg("length"),
           "Makes a range read back as zeros.")
      .def("stats", &Device::Stats,
           R"(The stack's document, as `vstack info --output=json` prints it (spec, geometry,
capabilities, layers top first with their properties), each layer with its live statistics
under 'stats': requests, bytes, errors and latency per operation, and the layer's counters.
An operation's 'latency_ns' is None at a layer that keeps no latency: ask for it with
vstack.open(..., latency=True), or with stats=latency on a part of the spec.)")
      .def("close", &Device::Close,
           R"(Waits for I/O running on other threads, flushes and closes the stack (persisting
its metadata). Later I/O raises ValueError. Idempotent: a close that fails (IoError) leaves the
device closed, and later calls return None.)")
      .def("__enter__",
           [](py::object self) {
             self.cast<const Device&>().Enter();
             return self;
           })
      .def("__exit__", [](Device& d, py::args) { d.Close(); })
      .def("__repr__", &Device::Repr);

  m.def("open", &OpenDevice, py::arg("spec"), py::kw_only(),
        py::arg("read_only") = FlagArg{py::bool_(false)},
        py::arg("latency") = FlagArg{py::bool_(false)},
        R"(Opens a stack: a spec such as 'dedup+zstd+vhd+file:d.vhd' (docs/stack-spec.md), or
an image file whose format is probed. With `latency`, every layer keeps latency histograms
for stats() (a part with stats=counts in the spec excepted). Raises vstack.SpecError for a bad
spec (with the CLI's message and suggestion), vstack.IoError when the stack cannot be opened.)");
}

}  // namespace vstack::python
