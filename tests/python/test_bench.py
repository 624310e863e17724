"""vstack.bench() and vstack.space() against the CLI of the same prefix: the same documents
field by field (the measured values aside), the knobs refused with the CLI's words, the
progress callback, BenchResult.records(), .to_pandas() and .report()."""

import errno
import json
import numbers
import os

import pytest

import vstack

# One small run: two memory stacks, one round of 0.2 s.
STACKS = ["memory:16M", "dedup+memory:32M"]
KNOBS = dict(size="8M", rounds=1, warmup=0, duration="0.2s", qd=2, threads=1)
CLI_KNOBS = ["--size", "8M", "--rounds", "1", "--warmup", "0", "--duration", "0.2s",
             "--qd", "2", "--threads", "1"]

# What differs between two runs of the same knobs, and so is not compared by value:
# - every number outside "knobs" (IOPS, latencies, CPU, byte and I/O counts, ratios and their
#   intervals) except the structural ones in SAME_NUMBERS;
# - text made from measured numbers (MEASURED_TEXT), and flags decided by them (MEASURED_FLAGS);
# - "command" (the Python run's is the CLI line it is equal to) and "scratch_dir" (a new
#   temporary directory each run).
# Everything else, the keys at every level and the lengths of every list, must be equal.
SAME_NUMBERS = {"round", "seed", "index", "n", "rounds", "runs", "rounds_done",
                "rounds_planned", "median_round", "region_bytes", "threads", "level"}
MEASURED_TEXT = {"description", "chain", "words", "cpu_words", "gap", "noise_warning",
                 "command", "scratch_dir"}
MEASURED_FLAGS = {"cpu_adds_up", "significant", "self_time_resolved", "self_median_resolved",
                  "own_overlaps", "timed", "precision_reached", "measured"}


def compare(a, b, path="", key=""):
    if key == "cpu_phases":
        # The CPU split by phase (docs/bench.md): measured, and a phase no sample fell in is
        # left out, so neither the values nor the set of phases is the same from run to run.
        assert (a is None or isinstance(a, dict)) and (b is None or isinstance(b, dict)), path
        return
    if isinstance(a, dict):
        assert isinstance(b, dict), path
        assert sorted(a) == sorted(b), path
        for k in a:
            compare(a[k], b[k], f"{path}.{k}", k)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", key)
    elif path.startswith(".knobs") or key in SAME_NUMBERS:
        assert a == b, path
    elif key in MEASURED_TEXT or key in MEASURED_FLAGS:
        assert type(a) is type(b) or None in (a, b), path
    elif isinstance(a, bool) or isinstance(a, str):
        assert a == b, path
    elif a is not None and b is not None:
        assert isinstance(a, numbers.Number) and isinstance(b, numbers.Number), path


@pytest.fixture(scope="module")
def run():
    return vstack.bench(STACKS, **KNOBS)


def test_bench_json_is_the_clis_field_by_field(run, cli):
    args = ["bench"] + [a for s in STACKS for a in ("--stack", s)] + CLI_KNOBS
    theirs = cli.json(*args, "--no-report", "--quiet")
    ours = run.json
    compare(ours, theirs)
    assert ours["command"] == "vstack bench " + " ".join(args[1:])
    assert [s["name"] for s in ours["stacks"]] == STACKS
    assert run.outcome == "ok"
    assert "dedup+memory:32M" in run.text


def test_bench_records(run):
    records = run.records()
    assert len(records) == len(STACKS) * KNOBS["rounds"]
    assert [(r["stack"], r["round"]) for r in records] == [(s, 1) for s in STACKS]
    for key in ("iops", "mib_s", "p50_us", "p99_us", "cpu_us_per_io", "iops_vs_base",
                "cpu_per_io_vs_base", "p99_vs_base"):
        assert all(isinstance(r[key], numbers.Number) for r in records), key
    assert records[0]["baseline"] and records[0]["iops_vs_base"] == 1.0
    assert records[1]["iops_vs_base"] == pytest.approx(records[1]["iops"] / records[0]["iops"])


def test_bench_to_pandas(run):
    pandas = pytest.importorskip("pandas")
    frame = run.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.columns) == list(run.records()[0])
    assert len(frame) == len(STACKS)


def test_bench_to_pandas_without_pandas_says_what_to_install(run, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)  # import pandas fails
    with pytest.raises(ImportError, match="needs pandas: apt install python3-pandas"):
        run.to_pandas()


def test_bench_report_writes_the_clis_folder(run, tmp_path):
    run.report(str(tmp_path / "r"))
    assert (tmp_path / "r" / "index.html").exists()
    with open(tmp_path / "r" / "report.json") as f:
        assert [s["name"] for s in json.load(f)["stacks"]] == STACKS


def test_bench_report_refuses_a_folder_with_a_nul_byte(run, tmp_path):
    """The folder was cut at the NUL: the report went into another folder."""
    with pytest.raises(ValueError, match="^embedded null byte$"):
        run.report(f"{tmp_path}/report\0x")
    assert os.listdir(tmp_path) == []


