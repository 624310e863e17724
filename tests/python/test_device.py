"""vstack.open and vstack.Device: the data path, the buffer protocol, statistics, closing, and
every kind of bad input (which raises, never crashes)."""

import errno
import gc
import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import vstack

MiB = 1 << 20


def pattern(n, seed=1):
    return bytes((i * 7 + seed) % 251 for i in range(n))


def memory_of(buf):
    """The bytes of `buf` in the order they lie in memory (a Fortran-order array too)."""
    if isinstance(buf, np.ndarray):
        return buf.ravel(order="K").tobytes()
    return bytes(buf)


def test_open_is_a_context_manager_and_every_operation_round_trips():
    with vstack.open("memory:1M") as dev:
        assert (dev.spec, dev.size, dev.block_size, dev.read_only) == ("memory:1M", MiB, 512, False)
        data = pattern(8192)
        assert dev.write(4096, data) == 8192
        assert dev.read(4096, 8192) == data
        dev.flush()
        dev.write_zeroes(4096, 4096)
        assert dev.read(4096, 8192) == bytes(4096) + data[4096:]
        dev.discard(0, 65536)
        assert not dev.closed
    assert dev.closed
    assert "closed" in repr(dev)


def test_an_image_path_is_probed_and_its_spec_reported(tmp_path):
    path = str(tmp_path / "d.vhd")
    size = vstack.create(path, "4M", format="vhd")  # rounded up to whole CHS cylinders
    assert size >= 4 * MiB
    with vstack.open(path) as dev:
        assert dev.spec == "vhd+file:" + path
        assert dev.size == size
        dev.write(0, pattern(4096))
    with vstack.open(path, read_only=True) as dev:
        assert dev.read_only
        assert dev.read(0, 4096) == pattern(4096)


@pytest.mark.parametrize(
    "make",
    [
        lambda: bytearray(8192),
        lambda: memoryview(bytearray(8192)),
        lambda: np.zeros(8192, dtype=np.uint8),
        lambda: np.zeros((4, 512), dtype=np.uint32),  # 8 KiB of 32-bit items, 2-D
        lambda: np.zeros((64, 32), dtype=np.uint32, order="F"),  # Fortran order: contiguous too
    ],
    ids=["bytearray", "memoryview", "numpy-u8", "numpy-u32-2d", "numpy-fortran"],
)
def test_readinto_fills_any_writable_buffer_in_place(make):
    with vstack.open("memory:1M") as dev:
        dev.write(0, pattern(8192))
        buf = make()
        assert dev.readinto(0, buf) == 8192
        assert memory_of(buf) == pattern(8192)


def test_readinto_writes_into_the_callers_memory_not_a_copy():
    with vstack.open("memory:1M") as dev:
        dev.write(0, pattern(4096))
        big = bytearray(b"\xee" * 12288)
        assert dev.readinto(0, memoryview(big)[4096:8192]) == 4096  # a window into `big`
        assert big[:4096] == b"\xee" * 4096 and big[8192:] == b"\xee" * 4096
        assert bytes(big[4096:8192]) == pattern(4096)
        arr = np.zeros(1024, dtype=np.uint32)
        dev.readinto(0, arr)
        assert arr.tobytes() == pattern(4096)
        with mmap.mmap(-1, 4096) as m:
            dev.readinto(0, m)
            assert m[:] == pattern(4096)


def test_write_takes_any_contiguous_bytes_like_object():
    with vstack.open("memory:1M") as dev:
        for i, data in enumerate(
            [pattern(512), bytearray(pattern(512)), memoryview(pattern(512)),
             np.frombuffer(pattern(512), dtype=np.uint8)]
        ):
            assert dev.write(i * 512, data) == 512
        assert dev.read(0, 2048) == pattern(512) * 4


def test_buffers_that_cannot_be_used_in_place_are_refused():
    with vstack.open("memory:1M") as dev:
        with pytest.raises((BufferError, ValueError), match="contiguous"):
            dev.readinto(0, np.zeros(2048, dtype=np.uint8)[::2])  # numpy: ValueError
        with pytest.raises((BufferError, ValueError), match="contiguous"):
            dev.write(0, np.zeros(2048, dtype=np.uint8)[::2])
        with pytest.raises((BufferError, ValueError)):
            dev.readinto(0, memoryview(bytearray(2048))[::2])
        with pytest.raises((BufferError, TypeError)):
            dev.readinto(0, bytes(512))  # read-only
        with pytest.raises(TypeError):
            dev.readinto(0, "not a buffer")
        with pytest.raises(TypeError):
            dev.write(0, 512)
        with pytest.raises(TypeError):
            dev.read("0", 512)


