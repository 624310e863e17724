// The image tools as Python functions: create, check, convert, compare and info call the same
// library functions as `vstack create`, `check`, `convert`, `compare` and `info`
// (imagetools/), and return what those commands print with --output=json where they have it.
#include <pybind11/stl.h>  // std::optional arguments

#include <atomic>
#include <optional>
#include <string>

#include "imagetools/check.h"
#include "imagetools/compare.h"
#include "imagetools/convert.h"
#include "imagetools/info.h"
#include "imagetools/new_image_file.h"
#include "lib/registry.h"
#include "lib/size.h"
#include "tools/python/binding.h"

namespace vstack::python {
namespace {

// A size given as an int (bytes) or as the CLI takes it ("10G", "512M", "1000").
uint64_t SizeArg(const py::object& size) {
  if (py::isinstance<py::str>(size)) {
    auto parsed = ParseSize(size.cast<std::string>());
    if (!parsed) throw py::value_error("size: " + parsed.error().message);
    return *parsed;
  }
  return ByteCount(size, "size");
}

DevicePtr OpenReadOnly(const std::string& spec) {
  OpenOptions options;
  options.read_only = true;
  Result<DevicePtr> device = MakeError(Errc::kIo, "not opened");
  {
    GilRelease unlocked;
    device = OpenImage(spec, options);
  }
  if (!device) Raise(device.error());
  return std::move(*device);
}

uint64_t Create(const PathArg& path, const py::object& size_arg, const std::string& format,
                const std::string& options, const FlagArg& overwrite_arg) {
  const uint64_t size = SizeArg(size_arg);
  const bool overwrite = Flag(overwrite_arg, "overwrite");
  Status status;
  uint64_t actual = 0;
  {
    GilRelease unlocked;
    auto file = NewImageFile::Create(path.value, format, size, options, overwrite);
    if (file) {
      actual = file->device().geometry().size_bytes;
      status = file->Commit();
    } else {
      status = std::move(file).error();
    }
  }
  if (!status) Raise(status.error());
  return actual;
}

py::object Check(const PathArg& target, const std::optional<std::string>& repair) {
  CheckMode mode = CheckMode::kReadOnly;
  if (repair == "leaks") {
    mode = CheckMode::kRepairLeaks;
  } else if (repair == "all") {
    mode = CheckMode::kRepairAll;
  } else if (repair) {
    throw py::value_error("repair: '" + *repair + "' is not one of None, 'leaks', 'all'");
  }
  // Between layers and a scrub's chunks, with the GIL taken back: Ctrl-C (a signal Python has
  // noted) stops the check and is raised.
  std::optional<py::error_already_set> raised;
  auto keep_going = [&] {
    GilAcquire locked;
    if (PyErr_CheckSignals() == 0) return true;
    raised.emplace();
    return false;
  };
  Result<ImageCheck> check = MakeError(Errc::kIo, "not checked");
  {
    GilRelease unlocked;
    check = CheckImage(target.value, mode, keep_going);
  }
  if (raised) throw std::move(*raised);
  if (!check) Raise(check.error());
  return FromJson(CheckJson(*check));
}

py::dict Convert(const PathArg& src, const PathArg& dst, const std::optional<std::string>& format,
                 const std::string& options, const FlagArg& overwrite, const py::object& progress) {
  ConvertOptions convert;
  convert.overwrite = Flag(overwrite, "overwrite");
  if (!progress.is_none() && !PyCallable_Check(progress.ptr())) {  // before anything is copied
    throw py::type_error(std::string("progress: expected a callable or None, not ") +
                         Py_TYPE(progress.ptr())->tp_name);
  }
  DevicePtr source = OpenReadOnly(src.value);
  convert.format = format.value_or("");
  convert.create_options = options;
  // After every chunk, on this thread with the GIL taken back: Ctrl-C (a signal Python has
  // noted) and the callback. An exception of either stops the copy as the CLI's Ctrl-C does
  // (no new chunk; a new file removed, the old one left as it was) and is raised once the
  // copy has ended.
  std::atomic<bool> stop{false};
  std::optional<py::error_already_set> raised;
  convert.stop = &stop;
  convert.progress = [&](uint64_t done, uint64_t total) {
    GilAcquire locked;
    if (raised) return;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!progress.is_none()) progress(done, total);
    } catch (py::error_already_set& e) {
      raised.emplace(std::move(e));
      stop.store(true);
    }
  };
  Result<CopyStats> copied = MakeError(Errc::kIo, "not copied");
  {
    GilRelease unlocked;
    copied = ConvertImage(*source, dst.value, convert);
    source.reset();
  }
  if (raised) throw std::move(*raised);
  if (!copied) Raise(copied.error());
  py::dict out;
  out["copied"] = copied->copied;
  out["written"] = copied->written;
  return out;
}