def test_bench_progress_callback_and_bar(capfd):
    events = []
    vstack.bench(["memory:16M"], progress=events.append, **KNOBS)
    assert events and {"round", "rounds", "stack", "activity", "iops"} <= set(events[0])
    assert {e["stack"] for e in events} == {"memory:16M"}
    vstack.bench(["memory:16M"], progress=True, **KNOBS)
    assert "round 1/1 memory:16M" in capfd.readouterr().err


def test_bench_progress_callback_error_stops_the_run():
    def fail(event):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        vstack.bench(["memory:16M"], progress=fail, **KNOBS)


# Each refused knob with the library's words, which the CLI prints too, except where the CLI's
# flag parser refuses a non-number itself before the library sees it (its words: "Could not
# convert: --qd = x"): `cli_same` False.
@pytest.mark.parametrize("knobs,words,cli_same", [
    (dict(qd="x"), "--qd: 'x' is not a whole number", False),
    (dict(qdd=8), "unknown knob '--qdd'; did you mean `--qd`?", False),
    (dict(bs="1000"), "--bs: 1000 is not a positive multiple of 512", True),
    (dict(pattern="randon"), "did you mean `random`?", True),
    (dict(write_pct=101), "--write-pct: 101 is not in 0..100", True),
    (dict(duration="soon"), "--duration: 'soon' is not a time", True),
])
def test_bench_bad_knobs_are_value_errors_with_the_clis_words(knobs, words, cli_same, cli):
    with pytest.raises(ValueError) as e:
        vstack.bench(["memory:16M"], **knobs)
    assert not isinstance(e.value, vstack.SpecError)
    assert words in str(e.value)
    if cli_same:
        flags = [a for k, v in knobs.items() for a in ("--" + k.replace("_", "-"), str(v))]
        theirs = cli.run("bench", "--stack", "memory:16M", *flags, check=False)
        assert theirs.returncode == 2
        assert f"vstack bench: {e.value}\n" in theirs.stderr


def test_bench_bad_spec_is_a_spec_error_with_the_clis_words(cli):
    with pytest.raises(vstack.SpecError, match="unknown layer 'dedupp'") as e:
        vstack.bench(["dedupp+memory:16M"], **KNOBS)
    theirs = cli.run("bench", "--stack", "dedupp+memory:16M", check=False)
    assert theirs.returncode == 2 and f"vstack bench: {e.value}\n" in theirs.stderr


def test_bench_diskspd_typed_knobs_win(tmp_path):
    r = vstack.bench(["memory:16M"], diskspd="-b16K -o4 -t2 -r -w0 -d300", size="8M",
                     rounds=1, warmup=0, duration="0.2s")
    knobs = r.json["knobs"]
    assert (knobs["block_size"], knobs["queue_depth"], knobs["threads"]) == (16384, 4, 2)
    assert knobs["duration_s"] == 0.2 and knobs["write_pct"] == 0
    assert any("runs as --bs 16K" in m and "--duration as given on the command line" in m
               for m in r.messages)
    job = tmp_path / "seed.fio"
    job.write_text("[seed]\nrw=randwrite\nbs=16k\niodepth=2\n")
    f = vstack.bench(["memory:16M"], fio_job=str(job), **KNOBS)
    assert f.json["knobs"]["write_pct"] == 100 and f.json["knobs"]["queue_depth"] == 2
    with pytest.raises(ValueError, match="'-g500' has no equivalent"):
        vstack.bench(["memory:16M"], diskspd="-g500")
    with pytest.raises(vstack.IoError, match="cannot read"):
        vstack.bench(["memory:16M"], fio_job=str(tmp_path / "none.fio"))
    # A directory is a file that cannot be read, as for open() (it was a ValueError here, and
    # space_merge's a SpecError).
    with pytest.raises(vstack.IoError, match="is a directory") as e:
        vstack.bench(["memory:16M"], fio_job=str(tmp_path))
    assert e.value.errno == errno.EISDIR
    with pytest.raises(vstack.IoError, match="is a directory") as e:
        vstack.space_merge(tmp_path)
    assert e.value.errno == errno.EISDIR


def image(tmp_path, name, blocks):
    path = tmp_path / name
    with open(path, "wb") as f:
        for b in blocks:
            f.write(bytes([b]) * 4096 if b else b"\0" * 4096)
    return str(path)


def without_seconds(doc):
    """The document without what two runs of the same seed may differ in: the time taken, and
    the estimate's work counters that depend on how its worker threads interleave (a grain two
    workers meet at once may be compressed by both; the peaks depend on the merge order)."""
    doc = json.loads(json.dumps(doc))
    doc.pop("seconds", None)
    for key in ("seconds", "bytes_compressed", "peak_fingerprints", "peak_memory_bytes"):
        doc.get("estimate", {}).pop(key, None)
    return doc


