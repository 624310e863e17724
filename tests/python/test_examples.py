"""examples/python/overhead.py runs as its users run it, with matplotlib's Agg backend: it prints
the table of the three stacks and saves the chart (a short run: the figures are not checked)."""

import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_overhead_example_prints_the_table_and_saves_the_chart(tmp_path):
    chart = tmp_path / "overhead.png"
    env = dict(os.environ, MPLBACKEND="Agg", TMPDIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "overhead.py"),
         "--duration", "0.1s", "--rounds", "3", "--size", "8M", "--chart", str(chart)],
        cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(line for line in lines if "iops_vs_base" in line)
    assert header.split() == ["iops", "p99_us", "cpu_us_per_io", "iops_vs_base", "ratio",
                              "ci_low", "ci_high"]
    rows = [line.split()[0] for line in lines[lines.index(header) + 2:] if line and
            not line.startswith("chart:")]
    assert rows == ["raw", "vhd-fixed", "dedup"], out.stdout
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "chart: " + str(chart) in out.stdout
