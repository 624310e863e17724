"""Several Python threads on one stack: each gets its own queue, I/O (and vstack.bench()) runs
with the GIL released (shown with a gate inside the stack, without timing anything), and a
device closed while another thread reads waits for that read.

This file loads the `gate` layer into the registry, which then lists it: it runs after the
files whose tests compare the registry's list with the CLI's (pytest runs files in order)."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import vstack


def run_threads(n, target):
    errors = []

    def guarded(i):
        try:
            target(i)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("spec", ["memory:64M", "dedup:size=32M+zstd+memory:64M", "crc32c+memory:40M"])
def test_threads_drive_one_stack_in_parallel(spec):
    with vstack.open(spec) as dev:
        region = dev.size // 4

        def worker(i):
            rng = np.random.default_rng(i)
            buf = np.empty(16384, dtype=np.uint8)
            for k in range(100):
                data = rng.integers(0, 256, 16384, dtype=np.uint8)
                offset = i * region + int(rng.integers(0, region // 16384)) * 16384
                dev.write(offset, data)
                dev.readinto(offset, buf)
                assert np.array_equal(buf, data)
                if k % 25 == 24:
                    dev.flush()

        run_threads(4, worker)
        assert dev.stats()["layers"][0]["stats"]["ops"]["write"]["ops"] == 400


def test_io_releases_the_gil(gate):
    """One thread's read is held inside the stack at the gate. This thread then runs Python
    code, and opens the gate itself: that is only possible if the reader released the GIL. Had
    it kept the GIL, nothing here could run until the gate's safety valve opened it."""
    with vstack.open("gate+memory:1M") as dev:
        dev.write(0, b"\x5a" * 4096)
        gate.shut()
        gate.open_after(30_000)  # the valve: a held GIL fails the test instead of hanging it
        held = gate.held()
        got = {}
        reader = threading.Thread(target=lambda: got.update(data=dev.read(0, 4096)))
        reader.start()
        assert gate.wait_held(held + 1), "the read never reached the gate"
        ran_meanwhile = [n * n for n in range(1000)]  # Python code while the read is held
        reader_was_inside = reader.is_alive() and "data" not in got
        gate.open()
        reader.join()
        assert not gate.opened_by_itself(), "the reading thread held the GIL inside the stack"
        assert reader_was_inside and ran_meanwhile[-1] == 999 * 999
        assert got["data"] == b"\x5a" * 4096


def test_bench_releases_the_gil(gate):
    """The benchmark's first I/O is held inside the stack at the gate; this thread then runs
    Python and opens the gate itself, which it could not do if bench() kept the GIL (the gate's
    safety valve would open it, failing the test, with nothing timed)."""
    gate.shut()
    gate.open_after(30_000)
    held = gate.held()
    got = {}
    runner = threading.Thread(target=lambda: got.update(r=vstack.bench(
        "gate+memory:1M", size="1M", rounds=1, warmup=0, ios=100, qd=1, threads=1)))
    runner.start()
    assert gate.wait_held(held + 1), "the benchmark never reached the gate"
    ran_meanwhile = [n * n for n in range(1000)]
    runner_was_inside = runner.is_alive() and "r" not in got
    gate.open()
    runner.join()
    assert not gate.opened_by_itself(), "bench() held the GIL while the stack ran"
    assert runner_was_inside and ran_meanwhile[-1] == 999 * 999
    assert got["r"].outcome == "ok" and got["r"].json["stacks"][0]["rounds"][0]["total"]["ios"] == 100


def test_closing_waits_for_a_read_running_on_another_thread(gate):
    dev = vstack.open("gate+memory:1M")
    dev.write(4096, b"\x6b" * 4096)
    gate.shut()
    gate.open_after(30_000)
    held = gate.held()
    got = {}
    reader = threading.Thread(target=lambda: got.update(data=dev.read(4096, 4096)))
    reader.start()
    assert gate.wait_held(held + 1)
    closer = threading.Thread(target=dev.close)
    closer.start()
    while not dev.closed:  # close() has started: it now waits for the read
        threading.Event().wait(0.001)
    with pytest.raises(ValueError, match="closed"):
        dev.read(0, 4096)  # a new call is refused at once
    assert closer.is_alive() and reader.is_alive()
    gate.open()
    reader.join()
    closer.join()
    assert not gate.opened_by_itself()
    assert got["data"] == b"\x6b" * 4096
    with pytest.raises(ValueError, match="closed"):
        dev.readinto(0, bytearray(4096))


def test_a_thread_that_exits_leaves_the_stack_usable():
    with vstack.open("dedup+memory:32M") as dev:
        for round_ in range(20):  # many short-lived threads, one queue each while they live
            run_threads(2, lambda i: dev.write((round_ * 2 + i) * 4096, bytes([round_]) * 4096))
        assert dev.read(38 * 4096, 4096) == bytes([19]) * 4096


# A daemon thread inside bench() when the main thread ends: its benchmark is held at the gate
# until the interpreter is finalizing (an object in a module that finalization drops opens the
# gate, then waits without the GIL). Python up to 3.13 ends a thread that then takes the GIL
# with pthread_exit(), which inside a C++ destructor aborted the process (status 134,
# "terminate called without an active exception").
DAEMON_AT_FINALIZATION = """
    import ctypes, os, sys, threading, types
    import vstack

    gate = ctypes.CDLL(os.environ["VSTACK_TEST_GATE"], mode=ctypes.RTLD_GLOBAL)
    gate.vstack_test_gate_held.restype = ctypes.c_ulonglong
    gate.vstack_test_gate_wait_held.argtypes = [ctypes.c_ulonglong, ctypes.c_longlong]

    class OpensTheGateAtFinalization:
        def __del__(self, gate=gate):
            gate.vstack_test_gate_open()
            gate.vstack_test_gate_wait_held(1 << 60, 2000)  # the GIL released meanwhile

    gate.vstack_test_gate_shut()
    held = gate.vstack_test_gate_held()
    threading.Thread(target=lambda: vstack.bench("gate+memory:1M", size="1M", rounds=1,
                     warmup=0, ios=100, qd=1, threads=1), daemon=True).start()
    assert gate.vstack_test_gate_wait_held(held + 1, 60_000)
    keeper = types.ModuleType("vstack_test_keeper")
    keeper.opener = OpensTheGateAtFinalization()
    sys.modules[keeper.__name__] = keeper  # dropped, and so deleted, by finalization
    del keeper
"""

# Daemon threads reading in a loop when the main thread ends (the common case).
DAEMON_READERS = """
    import threading
    import vstack

    dev = vstack.open("memory:1M")

    def read_forever():
        buf = bytearray(4096)
        while True:
            try:
                dev.readinto(0, buf)
            except ValueError:  # closed at exit
                pass

    for _ in range(4):
        threading.Thread(target=read_forever, daemon=True).start()
    threading.Event().wait(0.2)
"""


@pytest.mark.parametrize("script", [DAEMON_AT_FINALIZATION, DAEMON_READERS],
                         ids=["held-until-finalization", "readers"])
def test_daemon_threads_inside_vstack_calls_at_exit_do_not_abort_the_process(script):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=os.environ,
                          capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
