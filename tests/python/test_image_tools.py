"""The image tools as functions: each returns what its command prints with --output=json where
the command has one, and refuses bad input with the CLI's words."""

import errno
import os
import signal
import threading

import pytest

import vstack

MiB = 1 << 20


def test_create_makes_raw_and_vhd_images_and_refuses_to_overwrite(tmp_path):
    raw = str(tmp_path / "d.img")
    assert vstack.create(raw, 4 * MiB) == 4 * MiB
    assert os.path.getsize(raw) == 4 * MiB
    vhd = str(tmp_path / "d.vhd")
    size = vstack.create(vhd, "16M", format="vhd", options="subformat=fixed")
    assert size >= 16 * MiB  # a VHD rounds up to whole CHS cylinders
    info = vstack.info(vhd)
    assert info["geometry"]["size_bytes"] == size
    assert info["layers"][0]["properties"]["type"] == "fixed"
    with pytest.raises(vstack.IoError) as e:
        vstack.create(vhd, "16M", format="vhd")
    assert e.value.errno == errno.EEXIST
    assert 8 * MiB <= vstack.create(vhd, "8M", format="vhd", overwrite=True) < size


# The CLI checks -f against its choices before the library sees it ("--format: 'vhdd' is not one
# of raw|vhd|vhdx|vpc"), so there only the suggestion is the same; a bad -o is the library's words.
@pytest.mark.parametrize(
    "args,kwargs,cli_args,same_words",
    [
        (("x.img", "4M"), {"format": "vhdd"}, ["-f", "vhdd", "x.img", "4M"], False),
        (("x.vhd", "4M"), {"format": "vhd", "options": "subformt=fixed"},
         ["-f", "vhd", "-o", "subformt=fixed", "x.vhd", "4M"], True),
    ],
)
def test_create_refuses_a_bad_format_or_option_with_the_clis_words(tmp_path, cli, args, kwargs,
                                                                  cli_args, same_words):
    os.chdir(tmp_path)
    out = cli.run("create", *cli_args, check=False)
    assert out.returncode == 2
    with pytest.raises(vstack.SpecError) as e:
        vstack.create(*args, **kwargs)
    said = out.stderr.splitlines()[0]
    if same_words:
        assert said == "vstack create: " + str(e.value)
    else:
        suggestion = str(e.value)[str(e.value).index("; did you mean"):]
        assert said.endswith(suggestion), (said, str(e.value))
    assert not os.path.exists(args[0])


def test_create_refuses_a_bad_size():
    with pytest.raises(ValueError, match="size"):
        vstack.create("never.img", "12Q")
    with pytest.raises(ValueError, match="size"):
        vstack.create("never.img", -1)
    # Beyond 64 bits a size, like an offset, is a ValueError naming it (pybind11's TypeError).
    with pytest.raises(ValueError, match="size must be at most 2\\*\\*64-1"):
        vstack.create("never.img", 2**64)
    with pytest.raises(TypeError, match="size"):
        vstack.create("never.img", True)


def test_check_returns_the_clis_json(tmp_path, cli):
    path = str(tmp_path / "c.vhd")
    vstack.create(path, "8M", format="vhd")
    result = vstack.check(path)
    assert result == cli.json("check", path)
    assert (result["status"], result["exit_code"]) == ("clean", 0)
    with pytest.raises(ValueError, match="repair"):
        vstack.check(path, repair="everything")
    assert vstack.check(path, repair="all")["status"] == "clean"


def test_check_reports_a_damaged_image_as_the_cli_does(tmp_path, cli):
    path = str(tmp_path / "bad.vhd")
    vstack.create(path, "8M", format="vhd")
    with open(path, "r+b") as f:  # break the footer's checksum at the end and the copy at 0
        for where in (0, os.path.getsize(path) - 512):
            f.seek(where + 64)
            f.write(b"\xff\xff\xff\xff")
    result = vstack.check(path)
    out = cli.run("check", path, "--output=json", check=False)
    assert out.returncode == result["exit_code"] == 2
    assert result["status"] == "corrupt"


def test_convert_copies_with_progress_and_compare_agrees(tmp_path):
    src = "memory:4M"
    dst = str(tmp_path / "out.vhd")
    calls = []
    copied = vstack.convert(src, dst, format="vhd", progress=lambda d, t: calls.append((d, t)))
    assert copied["copied"] == 4 * MiB
    assert calls and calls[-1] == (4 * MiB, 4 * MiB)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    size = vstack.info(dst)["geometry"]["size_bytes"]  # rounded up to whole CHS cylinders
    assert vstack.compare(src, dst) == {"identical": True, "first_difference": None,
                                        "size_a": 4 * MiB, "size_b": size}