def test_out_of_range_misaligned_and_negative_requests_raise_value_error():
    with vstack.open("memory:1M") as dev:
        with pytest.raises(ValueError, match=r"read of 4096 bytes at offset 1048576: beyond the end"):
            dev.read(MiB, 4096)
        with pytest.raises(ValueError, match="beyond the end"):
            dev.read(0, 1 << 60)  # refused before anything is allocated
        with pytest.raises(ValueError, match="beyond the end"):
            dev.write(MiB - 512, bytes(1024))
        with pytest.raises(ValueError, match=r"multiples of the block size \(512 bytes\)"):
            dev.read(100, 512)
        with pytest.raises(ValueError, match="multiples of the block size"):
            dev.readinto(0, bytearray(100))
        with pytest.raises(ValueError, match="multiples of the block size"):
            dev.discard(0, 100)
        with pytest.raises(ValueError, match="offset must not be negative"):
            dev.read(-512, 512)
        with pytest.raises(ValueError, match="length must not be negative"):
            dev.write_zeroes(0, -1)
        with pytest.raises(ValueError, match="beyond the end"):
            dev.write_zeroes(0, 2 * MiB)
        assert dev.read(MiB, 0) == b""  # an empty read at the end is fine


def test_extreme_values_raise_and_never_crash():
    big = (1 << 63) - 512  # the largest int64 multiple of 512: offset + length overflows
    with vstack.open("dedup:size=1M+memory:8M") as dev:
        for call in (
            lambda: dev.read(big, 512),
            lambda: dev.readinto(big, bytearray(512)),
            lambda: dev.write(big, bytes(512)),
            lambda: dev.discard(big, big),
            lambda: dev.write_zeroes(512, big),
            lambda: dev.read(512, big),
        ):
            with pytest.raises(ValueError, match="beyond the end"):
                call()
        top = (1 << 64) - 512  # within 64 bits: the device's own range check answers
        for call in (
            lambda: dev.read(top, 512),
            lambda: dev.write(top, bytes(1024)),  # offset + length wraps past 2**64
            lambda: dev.discard(top, 1024),
            lambda: dev.write_zeroes(1 << 63, 1 << 63),  # offset + length is 2**64: 0 if wrapped
        ):
            with pytest.raises(ValueError, match="beyond the end"):
                call()
        assert dev.read(0, 512) == bytes(512)  # and the device is none the worse


TOO_BIG = r"must be at most 2\*\*64-1 \(got \d+\)"
NEGATIVE = r"must not be negative \(got -\d+\)"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda dev: dev.read(1 << 64, 4096), "offset " + TOO_BIG),
        (lambda dev: dev.read(0, 1 << 64), "length " + TOO_BIG),
        (lambda dev: dev.readinto(1 << 64, bytearray(512)), "offset " + TOO_BIG),
        (lambda dev: dev.write(1 << 70, b"x" * 512), "offset " + TOO_BIG),
        (lambda dev: dev.discard(0, 1 << 64), "length " + TOO_BIG),
        (lambda dev: dev.discard(1 << 64, 512), "offset " + TOO_BIG),
        (lambda dev: dev.write_zeroes(1 << 65, 512), "offset " + TOO_BIG),
        (lambda dev: dev.write_zeroes(0, 1 << 64), "length " + TOO_BIG),
        (lambda dev: dev.read(-(1 << 70), 512), "offset " + NEGATIVE),
        (lambda dev: dev.read(0, -(1 << 64)), "length " + NEGATIVE),
        (lambda dev: dev.readinto(-(1 << 64), bytearray(512)), "offset " + NEGATIVE),
        (lambda dev: dev.write(-(1 << 64), b"x" * 512), "offset " + NEGATIVE),
        (lambda dev: dev.discard(0, -(1 << 70)), "length " + NEGATIVE),
        (lambda dev: dev.write_zeroes(-(1 << 64), 512), "offset " + NEGATIVE),
        (lambda dev: dev.write_zeroes(0, -1), "length " + NEGATIVE),
    ],
)
def test_offsets_and_lengths_beyond_64_bits_raise_value_error_naming_them(call, message):
    """Integers past 64 bits, either way, used to fail pybind11's conversion (TypeError
    "incompatible function arguments") instead of raising the ValueError documented."""
    with vstack.open("memory:1M") as dev:
        with pytest.raises(ValueError, match=message):
            call(dev)
        assert dev.read(0, 512) == bytes(512)


