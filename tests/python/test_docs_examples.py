"""Every Python example in README.md and docs/ runs as written: the ```python blocks of each
page run in order, as one script, in a fresh directory, with the installed module and
matplotlib's Agg backend. A block that cannot run in a test is listed below with the reason; a
listed block that matches nothing fails the test, so the list cannot go stale (the same rules as
tests/tools/docs_examples_test.cc for the CLI's examples)."""

import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# (page, first line of the block) -> why it is not run.
NOT_RUN = {}


def pages():
    found = [os.path.join(ROOT, "README.md")]
    for d in ("docs", "docs/layers"):
        found += glob.glob(os.path.join(ROOT, d, "*.md"))
    return sorted(os.path.relpath(p, ROOT) for p in found)


def python_blocks(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)


PAGES = [p for p in pages() if python_blocks(p)]


def test_docs_have_python_examples():
    assert "docs/python.md" in PAGES


@pytest.mark.parametrize("page", PAGES)
def test_python_examples_run(page, tmp_path):
    script = []
    for block in python_blocks(page):
        first = block.splitlines()[0] if block.strip() else ""
        if (page, first) in NOT_RUN:
            continue
        script.append(block)
    path = tmp_path / "examples.py"
    path.write_text("\n".join(script))
    env = dict(os.environ, MPLBACKEND="Agg", TMPDIR=str(tmp_path))
    out = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, f"{page}:\n{out.stdout}\n{out.stderr}"


def test_every_listed_exception_matches_a_block():
    for page, first in NOT_RUN:
        assert any(b.splitlines()[0] == first for b in python_blocks(page)), (page, first)