py::dict Compare(const PathArg& a, const PathArg& b, const FlagArg& strict) {
  CompareOptions options;
  options.strict = Flag(strict, "strict");
  DevicePtr first = OpenReadOnly(a.value);
  DevicePtr second = OpenReadOnly(b.value);
  // Before every chunk, with the GIL taken back: Ctrl-C (a signal Python has noted) stops the
  // comparison and is raised.
  std::optional<py::error_already_set> raised;
  options.keep_going = [&] {
    GilAcquire locked;
    if (PyErr_CheckSignals() == 0) return true;
    raised.emplace();
    return false;
  };
  Result<Comparison> c = MakeError(Errc::kIo, "not compared");
  {
    GilRelease unlocked;
    c = CompareImages(*first, *second, options);
  }
  if (raised) throw std::move(*raised);
  if (!c) Raise(c.error());
  py::dict out;
  out["identical"] = c->identical;
  out["first_difference"] = c->first_difference ? py::cast(*c->first_difference) : py::none();
  out["size_a"] = c->size_a;
  out["size_b"] = c->size_b;
  return out;
}

py::object Info(const PathArg& target, const FlagArg& backing_chain_arg) {
  const bool backing_chain = Flag(backing_chain_arg, "backing_chain");
  OpenOptions options;
  options.read_only = true;
  std::string spec;
  std::string json;
  Status status;
  {
    GilRelease unlocked;
    auto device = OpenImage(target.value, options, &spec);
    if (device) {
      json = backing_chain ? BackingChainInfoJson(spec, **device) : InfoJson(spec, **device);
    } else {
      status = std::move(device).error();
    }
  }
  if (!status) Raise(status.error());
  return FromJson(json);
}

}  // namespace

void AddImageTools(py::module_& m) {
  const auto kFalse = [] { return FlagArg{py::bool_(false)}; };
  m.def("create", &Create, py::arg("path"), py::arg("size"), py::kw_only(),
        py::arg("format") = "raw", py::arg("options") = "", py::arg("overwrite") = kFalse(),
        R"(Creates an image file, as `vstack create -f FORMAT -o OPTIONS PATH SIZE` does.

`size` is bytes, or a string such as '10G'. `format` is 'raw' or a format with a create hook
('vhd', 'vhdx'); `options` are its create options, 'k=v,k=v' ('subformat=fixed'). An existing
file is refused unless `overwrite`, and then replaced only once the new image is complete.
Returns the virtual size (a format may round it up).)");
  m.def("check", &Check, py::arg("target"), py::kw_only(), py::arg("repair") = py::none(),
        R"(Checks every layer's metadata, top to bottom, as `vstack check` does; `repair` is
None, 'leaks' or 'all'. Returns the dict `vstack check --output=json` prints: 'status' is
'clean', 'corrupt' or 'leaks', 'exit_code' the CLI's exit status.)");
  m.def("convert", &Convert, py::arg("src"), py::arg("dst"), py::kw_only(),
        py::arg("format") = py::none(), py::arg("options") = "", py::arg("overwrite") = kFalse(),
        py::arg("progress") = py::none(),
        R"(Copies the virtual disk of `src` (a spec or an image file) into `dst`, as
`vstack convert` does: a new image file of `format` (default 'raw') with create `options`, or
an existing stack given by its spec (then with no format, options or overwrite).
`progress(done, total)` is called after every chunk copied; an exception it raises, or Ctrl-C,
stops the copy (a new file is removed, a file it replaces left as it was) and is raised. Returns
{'copied': bytes covered, 'written': bytes written with data}.)");
  m.def("compare", &Compare, py::arg("a"), py::arg("b"), py::kw_only(),
        py::arg("strict") = kFalse(),
        R"(Compares the content of two images (specs or files), as `vstack compare` does.
Returns {'identical', 'first_difference' (an offset or None), 'size_a', 'size_b'}; with
`strict`, different sizes alone make them differ.)");
  m.def("info", &Info, py::arg("target"), py::kw_only(), py::arg("backing_chain") = kFalse(),
        R"(The dict `vstack info --output=json` prints for a spec or image file (opened
read-only); with `backing_chain`, a list of them, one per image of a differencing chain.)");
}

}  // namespace vstack::python
