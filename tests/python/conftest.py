"""Fixtures of the Python module's tests (tests/python/run.sh runs them against an installed
prefix): the module itself, checked to come from that prefix; the CLI of the same prefix, to
compare with; the test-only `gate` layer, loaded from its own shared library; and a Ctrl-C
sent during a call, measured by the bytes read."""

import ctypes
import json
import os
import signal
import subprocess
import threading

import pytest

import vstack


@pytest.fixture(scope="session", autouse=True)
def installed_module():
    """Fails the run if `vstack` was imported from anywhere but the installed prefix."""
    prefix = os.environ.get("VSTACK_PREFIX")
    assert prefix, "run the tests with tests/python/run.sh BUILD_DIR"
    assert os.path.realpath(vstack.__file__).startswith(os.path.realpath(prefix)), vstack.__file__
    return vstack


class Cli:
    """The prefix's `vstack` command."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, check=True):
        return subprocess.run([self.path, *args], capture_output=True, text=True, check=check)

    def json(self, *args):
        return json.loads(self.run(*args, "--output=json").stdout)


@pytest.fixture(scope="session")
def cli():
    return Cli(os.environ["VSTACK_CLI"])


class GateControl:
    """The one gate every `gate` layer shares (tests/testing/gate_device.h): while it is shut,
    requests wait inside the stack, and the test knows when they have arrived."""

    def __init__(self, lib):
        self._lib = lib
        lib.vstack_test_gate_held.restype = ctypes.c_ulonglong
        lib.vstack_test_gate_wait_held.argtypes = [ctypes.c_ulonglong, ctypes.c_longlong]
        lib.vstack_test_gate_open_after.argtypes = [ctypes.c_longlong]

    def shut(self):
        self._lib.vstack_test_gate_shut()

    def open(self):
        self._lib.vstack_test_gate_open()

    def held(self):
        return self._lib.vstack_test_gate_held()

    def wait_held(self, n, timeout_ms=60_000):
        # ctypes releases the GIL for the call: other Python threads run meanwhile.
        return bool(self._lib.vstack_test_gate_wait_held(n, timeout_ms))

    def open_after(self, ms):
        self._lib.vstack_test_gate_open_after(ms)

    def opened_by_itself(self):
        return bool(self._lib.vstack_test_gate_opened_by_itself())


@pytest.fixture(scope="session")
def gate_library():
    # Loaded after `import vstack`: its libvstack.so is the one the module loaded already, so
    # `gate` lands in the module's registry.
    return ctypes.CDLL(os.environ["VSTACK_TEST_GATE"], mode=ctypes.RTLD_GLOBAL)


@pytest.fixture
def gate(gate_library):
    control = GateControl(gate_library)
    control.open()
    yield control
    control.open()


def _bytes_read_when_interrupted(call):
    """Runs call() with a SIGINT 0.3 s in, expects KeyboardInterrupt, and returns the bytes the
    process read meanwhile (/proc/self/io's rchar): where the call stopped, without a clock."""

    def bytes_read():
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))

    before = bytes_read()
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.cancel()
    return bytes_read() - before


@pytest.fixture
def bytes_read_when_interrupted():
    return _bytes_read_when_interrupted
