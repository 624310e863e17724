#!/usr/bin/env python3
"""What each layer costs: a small matrix (raw file, fixed VHD, dedup) run by vstack.bench() on
temporary files, printed as a pandas table of medians and saved as a matplotlib chart of each
stack's IOPS ratio to the raw file, with the 95% interval of every ratio.

    python3 overhead.py [--duration 0.5s] [--rounds 5] [--size 16M] [--chart overhead.png]

Needs python3-pandas and python3-matplotlib (MPLBACKEND=Agg without a display)."""

import argparse

import matplotlib
import matplotlib.pyplot as plt
import pandas

import vstack

# vstack bench's presets: a raw file (the baseline), a fixed VHD and dedup, each on a temporary
# file of its own filled once (docs/bench.md, "Stacks").
STACKS = ["raw", "vhd-fixed", "dedup"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="0.5s", help="measured time per run")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--size", default="16M", help="bytes exercised (and each file's size)")
    parser.add_argument("--chart", default="overhead.png", help="the chart (PNG or SVG)")
    args = parser.parse_args()

    result = vstack.bench(STACKS, bs="4K", write_pct=30, qd=4, threads=1,
                          size=args.size, warmup=0, duration=args.duration, rounds=args.rounds,
                          backend="file", direct="off")
    # The rounds as a table: one row per stack per round; the medians per stack.
    rounds = result.to_pandas()
    table = rounds.groupby("stack", sort=False)[["iops", "p99_us", "cpu_us_per_io",
                                                  "iops_vs_base"]].median()

    # The summary's ratio to the baseline (the geometric mean of the rounds' ratios) with its 95%
    # interval (None with fewer than 2 rounds).
    ratio = {}
    for s in result.json["stacks"]:
        iops = s["summary"]["vs_base"]["iops"]
        ratio[s["name"]] = (iops["estimate"], iops["ci_low"], iops["ci_high"])
    table["ratio"] = [ratio[n][0] for n in table.index]
    table["ci_low"] = [ratio[n][1] for n in table.index]
    table["ci_high"] = [ratio[n][2] for n in table.index]
    with pandas.option_context("display.width", 120, "display.max_columns", None, "display.float_format", "{:,.3f}".format):
        print(table)

    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = list(table.index)
    values = table["ratio"].tolist()
    low = [v - (lo if lo is not None and lo == lo else v) for v, lo in zip(values, table["ci_low"])]
    high = [(hi if hi is not None and hi == hi else v) - v for v, hi in zip(values, table["ci_high"])]
    ax.bar(labels, values, color=["#888888"] + ["#4477aa"] * (len(labels) - 1))
    ax.errorbar(labels, values, yerr=[low, high], fmt="none", ecolor="black", capsize=6)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    for x, v in enumerate(values):
        ax.annotate(f"{v:.2f}", (x, v), textcoords="offset points", xytext=(14, 4))
    ax.set_ylabel("IOPS / raw IOPS\n(geometric mean of rounds, 95% interval)")
    ax.set_title(f"4 KiB random, 30% writes, QD4: {args.rounds} rounds of {args.duration}")
    ax.set_ylim(0, max(1.2, max(h + v for h, v in zip(high, values)) * 1.1))
    fig.tight_layout()
    fig.savefig(args.chart)
    print(f"chart: {args.chart} (matplotlib backend {matplotlib.get_backend()})")


if __name__ == "__main__":
    main()