def test_offsets_and_lengths_take_any_integer_type_and_refuse_the_rest():
    with vstack.open("memory:1M") as dev:
        dev.write(np.int64(512), pattern(512))
        assert dev.read(np.uint64(512), np.int32(512)) == pattern(512)
        dev.discard(np.uint16(0), np.uint64(512))
        for call in (lambda: dev.read(512.0, 512), lambda: dev.read(0, "512"),
                     lambda: dev.write_zeroes(None, 512)):
            with pytest.raises(TypeError, match=r"(offset|length): expected an int, not"):
                call()


@pytest.mark.parametrize(
    "call",
    [
        lambda dev: dev.read(True, 512),
        lambda dev: dev.read(0, True),
        lambda dev: dev.readinto(False, bytearray(512)),
        lambda dev: dev.write(True, bytes(512)),
        lambda dev: dev.discard(False, 512),
        lambda dev: dev.write_zeroes(0, False),
        lambda dev: dev.read(np.True_, 512),
        lambda dev: dev.write(np.bool_(False), bytes(512)),
        lambda dev: dev.discard(0, np.True_),
    ],
)
def test_a_bool_is_refused_as_an_offset_or_length(call):
    """True and False were taken as 1 and 0 (a read of True bytes...): a mistake, refused."""
    with vstack.open("memory:1M") as dev:
        dev.write(0, pattern(512))
        with pytest.raises(TypeError,
                           match=r"^(offset|length): expected an int, not (bool|numpy\.bool_?)$"):
            call(dev)
        assert dev.read(0, 512) == pattern(512)  # nothing written, discarded or zeroed


def test_an_exception_of_an_objects_own_index_propagates():
    """An __index__ raising RuntimeError was reported as "offset: expected an int, not BadIdx",
    the original exception lost."""

    class BadIdx:
        def __index__(self):
            raise RuntimeError("no index today")

    with vstack.open("memory:1M") as dev:
        with pytest.raises(RuntimeError, match="^no index today$"):
            dev.read(BadIdx(), 512)
        with pytest.raises(RuntimeError, match="^no index today$"):
            dev.discard(0, BadIdx())


def test_a_failed_close_raises_once_and_later_closes_return_none():
    """After a close whose flush failed, every later close() raised the same IoError again."""
    dev = vstack.open("error:ops=flush+memory:1M")
    with pytest.raises(vstack.IoError, match="flush before close failed") as e:
        dev.close()
    assert e.value.errno == errno.EIO
    assert dev.closed
    assert dev.close() is None
    assert dev.close() is None


def test_with_on_a_closed_device_raises_value_error_as_a_closed_file_does():
    dev = vstack.open("memory:1M")
    dev.close()
    with pytest.raises(ValueError, match="^I/O operation on a closed device$"):
        with dev:
            pass


@pytest.mark.parametrize(
    "call, name, type_name",
    [
        (lambda: vstack.open("memory:1M", read_only="no"), "read_only", "str"),
        (lambda: vstack.open("memory:1M", read_only=1), "read_only", "int"),
        (lambda: vstack.open("memory:1M", latency=None), "latency", "NoneType"),
        (lambda: vstack.create("/nonexistent/x", "1M", overwrite=1), "overwrite", "int"),
        (lambda: vstack.convert("memory:1M", "/nonexistent/x", overwrite="yes"), "overwrite",
         "str"),
        (lambda: vstack.compare("memory:1M", "memory:1M", strict=0), "strict", "int"),
        (lambda: vstack.info("memory:1M", backing_chain="true"), "backing_chain", "str"),
        (lambda: vstack.space("memory:1M", estimate=1), "estimate", "int"),
    ],
)
def test_a_flag_that_is_not_a_bool_is_a_type_error_naming_it(call, name, type_name):
    """open(read_only=1) and latency=None were taken, read_only='no' gave pybind11's long
    "incompatible function arguments"."""
    with pytest.raises(TypeError, match=f"^{name}: expected a bool, not {type_name}$"):
        call()


def test_a_flag_takes_pythons_and_numpys_bools():
    with vstack.open("memory:1M", read_only=np.True_, latency=False) as dev:
        assert dev.read_only
    assert vstack.compare("memory:1M", "memory:2M", strict=np.bool_(True))["identical"] is False