def test_convert_reads_a_stack_and_writes_an_image_that_compare_tells_apart(tmp_path):
    a = str(tmp_path / "a.img")
    vstack.create(a, "2M")
    with vstack.open("file:" + a) as dev:
        dev.write(MiB, b"\x01" * 4096)
    b = str(tmp_path / "b.vhd")
    vstack.convert(a, b, format="vhd")
    assert vstack.compare(a, b)["identical"]
    with vstack.open(b) as dev:
        dev.write(MiB + 512, b"\x02" * 512)
    assert vstack.compare(a, b)["first_difference"] == MiB + 512
    bigger = str(tmp_path / "c.img")
    vstack.create(bigger, "3M")
    vstack.convert(a, "file:" + bigger)  # into an existing stack, as it is
    result = vstack.compare(a, bigger)
    assert result["identical"] and result["size_b"] == 3 * MiB
    assert not vstack.compare(a, bigger, strict=True)["identical"]


def slow_source(tmp_path, chunks=24):
    """An image of `chunks` 2 MiB chunks of data, read at 100 ms a chunk (one at a time)."""
    path = tmp_path / "src.raw"
    path.write_bytes(os.urandom(chunks * 2 * MiB))
    return f"delay:read=100ms,qd=1+file:{path}"


def old_file(tmp_path):
    old = tmp_path / "old.raw"
    old.write_bytes(b"keep me")
    return old


@pytest.mark.parametrize("at_last", [False, True])
def test_an_exception_in_the_progress_callback_stops_the_copy_and_keeps_the_old_file(
        tmp_path, at_last):
    """The copy went on to the end and replaced the destination, then raised."""
    old = old_file(tmp_path)
    calls = []

    def progress(done, total):
        calls.append(done)
        if not at_last or done == total:
            raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        vstack.convert("memory:8M", old, overwrite=True, progress=progress)
    assert old.read_bytes() == b"keep me"
    assert sorted(os.listdir(tmp_path)) == ["old.raw"]
    if not at_last:
        assert len(calls) == 1  # later calls skipped, no chunk started after it
    with pytest.raises(KeyError, match="stop"):
        vstack.convert(slow_source(tmp_path, 4), tmp_path / "new.raw", progress=progress)
    assert sorted(os.listdir(tmp_path)) == ["old.raw", "src.raw"]  # the new file removed


def test_a_progress_that_is_not_callable_is_refused_before_anything_is_copied(tmp_path):
    """progress=5 raised TypeError only once the file was fully written and put in place."""
    old = old_file(tmp_path)
    with pytest.raises(TypeError, match="^progress: expected a callable or None, not int$"):
        vstack.convert("memory:8M", old, overwrite=True, progress=5)
    assert old.read_bytes() == b"keep me"
    assert sorted(os.listdir(tmp_path)) == ["old.raw"]


def test_ctrl_c_stops_a_convert_and_leaves_the_destination_as_it_was(tmp_path):
    """SIGINT during a slow convert raised KeyboardInterrupt only once the copy had finished
    and the new file was in place; the CLI stops and removes the new file (docs/cli.md)."""
    old = old_file(tmp_path)
    src = slow_source(tmp_path)
    for dst, kwargs in ((old, {"overwrite": True}), (tmp_path / "new.raw", {})):
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                vstack.convert(src, dst, **kwargs)
        finally:
            timer.cancel()
        # Stopped: had the copy finished (2.4 s), the new file would be in place.
        assert old.read_bytes() == b"keep me"
        assert sorted(os.listdir(tmp_path)) == ["old.raw", "src.raw"]


def test_ctrl_c_stops_a_compare(tmp_path, bytes_read_when_interrupted):
    """SIGINT during a compare raised KeyboardInterrupt only once the whole comparison had run
    (here 48 reads of 1 s each); now it stops at the next chunk."""
    data = tmp_path / "b.raw"
    data.write_bytes(os.urandom(48 * MiB))
    slow = f"delay:read=1s,qd=1+file:{data}"
    # Both images whole would be 96 MiB; stopped at the second chunk, 4 MiB at most.
    assert bytes_read_when_interrupted(lambda: vstack.compare(slow, data)) < 16 * MiB


def test_ctrl_c_stops_a_check_in_its_scrub(tmp_path, bytes_read_when_interrupted):
    """SIGINT during a check raised KeyboardInterrupt only once every layer had been checked
    (here a crc32c scrub of 48 MiB read at 1 s a chunk); now the scrub stops at its next
    chunk."""
    data = tmp_path / "c.img"
    with vstack.open(f"crc32c+file:{data},create=on,size=50M") as dev:
        dev.write(0, os.urandom(48 * MiB))
    slow = f"crc32c+delay:read=1s,qd=1+file:{data}"
    assert bytes_read_when_interrupted(lambda: vstack.check(slow)) < 16 * MiB
    assert vstack.check(f"crc32c+file:{data}")["status"] == "clean"


