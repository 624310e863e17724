"""vstack: virtual storage stacks in a Python script or notebook.

Open a stack by its spec, drive it with your own I/O and read its counters; create, check,
convert, compare and inspect images; benchmark stacks side by side and report their space
savings, with the library the `vstack` command is built on::

    import vstack
    with vstack.open("dedup+zstd+memory:64M") as dev:
        dev.write(0, b"x" * 4096)
        assert dev.read(0, 4096) == b"x" * 4096
        print(dev.stats()["layers"][0]["stats"]["counters"])

See docs/python.md.
"""

import atexit as _atexit
import os as _os
import shlex as _shlex
import weakref as _weakref

import sys as _sys

from vstack._vstack import (
    BenchResult,
    Device,
    IoError,
    SpecError,
    __version__,
    check,
    compare,
    convert,
    create,
    info,
    layers,
)
from vstack._vstack import _bench, _close_exit_gate, _space, _space_merge
from vstack._vstack import open as _open

__all__ = [
    "BenchResult",
    "Device",
    "IoError",
    "SpecError",
    "__version__",
    "bench",
    "check",
    "compare",
    "convert",
    "create",
    "info",
    "layers",
    "open",
    "space",
    "space_merge",
]

# Devices still open when the interpreter exits are closed then, so that their metadata is
# persisted even if a reference cycle or a global keeps them alive past the last collection.
_open_devices = _weakref.WeakSet()


def open(spec, *, read_only=False, latency=False):  # noqa: A001 (vstack.open, as io.open)
    """Opens a stack: a spec such as 'dedup+zstd+vhd+file:d.vhd', or an image file whose
    format is probed. Returns a Device (a context manager). With latency=True every layer
    keeps latency for Device.stats() (as `vstack bench` asks; a part with stats=counts in the
    spec excepted); without, only the parts with stats=latency in the spec, the others
    reporting latency_ns None. Raises vstack.SpecError for a bad spec (with the CLI's message
    and suggestion), vstack.IoError when it cannot be opened."""
    device = _open(_os.fspath(spec), read_only=read_only, latency=latency)
    _open_devices.add(device)
    return device


@_atexit.register
def _close_open_devices():
    # First, the threads still inside a vstack call (daemon threads) are parked when they would
    # take the GIL back: Python ends such a thread with pthread_exit() once it finalizes, which
    # from C++ aborted the process.
    _close_exit_gate()
    for device in list(_open_devices):
        try:
            device.close()
        except Exception:  # noqa: BLE001 (exiting: nothing left to report to)
            pass


def _knob_text(value):
    """A knob's value as the CLI takes it: True -> 'true', [1.2, 5] -> '1.2,5', 8 -> '8'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class _TextBar:
    """progress=True: one line on stderr, rewritten at each progress event."""

    def __init__(self, stream=None):
        self.stream = stream or _sys.stderr
        self.shown = False

    def __call__(self, event):
        rounds = event["rounds"] or "?"
        line = f"round {event['round'] + 1}/{rounds} {event['stack']}: {event['activity']}"
        if event["total_s"] > 0:
            done = min(1.0, event["elapsed_s"] / event["total_s"])
            line += " [" + "#" * int(done * 20) + "." * (20 - int(done * 20)) + "]"
        if event["iops"] > 0:
            line += f" {event['iops']:,.0f} IOPS"
        self.stream.write("\r" + line[:100].ljust(100))
        self.stream.flush()
        self.shown = True

    def finish(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def bench(stacks=(), *, progress=None, diskspd="", fio_job="", **knobs):
    """Runs one workload through several stacks side by side, in interleaved rounds, as
    `vstack bench` does, and returns a BenchResult (.json, .records(), .to_pandas(),
    .report(dir)).

    stacks: presets, stack specs or image paths (the CLI's --stack); none: the default matrix.
    knobs: the CLI's options by name with '_' for '-', e.g. bs='8K', write_pct=50, qd=8,
    threads=4, duration='2s', rounds=5, warmup=0, size='16M', preset='kvm-hyperv'; each is
    checked as the CLI checks it. diskspd='-b8K -o8 -r' or fio_job='job.fio' run a foreign
    command line's translation, the knobs given here winning over it (as typed options do).
    progress: a callable given one dict per progress event (round, rounds, stack, activity,
    elapsed_s, total_s, warming_up, ios, iops), or True for a text bar on stderr.

    Raises ValueError for a knob the CLI refuses (same words), vstack.SpecError for a stack
    that does not open. The GIL is released while it runs; Ctrl-C stops the run and raises
    KeyboardInterrupt. A run that fails once started returns with .outcome 'failed'."""
    if isinstance(stacks, (str, _os.PathLike)):
        stacks = [stacks]
    stacks = [_os.fspath(s) for s in stacks]
    texts = [("--" + name.replace("_", "-"), _knob_text(v)) for name, v in knobs.items()]
    bar = _TextBar() if progress is True else None
    callback = bar or (progress or None)
    if callback is not None and not callable(callback):
        raise TypeError("progress: expected a callable, True or None")
    # The reports show the CLI line that runs the same benchmark.
    argv = ["vstack", "bench"] + [a for s in stacks for a in ("--stack", s)]
    argv += [a for knob in texts for a in knob]
    argv += ["--diskspd", diskspd] if diskspd else []
    argv += ["--fio-job", str(fio_job)] if fio_job else []
    try:
        return _bench(stacks, texts, diskspd or "", fio_job or "",
                      _shlex.join(argv), callback)
    finally:
        if bar is not None:
            bar.finish()


def _to_pandas(self):
    """The records() as a pandas DataFrame, one row per stack per round."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError(
            "BenchResult.to_pandas() needs pandas: apt install python3-pandas "
            "(or pip install pandas); BenchResult.records() gives the same rows as dicts"
        ) from e
    return pandas.DataFrame(self.records())


BenchResult.to_pandas = _to_pandas


def space(images, **options):
    """vSAN-style space savings of images (files or stack specs), as `vstack space
    --output=json` reports them: a dict. options: the CLI's by name (scope='image',
    grain='8K', dedup='off', codec='zstd:3', rule, protection, checksum, mode='replay',
    replay_dir, threads, estimate=True, fraction='1%', accuracy, confidence, seed,
    sketch='s.sketch' to write an estimate's sketch for space_merge). Raises vstack.SpecError
    for an option refused (the CLI's words), ValueError for no image at all (as the CLI
    refuses it), vstack.IoError for an image that cannot be read. Ctrl-C stops the analysis at
    its next chunk read (KeyboardInterrupt), after a replay has removed what it created."""
    if isinstance(images, (str, _os.PathLike)):
        images = [images]
    # on|off options take Python's booleans too, as bench() does.
    options = {k: ("on" if v else "off") if isinstance(v, bool) and k in ("dedup", "checksum")
               else v for k, v in options.items()}
    return _space([_os.fspath(i) for i in images], options)


def space_merge(sketches, **options):
    """The combined estimate of sketch files (space(..., estimate=True, sketch=PATH)), as
    `vstack space merge --output=json` reports it; options: protection, checksum,
    confidence (the sketches' own sampling parameters replace the rest)."""
    if isinstance(sketches, (str, _os.PathLike)):
        sketches = [sketches]
    return _space_merge([_os.fspath(s) for s in sketches], dict(options))