def test_a_closed_device_refuses_io_and_close_is_idempotent():
    dev = vstack.open("memory:1M")
    dev.close()
    dev.close()
    for call in (
        lambda: dev.read(0, 512),
        lambda: dev.readinto(0, bytearray(512)),
        lambda: dev.write(0, bytes(512)),
        dev.flush,
        lambda: dev.discard(0, 512),
        lambda: dev.write_zeroes(0, 512),
        dev.stats,
    ):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_io_errors_raise_io_error_with_the_errno():
    with vstack.open("error:ops=read,errno=EIO+memory:1M") as dev:
        with pytest.raises(vstack.IoError) as e:
            dev.read(0, 4096)
        assert isinstance(e.value, OSError)
        assert e.value.errno == errno.EIO
        assert "read of 4096 bytes at offset 0" in str(e.value)
        dev.write(0, bytes(4096))  # writes still work
    with vstack.open("error:ops=write,errno=ENOSPC+memory:1M") as dev:
        with pytest.raises(vstack.IoError) as e:
            dev.write(0, bytes(4096))
        assert e.value.errno == errno.ENOSPC
    with vstack.open("memory:1M", read_only=True) as dev:
        with pytest.raises(vstack.IoError) as e:
            dev.write(0, bytes(512))
        assert e.value.errno == errno.EROFS


@pytest.mark.parametrize(
    "spec",
    ["dedupx+memory:16M", "zstd:levle=3+memory:16M", "memory:lots", "dedup+", "memroy:1M",
     "vhd:x=1+memory:16M", "memory:16M+dedup"],
)
def test_a_bad_spec_raises_spec_error_with_the_clis_words(spec, cli):
    out = cli.run("info", spec, check=False)
    assert out.returncode == 2  # a usage error, whose second line points to `vstack help info`
    with pytest.raises(vstack.SpecError) as e:
        vstack.open(spec)
    assert isinstance(e.value, ValueError)
    assert out.stderr.splitlines()[0] == "vstack info: " + str(e.value)


def test_the_spec_error_suggests_the_name_meant():
    with pytest.raises(vstack.SpecError, match="did you mean `dedup`"):
        vstack.open("dedupx+memory:16M")


def test_an_image_still_open_in_this_process_is_named_as_such(tmp_path):
    """A second open of an image this process has open (a Device not closed yet, in a notebook)
    is refused by the image's locks: the message says the open in the way is this process's
    own, not another process's."""
    path = str(tmp_path / "held.vhd")
    vstack.create(path, "8M", format="vhd")
    dev = vstack.open(path)
    for call in (lambda: vstack.info(path), lambda: vstack.check(path), lambda: vstack.open(path),
                 lambda: vstack.open(path, read_only=True)):
        with pytest.raises(vstack.IoError, match="in use by this process: another open of it, "
                                                 "not closed yet") as e:
            call()
        assert e.value.errno == errno.EAGAIN
    dev.close()
    assert vstack.info(path)["spec"] == "vhd+file:" + path


def test_a_missing_file_raises_io_error_enoent(tmp_path):
    with pytest.raises(vstack.IoError) as e:
        vstack.open(str(tmp_path / "missing.vhd"))
    assert e.value.errno == errno.ENOENT


def test_stats_is_the_info_document_with_each_layers_live_statistics(tmp_path, cli):
    path = str(tmp_path / "s.vhd")
    vstack.create(path, "8M", format="vhd", options="subformat=dynamic")
    with vstack.open(path) as dev:
        for i in range(3):
            dev.write(i * 4096, pattern(4096, i))
        dev.read(0, 8192)
        stats = dev.stats()
        top = stats["layers"][0]
        assert top["kind"] == "vhd"
        assert top["stats"]["ops"]["write"]["ops"] == 3
        assert top["stats"]["ops"]["write"]["bytes"] == 3 * 4096
        assert top["stats"]["ops"]["read"]["ops"] == 1
        assert stats["layers"][1]["kind"] == "file"
        assert "counters" in top["stats"]
    # Without the statistics, the same document as `vstack info --output=json`.
    with vstack.open(path, read_only=True) as dev:
        stats = dev.stats()
        for layer in stats["layers"]:
            del layer["stats"]
        assert stats == cli.json("info", path)


def test_counters_of_a_layer_follow_the_io():
    with vstack.open("dedup+memory:32M") as dev:
        for i in range(8):
            dev.write(i * 4096, b"\x5a" * 4096)  # eight copies of one grain
        dedup = dev.stats()["layers"][0]
        assert dedup["kind"] == "dedup"
        assert dedup["stats"]["ops"]["write"]["ops"] == 8
        assert sum(dedup["stats"]["counters"].values()) > 0
        assert dedup["properties"]


def write_latencies(dev):
    """Each layer's write latency_ns after some writes, top first."""
    for i in range(16):
        dev.write(i * 4096, pattern(4096, i))
    layers = dev.stats()["layers"]
    assert all(layer["stats"]["ops"]["write"]["ops"] > 0 for layer in layers)
    return [layer["stats"]["ops"]["write"]["latency_ns"] for layer in layers]


