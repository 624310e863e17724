#!/usr/bin/env python3
"""Writes the VHD fuzzer's seed corpus (small, valid and slightly broken images) into
corpus/vhd/. Run it from this directory; the files are committed, this script documents them."""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "vhd")


def checksum(b, at):
    s = sum(b[:at]) + sum(b[at + 4:])
    return (~s) & 0xFFFFFFFF


def footer(disk_type, size, data_offset, geometry=(65535, 16, 255)):
    f = bytearray(512)
    f[0:8] = b"conectix"
    struct.pack_into(">IIQI4sIIQQHBBI", f, 8, 2, 0x10000, data_offset, 0, b"fuzz", 0x10000,
                     0x5769326B, size, size, geometry[0], geometry[1], geometry[2], disk_type)
    f[68:84] = bytes(range(1, 17))
    struct.pack_into(">I", f, 64, checksum(f, 64))
    return bytes(f)


def header(entries, block_size, parent=None):
    """`parent`: (name, [(code, data space, data length, data offset)]) for a differencing disk."""
    h = bytearray(1024)
    h[0:8] = b"cxsparse"
    struct.pack_into(">QQIII", h, 8, 0xFFFFFFFFFFFFFFFF, 1536, 0x10000, entries, block_size)
    if parent:
        name, locators = parent
        h[40:56] = bytes(range(17, 33))  # parent unique ID
        struct.pack_into(">I", h, 56, 12345)  # parent time stamp
        encoded = name.encode("utf-16-be")[:512]
        h[64:64 + len(encoded)] = encoded
        for i, (code, space, length, offset) in enumerate(locators):
            struct.pack_into(">4sIIIQ", h, 576 + 24 * i, code, space, length, 0, offset)
    struct.pack_into(">I", h, 36, checksum(h, 36))
    return bytes(h)


def dynamic(size, block_size, blocks, parent=None, disk_type=3):
    """`blocks`: {block index: (bitmap bytes, data bytes)} placed after the BAT."""
    entries = (size + block_size - 1) // block_size
    bat_bytes = (entries * 4 + 511) // 512 * 512
    f = footer(disk_type, size, 512)
    body = bytearray(f + header(entries, block_size, parent) + b"\xff" * bat_bytes)
    bm_size = ((block_size // 512 + 7) // 8 + 511) // 512 * 512
    for index, (bitmap, data) in sorted(blocks.items()):
        sector = len(body) // 512
        struct.pack_into(">I", body, 1536 + 4 * index, sector)
        body += bitmap.ljust(bm_size, b"\0") + data.ljust(block_size, b"\0")
    return bytes(body) + f


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as out:
        out.write(data)


os.makedirs(OUT, exist_ok=True)
write("fixed_4k.seed", bytes(range(256)) * 16 + footer(2, 4096, 0xFFFFFFFFFFFFFFFF))
write("fixed_legacy511.seed", b"\x5a" * 4096 + footer(2, 4096, 0xFFFFFFFFFFFFFFFF)[:511])
write("dynamic_fresh.seed", dynamic(1 << 20, 512 << 10, {}))
partial = dynamic(64 << 10, 4096, {0: (b"\xff", b"\x11" * 4096), 3: (b"\x30", b"\x22" * 4096)})
write("dynamic_4k_blocks.seed", partial)
write("dynamic_chs.seed", dynamic(8 << 10, 4096, {1: (b"\xf0", b"\x33" * 2048)})[:-512] +
      footer(3, 8 << 10, 512, (1, 4, 4)))
torn = bytearray(partial)
torn[-512:] = b"\xc7" * 512  # the end footer killed; the copy at offset 0 is good
write("dynamic_no_end_footer.seed", bytes(torn))


# Differencing disks: locator data placed after the BAT (W2ku, W2ru as UTF-16LE, MacX as a
# URL), then the same with a locator pointing outside the file and one of a huge length.
def differencing(locators, data=b""):
    image = bytearray(dynamic(64 << 10, 4096, {0: (b"\x0f", b"\x44" * 4096)},
                              ("base.vhd", locators), 4))
    return bytes(image[:-512]) + data + bytes(image[-512:])


paths = ["/img/base.vhd".encode("utf-16-le"), ".\\base.vhd".encode("utf-16-le"),
         b"file:///img/base.vhd"]
at = 1536 + 512 + 512 + 4096  # after the header, BAT and the one block: the data
locs = []
blob = b""
for code, path in zip([b"W2ku", b"W2ru", b"MacX"], paths):
    locs.append((code, 512, len(path), at + len(blob)))
    blob += path.ljust(512, b"\0")
write("differencing_locators.seed", differencing(locs, blob))
write("differencing_locator_outside.seed",
      differencing([(b"W2ku", 512, 40, 1 << 40), (b"W2ru", 1, 0xFFFFFFFF, at)], b"\0" * 512))
write("differencing_no_locators.seed", differencing([]))


def with_bat(image, entries):
    """`image` with BAT entries {index: value} replaced (the BAT is at 1536)."""
    b = bytearray(image)
    for index, value in entries.items():
        struct.pack_into(">I", b, 1536 + 4 * index, value)
    return bytes(b)


# Hostile BATs (docs/layers/vhd.md, "Hostile input"): two entries pointing at one block (check
# must call it corruption, never a leak, and free nothing), an entry into the header, entries
# past the end, and entries of 0 (what a BAT that is a hole in a sparse file reads as).
four = dynamic(16 << 10, 4096, {b: (b"\xff", bytes([0xA0 + b]) * 4096) for b in range(4)})
first = struct.unpack_from(">I", four, 1536 + 8)[0]
write("dynamic_duplicate_entry.seed", with_bat(four, {3: first}))
write("dynamic_entry_into_header.seed", with_bat(four, {1: 2}))
write("dynamic_entries_past_end.seed", with_bat(four, {0: 0x00FFFFFF, 2: len(four) // 512 - 2}))
write("dynamic_zero_entries.seed", with_bat(four, {b: 0 for b in range(4)}))
# A header claiming 64 Mi entries: refused by the cap before any table is read.
big = bytearray(dynamic(1 << 20, 512 << 10, {}))
h = bytearray(header(64 << 20, 512 << 10))
big[512:1536] = h
write("dynamic_huge_max_entries.seed", bytes(big))
