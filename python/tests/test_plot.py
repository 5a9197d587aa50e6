"""python3 -m tpusim.plot on real reports: each kind of picture is made, decodes, and is not one
colour; a report it cannot draw exits 2 naming the file. TPUSIM and BENCH_CHIP name the binaries
(CTest sets them; test_plot under tests/system/CMakeLists.txt)."""

import json
import os
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TPUSIM = os.environ.get("TPUSIM", os.path.join(ROOT, "build", "sw", "tpusim"))
BENCH_CHIP = os.environ.get("BENCH_CHIP", os.path.join(ROOT, "build", "bench", "chip",
                                                       "bench_chip"))
CHIP4 = os.path.join(ROOT, "configs", "chip_4x4.yaml")


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, **kw)


def plot(report, png):
    env = dict(os.environ)
    # The build tree's package (python/CMakeLists.txt puts it there; CTest names the folder).
    pkg = os.environ.get("TPU_PYTHONPATH", os.path.join(ROOT, "build", "python"))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "tpusim.plot", str(report), "-o", str(png)],
                          capture_output=True, text=True, env=env)


def check_png(png):
    """The file decodes as a PNG of some size and holds more than one colour."""
    assert os.path.getsize(png) > 0
    img = matplotlib.image.imread(str(png))
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100, img.shape
    flat = img.reshape(-1, img.shape[2])
    assert len(np.unique(flat, axis=0)) > 10, "the picture is (nearly) one colour"


def report_of(args, path):
    r = run(args + ["--json", str(path)])
    assert r.returncode == 0, r.stdout + r.stderr
    return path


def test_train_picture(tmp_path):
    rep = report_of([TPUSIM, "train", "--steps", "3", "--layers", "32,32,32", "--batch", "64",
                     "--quiet"], tmp_path / "train.json")
    r = plot(rep, tmp_path / "train.png")
    assert r.returncode == 0, r.stderr
    assert "(train)" in r.stdout
    check_png(tmp_path / "train.png")


def test_pipeline_schedule_picture(tmp_path):
    """A pipelined run's report holds each stage's slots; its picture adds the schedule."""
    cfg = tmp_path / "ring4.yaml"
    cfg.write_text("pod:\n  shape: [4]\nchip:\n  variant: 4x4\ntrain:\n  mesh: stage=4\n"
                   "  layers: [32, 32, 32, 32, 32]\n  batch: 16\n  microbatches: 4\n")
    rep = report_of([TPUSIM, "train", "--config", str(cfg), "--schedule", "1f1b", "--steps", "2",
                     "--engine", "cpp", "--quiet"], tmp_path / "pipe.json")
    pipe = json.loads(rep.read_text())["pipeline"]
    stages = pipe["stages"]
    assert len(stages) == 4
    assert pipe["hop_cycles"] > 0
    for st in stages:
        # The tables timed with the measured slots, gap and hop give the measured bubble.
        assert abs(st["bubble_model"] - st["bubble"]) < 0.03, st
        assert st["bubble_no_hop"] <= st["bubble_model"] + 1e-9, st
        names = sorted(x["slot"] for x in st["slots"])
        assert names == sorted(["F mb%d" % k for k in range(4)] + ["B mb%d" % k for k in range(4)])
        for x in st["slots"]:
            assert x["start"] < x["end"], x
        # 1F1B on stage s: p - s - 1 warm-up forwards, then F and B in turn (docs/training.md)
        order = [x["slot"][0] for x in st["slots"]]
        warm = 4 - st["stage"] - 1
        assert order[:warm + 1] == ["F"] * (warm + 1), order
    r = plot(rep, tmp_path / "pipe.png")
    assert r.returncode == 0, r.stderr
    check_png(tmp_path / "pipe.png")
    plain = report_of([TPUSIM, "train", "--steps", "2", "--layers", "32,32,32", "--batch", "64",
                       "--quiet"], tmp_path / "plain.json")
    assert plot(plain, tmp_path / "plain.png").returncode == 0
    tall = matplotlib.image.imread(str(tmp_path / "pipe.png")).shape[0]
    assert tall > 1.3 * matplotlib.image.imread(str(tmp_path / "plain.png")).shape[0]


def test_collective_sweep_picture(tmp_path):
    rep = report_of([TPUSIM, "sweep", "allreduce", "--bytes", "1K:8K:x2", "--engine", "cpp",
                     "--quiet"], tmp_path / "ar.json")
    r = plot(rep, tmp_path / "ar.png")
    assert r.returncode == 0, r.stderr
    assert "(collective sweep)" in r.stdout
    check_png(tmp_path / "ar.png")


def test_matmul_sweep_roofline(tmp_path):
    rep = report_of([TPUSIM, "sweep", "matmul", "--config", CHIP4, "--sizes", "8:32:x2",
                     "--quiet"], tmp_path / "mm.json")
    r = plot(rep, tmp_path / "mm.png")
    assert r.returncode == 0, r.stderr
    assert "(matmul sweep)" in r.stdout
    check_png(tmp_path / "mm.png")


def test_bench_chip_roofline(tmp_path):
    b = run([BENCH_CHIP, "--variant", "4x4", "--small", "--shapes", "dma,skinny"])
    assert b.returncode == 0, b.stderr
    (tmp_path / "bc.json").write_text(b.stdout)
    r = plot(tmp_path / "bc.json", tmp_path / "bc.png")
    assert r.returncode == 0, r.stderr
    assert "(bench chip)" in r.stdout
    check_png(tmp_path / "bc.png")


@pytest.mark.parametrize("content, says", [
    ({"command": "matmul", "cycles": 5}, "a report of command 'matmul', which has no picture"),
    ({"command": "sweep", "sweep": "allreduce", "rows": [{"bytes": 1024}]},
     "row 0 has no key 'algbw_gbps'"),
    ([1, 2, 3], "a JSON array, which has no picture"),
    ("not json {", "not JSON"),
])
def test_unknown_reports_exit_2_naming_the_file(tmp_path, content, says):
    path = tmp_path / "odd.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    r = plot(path, tmp_path / "odd.png")
    assert r.returncode == 2, r.stdout + r.stderr
    assert str(path) in r.stderr and says in r.stderr, r.stderr
    assert not (tmp_path / "odd.png").exists()


def test_missing_report_exits_2(tmp_path):
    r = plot(tmp_path / "none.json", tmp_path / "none.png")
    assert r.returncode == 2
    assert "none.json: cannot read it" in r.stderr
