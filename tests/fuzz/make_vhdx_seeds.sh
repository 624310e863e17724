#!/bin/bash
# Writes the VHDX fuzzer's seed corpus into corpus/vhdx/: small images made by vstack and by
# qemu-img (dynamic, fixed, 4 KiB sectors, written blocks) and one with a dirty log, each stored
# in the fuzzer's sparse form (vhdx_sparse.py: only the non-zero 4 KiB pages, a few KiB). The
# seeds are committed; this script documents them. Usage: tests/fuzz/make_vhdx_seeds.sh build/vstack
set -euo pipefail
VSTACK=${1:?path to the vstack binary}
HERE=$(cd "$(dirname "$0")" && pwd)
SEEDS=$HERE/corpus/vhdx
rm -rf "$SEEDS" && mkdir -p "$SEEDS"
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
OUT=$t/images && mkdir "$OUT"
"$VSTACK" create -f vhdx -o block_size=1M "$OUT/vstack_dynamic.seed" 2M >/dev/null
"$VSTACK" create -f vhdx -o block_size=1M,logical_sector_size=4096 "$OUT/vstack_4k.seed" 3M >/dev/null
"$VSTACK" create -f vhdx -o subformat=fixed,block_size=1M "$OUT/vstack_fixed.seed" 2M >/dev/null
qemu-img create -q -f vhdx -o block_size=1M "$OUT/qemu_dynamic_written.seed" 3M
qemu-io -f vhdx -c 'write -P 0x11 0 4096' -c 'write -P 0x22 2M 8192' "$OUT/qemu_dynamic_written.seed" >/dev/null
"$VSTACK" create -f vhdx -o block_size=1M "$OUT/vstack_written.seed" 3M >/dev/null
qemu-io -f vhdx -c 'write -P 0x44 1M 4096' -c 'write -P 0x55 2M 512' "$OUT/vstack_written.seed" >/dev/null
# A dirty log: qemu's last entry named in both headers, the BAT page put back as before.
qemu-img create -q -f vhdx -o block_size=1M "$t/before" 2M
cp "$t/before" "$OUT/qemu_dirty_log.seed"
qemu-io -f vhdx -c 'write -P 0x33 1M 4096' "$OUT/qemu_dirty_log.seed" >/dev/null
python3 - "$t/before" "$OUT/qemu_dirty_log.seed" <<'PY'
import struct, sys
before = open(sys.argv[1], 'rb').read()
img = bytearray(open(sys.argv[2], 'rb').read())
def crc32c(b):
    crc = 0xFFFFFFFF
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
img[2 << 20:(2 << 20) + 4096] = before[2 << 20:(2 << 20) + 4096]
guid = img[(1 << 20) + 32:(1 << 20) + 48]
for h in (64 << 10, 128 << 10):
    img[h + 48:h + 64] = guid
    img[h + 4:h + 8] = b'\0\0\0\0'
    struct.pack_into('<I', img, h + 4, crc32c(bytes(img[h:h + 4096])))
open(sys.argv[2], 'wb').write(img)
PY
for image in "$OUT"/*.seed; do
  python3 "$HERE/vhdx_sparse.py" encode "$image" "$SEEDS/$(basename "$image")"
done
ls -l "$SEEDS"
