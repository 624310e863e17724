"""Fixtures of the Python module's tests (tests/python/run.sh runs them against an installed
prefix): the module itself, checked to come from that prefix; the CLI of the same prefix, to
compare with; and the test-only `gate` layer, loaded from its own shared library."""

import ctypes
import json
import os
import subprocess

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