def test_latency_is_measured_when_asked_and_never_reported_as_zero_when_not():
    """Latency read 0 at every layer: the module's devices keep none unless asked, and the
    document printed zeros for "not measured"."""
    with vstack.open("dedup+memory:32M") as dev:
        assert write_latencies(dev) == [None, None]
        ops = dev.stats()["layers"][0]["stats"]["ops"]
        assert all(op["latency_ns"] is None for op in ops.values())
    with vstack.open("dedup+memory:32M", latency=True) as dev:
        for latency in write_latencies(dev):
            assert latency["max"] > 0 and latency["mean"] > 0, latency
            assert latency["max"] >= latency["p99"] >= latency["p50"]
        flush = dev.stats()["layers"][0]["stats"]["ops"]["flush"]
        assert flush["ops"] == 0 and flush["latency_ns"] is not None  # measured: nothing yet
    # The spec's stats= option: per part, and it wins over what open() asks.
    with vstack.open("dedup:stats=latency+memory:32M") as dev:
        top, bottom = write_latencies(dev)
        assert top["max"] > 0 and bottom is None
    with vstack.open("dedup:stats=counts+memory:32M", latency=True) as dev:
        top, bottom = write_latencies(dev)
        assert top is None and bottom["max"] > 0


def test_the_device_type_is_made_by_open_only():
    with pytest.raises(TypeError):
        vstack.Device()


def test_devices_left_open_are_closed_at_exit(tmp_path):
    """A stack kept open by a global until the interpreter exits still persists its
    metadata: vstack closes it at exit."""
    path = str(tmp_path / "exit.vhd")
    vstack.create(path, "8M", format="vhd")
    script = textwrap.dedent(f"""
        import vstack
        keep = vstack.open({path!r})
        keep.write(1 << 20, b"\\x33" * 4096)
        cycle = [keep]
        cycle.append(cycle)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=os.environ)
    assert vstack.check(path)["status"] == "clean"
    with vstack.open(path, read_only=True) as dev:
        assert dev.read(1 << 20, 4096) == b"\x33" * 4096


def test_a_forked_child_never_closes_or_uses_the_parents_device(tmp_path):
    """A child of os.fork() that exited normally closed its copy of an open Device (at exit),
    writing the parent's VHD metadata as its stale copy had it: the file was cut and every block
    the parent wrote meanwhile lost. The child's copy now refuses I/O and is never closed."""
    path = str(tmp_path / "fork.vhd")
    vstack.create(path, "64M", format="vhd")
    script = textwrap.dedent(f"""
        import os, sys, time, vstack
        dev = vstack.open({path!r})
        dev.write(0, b"p" * 65536)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                dev.write(1 << 20, b"c" * 4096)
                os.write(write, b"wrote")
            except ValueError as e:
                os.write(write, b"refused" if "forked child" in str(e) else str(e).encode())
            os.close(write)
            sys.exit(0)  # a normal exit: atexit runs in the child
        os.close(write)
        print(os.read(read, 200).decode())
        os.waitpid(pid, 0)  # the child has exited before the parent writes on
        for i in range(1, 20):
            dev.write(i * (2 << 20), bytes([i]) * 65536)
        dev.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], check=True, env=os.environ,
                         capture_output=True, text=True)
    assert out.stdout.strip() == "refused", out.stdout + out.stderr
    assert vstack.check(path)["status"] == "clean"
    with vstack.open(path, read_only=True) as dev:
        assert dev.read(0, 65536) == b"p" * 65536
        for i in range(1, 20):
            assert dev.read(i * (2 << 20), 65536) == bytes([i]) * 65536


def test_a_dropped_device_is_closed_and_its_image_stays_clean(tmp_path):
    path = str(tmp_path / "drop.vhd")
    vstack.create(path, "8M", format="vhd")
    dev = vstack.open(path)
    dev.write(0, b"\x44" * 4096)
    del dev
    gc.collect()
    assert vstack.check(path)["status"] == "clean"
    with vstack.open(path) as again:  # not held open by anything left over
        assert again.read(0, 4096) == b"\x44" * 4096


def test_version_and_layers_are_the_clis(cli):
    assert "vstack " + vstack.__version__ == cli.run("--version").stdout.strip()
    listed = cli.json("layers")
    ours = [c for c in vstack.layers() if c["name"] != "gate"]  # the tests' own layer
    # The same document, key for key: the summary was under "description" (the CLI: "summary").
    assert ours == listed
    dedup = next(c for c in ours if c["name"] == "dedup")
    assert dedup["kind"] == "layer" and dedup["options"]
