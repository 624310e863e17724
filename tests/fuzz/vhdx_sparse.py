#!/usr/bin/env python3
"""The VHDX fuzzer's sparse input format (tests/fuzz/vhdx_fuzz.cc has the definition).

  vhdx_sparse.py encode IMAGE SEED   the image's non-zero 4 KiB pages, trailing zeros trimmed
  vhdx_sparse.py expand SEED IMAGE   the image a seed (or a crash input) describes
"""
import struct
import sys

PAGE = 4096
MAX_PAGES = 8192


def encode(image):
    if len(image) > PAGE * MAX_PAGES:
        sys.exit(f"image of {len(image)} bytes is larger than the fuzzer's {PAGE * MAX_PAGES}")
    out = bytearray(struct.pack('<I', (len(image) + PAGE - 1) // PAGE))
    for page in range(0, (len(image) + PAGE - 1) // PAGE):
        data = image[page * PAGE:(page + 1) * PAGE].rstrip(b'\0')
        if data:
            out += struct.pack('<IH', page, len(data)) + data
    return bytes(out)


def expand(seed):
    pages = min(max(struct.unpack_from('<I', seed)[0], 1), MAX_PAGES)
    records = []
    at = 4
    while at + 6 <= len(seed):
        page, n = struct.unpack_from('<IH', seed, at)
        page %= MAX_PAGES
        n = min(n, PAGE, len(seed) - at - 6)
        records.append((page, seed[at + 6:at + 6 + n]))
        pages = max(pages, page + 1)
        at += 6 + n
    image = bytearray(pages * PAGE)
    for page, data in records:
        image[page * PAGE:(page + 1) * PAGE] = data.ljust(PAGE, b'\0')
    return bytes(image)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ('encode', 'expand'):
        sys.exit(__doc__)
    with open(sys.argv[2], 'rb') as f:
        data = f.read()
    with open(sys.argv[3], 'wb') as f:
        f.write(encode(data) if sys.argv[1] == 'encode' else expand(data))


if __name__ == '__main__':
    main()
