#!/usr/bin/env python3
"""Writes the MetaStore fuzzer's seeds (corpus/metastore/): for each of dedup, zstd and crc32c,
a 4 MiB device formatted by `vstack convert` from 128 KiB of zeros, duplicates, text and
random bytes, kept as its non-zero 4 KiB pages in metastore_fuzz.cc's input format (a layer
byte, then [u16 page number][4096 bytes] records; metadata pages first, at most 48 pages).
Usage: make_metastore_seeds.py path/to/vstack. The files are committed; this documents them."""
import os
import random
import struct
import subprocess
import sys
import tempfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "metastore")
PAGE = 4096
LAYERS = {"dedup": (0, "dedup:size=2M"), "zstd": (1, "zstd:size=2M"), "crc32c": (2, "crc32c")}


def source(rng):
    text = b"the quick brown fox jumps over the lazy dog " * 100
    blocks = [bytes(PAGE), text[:PAGE], bytes(rng.getrandbits(8) for _ in range(PAGE))]
    out = b""
    for i in range(32):
        out += blocks[i % 3] if i % 4 else bytes(rng.getrandbits(8) for _ in range(PAGE))
    return out


def main():
    vstack = sys.argv[1]
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src.raw")
        with open(src, "wb") as f:
            f.write(source(rng))
        for name, (selector, layer) in LAYERS.items():
            img = os.path.join(tmp, name + ".img")
            subprocess.run([vstack, "convert", src, f"{layer}+file:{img},create=on,size=4M"],
                           check=True)
            data = open(img, "rb").read()
            pages = [n for n in range(len(data) // PAGE) if any(data[n * PAGE:(n + 1) * PAGE])]
            seed = bytes([selector])
            for n in pages[:48]:
                seed += struct.pack("<H", n) + data[n * PAGE:(n + 1) * PAGE]
            with open(os.path.join(OUT, name + ".seed"), "wb") as f:
                f.write(seed)
            print(f"{name}.seed: {min(len(pages), 48)} of {len(pages)} pages")


if __name__ == "__main__":
    main()
