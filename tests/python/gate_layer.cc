// libvstack_test_gate.so: the `gate` layer (tests/testing/gate_device.h) for the Python tests,
// a layer of one's own registered from a shared library, as docs/python.md shows. The tests
// load it with ctypes after `import vstack` (it links libvstack.so, the library the module has
// loaded already), open "gate+memory:1M", and steer the one gate every such layer shares with
// the C functions below. The gate starts open.
#include <chrono>
#include <memory>

#include "lib/registry.h"
#include "tests/testing/gate_device.h"

namespace {

using vstack::testing::Gate;

Gate& TheGate() {
  static Gate* gate = new Gate(/*open=*/true);  // immortal: layers may outlive any scope
  return *gate;
}

vstack::ComponentInfo GateComponent() {
  vstack::ComponentInfo c;
  c.name = "gate";
  c.kind = vstack::ComponentKind::kLayer;
  c.summary = "holds requests while the test's gate is shut (tests/python/gate_layer.cc)";
  c.open_layer = [](vstack::DevicePtr lower, const vstack::OptionValues&,
                    const vstack::OpenOptions&) -> vstack::Result<vstack::DevicePtr> {
    // A non-owning pointer to the immortal gate.
    return vstack::MakeDevice<vstack::testing::GateDevice>(
        std::move(lower), std::shared_ptr<Gate>(std::shared_ptr<Gate>(), &TheGate()));
  };
  return c;
}

VSTACK_REGISTER_COMPONENT(gate, GateComponent());

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void vstack_test_gate_shut() { TheGate().Shut(); }
__attribute__((visibility("default"))) void vstack_test_gate_open() { TheGate().Open(); }
__attribute__((visibility("default"))) unsigned long long vstack_test_gate_held() {
  return TheGate().held();
}
// 1 once `n` requests in total have arrived at the shut gate, 0 after `timeout_ms` without.
__attribute__((visibility("default"))) int vstack_test_gate_wait_held(unsigned long long n,
                                                                      long long timeout_ms) {
  return TheGate().WaitHeld(n, std::chrono::milliseconds(timeout_ms)) ? 1 : 0;
}
// The safety valve (Gate::OpenAfter): a queue that has waited `ms` opens the gate itself.
__attribute__((visibility("default"))) void vstack_test_gate_open_after(long long ms) {
  TheGate().OpenAfter(std::chrono::milliseconds(ms));
}
__attribute__((visibility("default"))) int vstack_test_gate_opened_by_itself() {
  return TheGate().opened_by_itself() ? 1 : 0;
}

}  // extern "C"