def test_space_is_the_clis(tmp_path, cli):
    a = image(tmp_path, "a.raw", [1, 2, 0, 1, 3] * 40)
    b = image(tmp_path, "b.raw", [1, 4, 0, 0] * 40)
    for options, flags in [({}, []),
                           (dict(scope="image", protection="raid5", grain="8K"),
                            ["--scope", "image", "--protection", "raid5", "--grain", "8K"]),
                           (dict(estimate=True, fraction="50%", seed=3),
                            ["--estimate", "--fraction", "50%", "--seed", "3"])]:
        ours = vstack.space([a, b], **options)
        theirs = cli.json("space", a, b, *flags)
        assert without_seconds(ours) == without_seconds(theirs), options


def test_space_takes_paths_and_booleans(tmp_path, cli):
    """pathlib paths and dedup=False / checksum=True, as bench() takes booleans (they were
    refused: "'False' is not one of on|off", "'PosixPath' object is not iterable")."""
    a = image(tmp_path, "a.raw", [1, 2, 0, 1, 3] * 40)
    ours = vstack.space(tmp_path / "a.raw", dedup=False, checksum=True)
    theirs = cli.json("space", a, "--dedup", "off", "--checksum", "on")
    assert without_seconds(ours) == without_seconds(theirs)
    with vstack.open(tmp_path / "a.raw", read_only=True) as dev:
        assert dev.size == os.path.getsize(a)


def test_ctrl_c_stops_a_space_and_its_replay_leaves_no_file(tmp_path,
                                                            bytes_read_when_interrupted):
    """SIGINT during vstack.space() raised KeyboardInterrupt only once every image had been read
    (here 12 chunks of 4 MiB at 1 s each); now the analysis stops at its next chunk, and a replay
    onto files removes them."""
    data = tmp_path / "a.raw"
    data.write_bytes(os.urandom(48 << 20))
    slow = f"delay:read=1s,qd=1+file:{data}"
    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    for options in ({}, dict(mode="replay", replay_dir=str(replay_dir))):
        # One worker, so one chunk in flight when the stop comes: the whole image would be
        # 48 MiB; stopped after its first chunks, 16 MiB at most.
        run = lambda: vstack.space(slow, threads=1, **options)  # noqa: E731
        assert bytes_read_when_interrupted(run) < 16 << 20
    assert os.listdir(replay_dir) == []


def test_space_sketches_merge_as_the_clis(tmp_path, cli):
    a = image(tmp_path, "a.raw", [1, 2, 0, 1] * 40)
    b = image(tmp_path, "b.raw", [1, 5, 0] * 40)
    sa, sb = str(tmp_path / "a.sketch"), str(tmp_path / "b.sketch")
    vstack.space(a, estimate=True, sketch=sa)
    vstack.space(b, estimate=True, sketch=sb)
    assert os.path.getsize(sa) > 0 and os.path.getsize(sb) > 0
    ours = vstack.space_merge([sa, sb], protection="none")
    theirs = cli.json("space", "merge", sa, sb, "--protection", "none")
    assert without_seconds(ours) == without_seconds(theirs)


def test_bench_and_space_merge_take_pathlib_paths(tmp_path, cli):
    """An image to bench, the sketches to merge and the report folder may be pathlib paths, as
    every path argument of the module (space_merge and report() refused them: TypeError)."""
    a = image(tmp_path, "a.raw", [1, 2, 0, 1] * 40)
    vstack.space(a, estimate=True, sketch=tmp_path / "a.sketch")
    merged = vstack.space_merge(tmp_path / "a.sketch")
    assert without_seconds(merged) == without_seconds(vstack.space_merge(str(tmp_path / "a.sketch")))
    result = vstack.bench(tmp_path / "a.raw", write_pct=0, size="128K", rounds=1, warmup=0,
                          duration="0.05s")
    assert result.outcome == "ok"
    assert result.json["stacks"][0]["spec"] == cli.json("info", a)["spec"]
    result.report(tmp_path / "report")
    assert (tmp_path / "report" / "index.html").exists()


def test_space_without_images_is_the_clis_usage_error(cli):
    """No image at all was a report of zeros; the CLI refuses it as a usage error."""
    out = cli.run("space", check=False)
    assert out.returncode == 2
    for nothing in ([], (), iter([])):
        with pytest.raises(ValueError) as e:
            vstack.space(nothing)
        assert out.stderr.splitlines()[0] == "vstack space: " + str(e.value)


def test_space_bad_options(tmp_path):
    a = image(tmp_path, "a.raw", [1] * 8)
    with pytest.raises(ValueError, match="unknown option 'scop'"):
        vstack.space(a, scop="image")
    with pytest.raises(vstack.SpecError, match="--protection"):
        vstack.space(a, protection="raid7")
    with pytest.raises(vstack.SpecError):
        vstack.space("dedupp+memory:16M")
    with pytest.raises(ValueError, match="seed must be at most 2\\*\\*64-1"):
        vstack.space(a, seed=2**64)
    with pytest.raises(vstack.SpecError, match="--threads 100000: at most 1024"):
        vstack.space(a, threads=100000)

