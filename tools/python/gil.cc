// Releasing and taking back the GIL safely at interpreter exit (binding.h, GilRelease).
//
// Python up to 3.13 ends a thread that takes the GIL once the interpreter is finalizing (a
// daemon thread still running after the main thread's exit) with pthread_exit(). In C++ that is
// a forced unwind, and from pybind11's gil_scoped_release, whose destructor takes the GIL back
// and is noexcept, it is std::terminate(): a script whose daemon threads used vstack aborted at
// exit ("terminate called without an active exception", status 134). Such a thread is parked
// instead, as Python 3.14 parks it itself: it never comes back, and the process ends as usual.
#include <pthread.h>
#include <unistd.h>

#include <atomic>

#include "tools/python/binding.h"

namespace vstack::python {
namespace {

// Set by CloseExitGate(), from the module's atexit handler, which runs before finalization.
std::atomic<bool> g_exiting{false};
// Threads between their look at g_exiting and having the GIL back.
std::atomic<int> g_taking{0};
// The interpreter's main thread (PyThread_get_thread_ident), which finalizes it: never parked.
std::atomic<unsigned long> g_main_thread{0};

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

[[noreturn]] void Park() {
  for (;;) ::pause();
}

// Called before taking the GIL: parks the calling thread if the interpreter would end it.
// Both sides are sequentially consistent: either this thread sees g_exiting, or
// CloseExitGate() sees it in g_taking and waits until it has the GIL back.
void BeginTaking() {
  g_taking.fetch_add(1);
  if ((g_exiting.load() || Finalizing()) && PyThread_get_thread_ident() != g_main_thread.load()) {
    g_taking.fetch_sub(1);
    Park();
  }
}

void EndTaking() { g_taking.fetch_sub(1); }

}  // namespace

GilRelease::GilRelease() : state_(PyEval_SaveThread()) {}

GilRelease::~GilRelease() {
  BeginTaking();
  PyEval_RestoreThread(state_);
  EndTaking();
}

GilAcquire::GilAcquire() {
  if (PyGILState_Check() != 0) {  // this thread holds it already: nothing to wait for
    state_ = PyGILState_Ensure();
    return;
  }
  BeginTaking();
  state_ = PyGILState_Ensure();
  EndTaking();
}

GilAcquire::~GilAcquire() { PyGILState_Release(state_); }

void SetMainThread(unsigned long ident) { g_main_thread.store(ident); }

void CloseExitGate() {
  // The thread running the atexit handlers is the one that finalizes the interpreter (the main
  // thread, or in a child forked from another thread, that thread).
  g_main_thread.store(PyThread_get_thread_ident());
  g_exiting.store(true);
  // Threads already past their look take the GIL back: let them, then finalization may start.
  Py_BEGIN_ALLOW_THREADS while (g_taking.load() != 0)::usleep(1000);
  Py_END_ALLOW_THREADS
}

}  // namespace vstack::python
