// The Python module vstack._vstack (re-exported by the package vstack, docs/python.md): the
// exceptions, vstack.layers(), the version, and the parts in device.cc and image_tools.cc.
#include "lib/registry.h"
#include "lib/version.h"
#include "tools/python/binding.h"

namespace vstack::python {
namespace {

// What `vstack layers --output=json` lists, under the same keys.
py::list Layers() {
  py::list out;
  for (const ComponentInfo* c : Registry::Global().All()) {
    py::list options;
    for (const OptionInfo& o : c->options) {
      py::dict option;
      option["name"] = o.name;
      option["help"] = o.help;
      option["default"] = o.default_value;
      options.append(option);
    }
    py::dict layer;
    layer["name"] = c->name;
    layer["kind"] = c->kind == ComponentKind::kBackend ? "backend" : "layer";
    layer["summary"] = c->summary;
    layer["positional"] = c->positional;
    layer["options"] = options;
    out.append(layer);
  }
  return out;
}

}  // namespace
}  // namespace vstack::python

PYBIND11_MODULE(_vstack, m) {
  namespace py = pybind11;
  using namespace vstack::python;
  m.doc() = "vstack: virtual storage stacks from Python (the compiled part; import vstack).";
  m.attr("__version__") = vstack::Version();
  AddExceptions(m);
  SetMainThread(
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>());
  m.def("_close_exit_gate", &CloseExitGate,
        "Called by the package's atexit handler: from now on a thread other than the main one "
        "that would take the GIL back inside vstack is parked (see GilRelease).");
  m.def("layers", &Layers,
        R"(The backends and layers a spec may name, as `vstack layers` lists them: one dict per
component with 'name', 'kind' ('backend' or 'layer'), 'summary', 'positional' (what a
backend's first item is, e.g. 'SIZE') and 'options' (dicts of 'name', 'help', 'default').)");
  AddDevice(m);
  AddImageTools(m);
  AddBench(m);
}