def test_convert_and_compare_refuse_bad_sources():
    with pytest.raises(vstack.SpecError, match="did you mean"):
        vstack.convert("memry:1M", "/nonexistent/x.img")
    with pytest.raises(vstack.IoError) as e:
        vstack.compare("/nonexistent/a.img", "memory:1M")
    assert e.value.errno == errno.ENOENT


def test_info_returns_the_clis_json_with_the_backing_chain(tmp_path, cli):
    parent = str(tmp_path / "parent.vhd")
    child = str(tmp_path / "child.vhd")
    vstack.create(parent, "8M", format="vhd")
    vstack.create(child, 0, format="vhd", options="backing_file=parent.vhd")
    assert vstack.info(child) == cli.json("info", child)
    chain = vstack.info(child, backing_chain=True)
    assert chain == cli.json("info", "--backing-chain", child)
    assert [image["spec"] for image in chain] == ["vhd+file:" + child, "vhd+file:" + parent]
    assert vstack.info("dedup+memory:16M") == cli.json("info", "dedup+memory:16M")


def test_every_path_argument_takes_a_pathlib_path(tmp_path, cli):
    """create, check, info, compare and convert refused a pathlib.Path (TypeError "incompatible
    function arguments") where open and space took one."""
    a = tmp_path / "a.vhd"
    size = vstack.create(a, "4M", format="vhd")
    with vstack.open(a) as dev:
        dev.write(0, b"\x07" * 4096)
    assert vstack.check(a) == cli.json("check", str(a))
    assert vstack.info(a) == cli.json("info", str(a))
    assert [i["spec"] for i in vstack.info(a, backing_chain=True)] == ["vhd+file:" + str(a)]
    b = tmp_path / "b.img"
    assert vstack.convert(a, b)["copied"] == size
    assert vstack.compare(a, b) == {"identical": True, "first_difference": None,
                                    "size_a": size, "size_b": size}
    vstack.create(tmp_path / "c.img", size)
    vstack.convert(a, tmp_path / "c.img", overwrite=True)
    assert vstack.compare(tmp_path / "c.img", a)["identical"]


def test_a_path_argument_of_another_type_is_still_a_type_error():
    with pytest.raises(TypeError):
        vstack.check(42)
    with pytest.raises(TypeError):
        vstack.info(None)


NUL_CALLS = {
    "create": lambda d: vstack.create(f"{d}/b.raw\0.evil", "1M"),
    "create bytes": lambda d: vstack.create(f"{d}/b.raw\0.evil".encode(), "1M"),
    "open": lambda d: vstack.open(f"{d}/a.raw\0junk"),
    "open spec": lambda d: vstack.open(f"file:{d}/x.raw\0junk,create=on,size=1M"),
    "open memory": lambda d: vstack.open("memory:1M\0x"),
    "info": lambda d: vstack.info(f"{d}/a.raw\0zzz"),
    "check": lambda d: vstack.check(f"{d}/a.raw\0zzz", repair="all"),
    "compare a": lambda d: vstack.compare(f"{d}/a.raw\0zzz", f"{d}/a.raw"),
    "compare b": lambda d: vstack.compare(f"{d}/a.raw", f"{d}/a.raw\0zzz"),
    "convert src": lambda d: vstack.convert(f"{d}/a.raw\0zzz", f"{d}/b.raw"),
    "convert dst": lambda d: vstack.convert(f"{d}/a.raw", f"{d}/b.raw\0.evil"),
    "space": lambda d: vstack.space([f"{d}/a.raw\0zzz"]),
    "space sketch": lambda d: vstack.space(f"{d}/a.raw", estimate=True,
                                           sketch=f"{d}/b.raw\0.evil"),
    "space replay_dir": lambda d: vstack.space(f"{d}/a.raw", mode="replay",
                                               replay_dir=f"{d}/r\0x"),
    "space_merge": lambda d: vstack.space_merge([f"{d}/a.raw\0zzz"]),
    "bench stack": lambda d: vstack.bench([f"{d}/a.raw\0zzz"], duration="0.1s", rounds=1),
    "bench fio_job": lambda d: vstack.bench(fio_job=f"{d}/a.raw\0zzz"),
}


@pytest.mark.parametrize("call", NUL_CALLS.values(), ids=NUL_CALLS.keys())
def test_a_path_or_spec_with_a_nul_byte_is_a_value_error_as_os_open_gives(tmp_path, call):
    """A NUL byte cut the path short and another file was used: create('b.raw\\0.evil')
    created b.raw, open('a.raw\\0junk') opened a.raw, a spec with one created the file its
    text before the NUL named."""
    vstack.create(tmp_path / "a.raw", "1M")
    with pytest.raises(ValueError, match="^embedded null byte$") as e:
        call(tmp_path)
    assert not isinstance(e.value, vstack.SpecError)  # os.open's own error, not a spec's
    assert sorted(os.listdir(tmp_path)) == ["a.raw"]
