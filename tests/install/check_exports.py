#!/usr/bin/env python3
"""Checks that a shared libvstack exports the public API and nothing else.

  check_exports.py LIBVSTACK_SO INCLUDE_DIR

Every dynamic symbol the library defines (nm -D --defined-only) must be a vstack:: name (or
its vtable/typeinfo), and every name it is made of (namespace, class, member) must be declared
in the public headers under INCLUDE_DIR/vstack. Internal classes, the C++ library's template
instantiations and the third-party libraries (zstd, xxHash, ISA-L, liburing) must not appear.
A few entry points the examples use must be there. Prints the number of exported symbols.
"""
import pathlib
import re
import subprocess
import sys

PREFIXES = ("typeinfo name for ", "typeinfo for ", "vtable for ", "VTT for ",
            "guard variable for ", "non-virtual thunk to ", "virtual thunk to ")
REQUIRED = ("vstack::Open(", "vstack::Version()", "vstack::CreateImage(",
            "vstack::bench::RunMatrix(", "vstack::bench::Attribute(", "vtable for vstack::Layer",
            "vstack::bench::Benchmark(", "vstack::AnalyzeSpace(", "vstack::MergeSpaceSketches(")


def strip_templates(name):
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def qualified_name(symbol):
    for p in PREFIXES:
        if symbol.startswith(p):
            symbol = symbol[len(p):]
    # Cut the parameter list: the first '(' outside template brackets.
    depth = 0
    for i, ch in enumerate(symbol):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and not symbol.startswith("(anonymous", i):
            symbol = symbol[:i]
            break
    return strip_templates(symbol)


def main():
    lib, include = sys.argv[1], pathlib.Path(sys.argv[2])
    headers = " ".join(p.read_text() for p in (include / "vstack").rglob("*.h"))
    words = set(re.findall(r"[A-Za-z_]\w*", headers))
    nm = subprocess.run(["nm", "-D", "--defined-only", "-C", lib], check=True,
                        capture_output=True, text=True).stdout
    symbols = [line.split(" ", 2)[2] for line in nm.splitlines() if line.count(" ") >= 2]
    bad = []
    for s in symbols:
        name = qualified_name(s)
        if not name.startswith("vstack::"):
            bad.append(f"{s}: not in namespace vstack")
            continue
        for part in name.split("::")[1:]:
            part = re.sub(r"\[abi:\w+\]", "", part)
            part = re.sub(r"^(operator\b.*|~)", "", part).strip()
            if part and part not in words:
                bad.append(f"{s}: '{part}' is not declared in a public header")
                break
    for r in REQUIRED:
        if not any(s.startswith(r) for s in symbols):
            bad.append(f"missing: {r}...")
    if bad:
        print(f"{lib}: {len(bad)} problem(s) among {len(symbols)} exported symbols:")
        print("\n".join("  " + b for b in bad[:50]))
        return 1
    print(f"{lib}: {len(symbols)} exported symbols, all declared in {include}/vstack")
    return 0


if __name__ == "__main__":
    sys.exit(main())
