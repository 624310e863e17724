"""vstack: virtual storage stacks in a Python script or notebook.

Open a stack by its spec, drive it with your own I/O and read its counters; create, check,
convert, compare and inspect images, with the library the `vstack` command is built on::

    import vstack
    with vstack.open("dedup+zstd+memory:64M") as dev:
        dev.write(0, b"x" * 4096)
        assert dev.read(0, 4096) == b"x" * 4096
        print(dev.stats()["layers"][0]["stats"]["counters"])

See docs/python.md.
"""

import atexit as _atexit
import weakref as _weakref

from vstack._vstack import (
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
from vstack._vstack import open as _open

__all__ = [
    "Device",
    "IoError",
    "SpecError",
    "__version__",
    "check",
    "compare",
    "convert",
    "create",
    "info",
    "layers",
    "open",
]

# Devices still open when the interpreter exits are closed then, so that their metadata is
# persisted even if a reference cycle or a global keeps them alive past the last collection.
_open_devices = _weakref.WeakSet()


def open(spec, *, read_only=False):  # noqa: A001 (vstack.open, as io.open)
    """Opens a stack: a spec such as 'dedup+zstd+vhd+file:d.vhd', or an image file whose
    format is probed. Returns a Device (a context manager). Raises vstack.SpecError for a bad
    spec (with the CLI's message and suggestion), vstack.IoError when it cannot be opened."""
    device = _open(spec, read_only=read_only)
    _open_devices.add(device)
    return device


@_atexit.register
def _close_open_devices():
    for device in list(_open_devices):
        try:
            device.close()
        except Exception:  # noqa: BLE001 (exiting: nothing left to report to)
            pass
