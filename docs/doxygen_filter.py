#!/usr/bin/env python3
"""Doxygen input filter for vstack's public headers (docs/Doxyfile.in).

The headers document their contracts in plain // comments (Google style). Doxygen reads only
/// comments, so this filter, run on each header as Doxygen reads it, turns
  - the comment block at the top of a file into the file's description (\\file),
  - a comment on lines of its own into a /// comment for the declaration below,
  - a comment after a declaration on the same line into ///< for that declaration.
In comment text, "#word" (not a link request) and "<T>" (not an HTML tag) are escaped.
Nothing else changes; the headers themselves stay as they are.
"""
import re
import sys

OWN_LINE = re.compile(r"^(\s*)// ?(.*)$")
TRAILING = re.compile(r"^(\s*[^\s/].*?)(\s+)// (.*)$")


def text(comment):
    comment = re.sub(r"(?<![\\\w])#(\w)", r"\\#\1", comment)
    return re.sub(r"<([A-Z])>", r"\\<\1\\>", comment)


def convert(lines):
    out = []
    at_top = True
    for line in lines:
        own = OWN_LINE.match(line)
        if at_top and own:
            if not out:
                out.append("/// \\file")
            out.append(f"{own.group(1)}/// {text(own.group(2))}")
            continue
        at_top = False
        if own:
            out.append(f"{own.group(1)}/// {text(own.group(2))}")
            continue
        trailing = TRAILING.match(line)
        if trailing and '"' not in trailing.group(1) and not line.lstrip().startswith("#"):
            out.append(f"{trailing.group(1)}{trailing.group(2)}///< {text(trailing.group(3))}")
            continue
        out.append(line)
    return out


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        lines = f.read().split("\n")
    sys.stdout.write("\n".join(convert(lines)))


if __name__ == "__main__":
    main()
