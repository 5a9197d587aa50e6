"""The tpusim module against the tpusim command line: the same results bit for bit and the same
reports key for key (host times and paths aside), the command's messages as ValueErrors, Ctrl-C,
and the GIL released while a simulation runs."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tpusim
from conftest import SMALL_POD, SOURCE_DIR, cli_error, run_cli, stable


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32 if a.dtype == np.float32 else np.uint16)


def test_matmul_equals_cli(tmp_path):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((12, 20)).astype(np.float32)  # rounded to bf16 on the way in
    w = (rng.standard_normal((20, 9)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "w.npy", w)
    c_file = tmp_path / "c.npy"
    want = run_cli(["matmul", "--variant", "4x4", "--a", str(tmp_path / "a.npy"), "--w",
                    str(tmp_path / "w.npy"), "--out", str(c_file), "--quiet"], tmp_path)
    c, rep = tpusim.matmul(a, w, variant="4x4")
    assert c.dtype == np.float32 and c.shape == (12, 9)
    assert np.array_equal(bits(c), bits(np.load(c_file)))
    assert stable(rep) == stable(want)
    assert rep["golden"]["verdict"] == "pass"


def test_matmul_random_operands_equal_cli(tmp_path):
    c_file = tmp_path / "c.npy"
    want = run_cli(["matmul", "--variant", "4x4", "--m", "8", "--k", "16", "--n", "8", "--seed",
                    "3", "--dist", "wide", "--out", str(c_file), "--quiet"], tmp_path)
    c, rep = tpusim.matmul(variant="4x4", m=8, k=16, n=8, seed=3, dist="wide")
    assert np.array_equal(bits(c), bits(np.load(c_file)))
    assert stable(rep) == stable(want)


def test_allreduce_equals_cli(tmp_path, small_pod_file):
    want = run_cli(["allreduce", "--config", small_pod_file, "--bytes", "2048", "--engine", "cpp",
                    "--threads", "1", "--quiet"], tmp_path)
    outs, rep = tpusim.allreduce(config=small_pod_file, bytes=2048, threads=1)
    assert stable(rep) == stable(want)
    # The config as a dict: the same loader, the same run.
    _, rep_dict = tpusim.allreduce(config=SMALL_POD, bytes=2048, threads=1)
    assert stable(rep_dict) == stable(want)
    assert len(outs) == 4 and all(o.dtype == np.float32 and o.size == 512 for o in outs)
    assert all(np.array_equal(bits(o), bits(outs[0])) for o in outs)


def test_allreduce_given_arrays(small_pod_file):
    rng = np.random.default_rng(1)
    x = [rng.standard_normal(256).astype(np.float32) for _ in range(4)]
    outs, rep = tpusim.allreduce(x, config=small_pod_file, threads=2)
    assert rep["bytes_per_chip"] == 1024 and rep["golden"]["verdict"] == "pass"
    total = np.sum(np.stack(x).astype(np.float64), axis=0)
    for o in outs:
        assert o.shape == (256,)
        np.testing.assert_allclose(o, total, rtol=1e-5, atol=1e-5)
    # bf16: uint16 arrays in and out.
    xb = [(v.view(np.uint32) >> 16).astype(np.uint16) for v in x]
    outs_b, rep_b = tpusim.allreduce(xb, config=small_pod_file, threads=1)
    assert rep_b["dtype"] == "bf16" and all(o.dtype == np.uint16 for o in outs_b)


def test_collective_all_gather_equals_cli(tmp_path, small_pod_file):
    want = run_cli(["collective", "--kind", "all_gather", "--config", small_pod_file, "--bytes",
                    "4096", "--engine", "cpp", "--threads", "1", "--quiet"], tmp_path)
    outs, rep = tpusim.collective("all_gather", config=small_pod_file, bytes=4096, threads=1)
    assert stable(rep) == stable(want)
    # Each chip's part given: every chip gathers all four.
    x = [np.full(64, float(c), dtype=np.float32) for c in range(4)]
    outs, rep = tpusim.collective("all_gather", x, config=small_pod_file, threads=1)
    assert rep["bytes_per_chip"] == 4 * 64 * 4
    for o in outs:
        assert sorted(set(o.tolist())) == [0.0, 1.0, 2.0, 3.0]


def test_shard_equals_cli(tmp_path, small_pod_file):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 24)).astype(np.float32)
    w = rng.standard_normal((24, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    y_file = tmp_path / "y.npy"
    want = run_cli(["shard", "--config", small_pod_file, "--a", str(tmp_path / "x.npy"), "--w",
                    str(tmp_path / "w.npy"), "--out", str(y_file), "--engine", "cpp", "--threads",
                    "1", "--quiet"], tmp_path)
    y, rep = tpusim.shard(x, w, config=small_pod_file, mesh="data=2,model=2", threads=1)
    assert y.shape == (16, 8)
    assert np.array_equal(bits(y), bits(np.load(y_file)))
    assert stable(rep) == stable(want)


def test_train_equals_cli(tmp_path, small_pod_file):
    trace = tmp_path / "train_trace.json"
    want = run_cli(["train", "--config", small_pod_file, "--layers", "32,64,32", "--batch", "64",
                    "--steps", "2", "--engine", "cpp", "--threads", "1", "--quiet"], tmp_path)
    loss, rep = tpusim.train(config=small_pod_file, layers=[32, 64, 32], batch=64, steps=2,
                             threads=1, trace=trace)
    assert stable(rep) == stable(want)
    assert loss.shape == (2,)
    assert loss.tolist() == [s["loss"] for s in want["steps"]]
    assert trace.stat().st_size > 0


def test_train_gpt_equals_cli(tmp_path):
    pod = os.path.join(SOURCE_DIR, "configs", "pod_2x2.yaml")
    want = run_cli(["train", "--model", "gpt", "--config", pod, "--mesh", "data=2,model=2",
                    "--layers", "1", "--steps", "1", "--engine", "cpp", "--threads", "1",
                    "--quiet"], tmp_path)
    run = tmp_path / "run"
    loss, rep = tpusim.train(config=pod, model="gpt", mesh="data=2,model=2", layers=1, steps=1,
                             threads=1, save=run)
    assert stable(rep) == stable(want)
    assert rep["train"]["model"] == "gpt" and rep["golden"]["verdict"] == "pass"
    assert loss.tolist() == [s["loss"] for s in want["steps"]]
    # generate from the saved run: the CLI's report and bytes
    want = run_cli(["generate", "--config", pod, "--load", str(run), "--prompt", "The ",
                    "--tokens", "6", "--engine", "cpp", "--threads", "1", "--quiet"], tmp_path)
    text, rep = tpusim.generate(config=pod, load=run, prompt="The ", tokens=6, threads=1)
    assert stable(rep) == stable(want)
    assert isinstance(text, bytes) and len(text) == 6
    assert rep["golden"]["verdict"] == "pass" and rep["programs"] == 6


def test_train_pipeline_equals_cli(tmp_path):
    ring = {"pod": {"shape": [4]}, "chip": {"variant": "4x4"},
            "train": {"mesh": "stage=4", "layers": [32] * 9, "batch": 16}}
    path = tmp_path / "ring4.yaml"
    path.write_text("pod:\n  shape: [4]\nchip:\n  variant: 4x4\ntrain:\n  mesh: stage=4\n"
                    "  layers: [32, 32, 32, 32, 32, 32, 32, 32, 32]\n  batch: 16\n")
    want = run_cli(["train", "--config", str(path), "--microbatches", "4", "--schedule",
                    "interleaved:2", "--steps", "2", "--engine", "cpp", "--threads", "1",
                    "--quiet"], tmp_path)
    loss, rep = tpusim.train(config=ring, microbatches=4, schedule="interleaved:2", steps=2,
                             threads=1)
    assert stable(rep) == stable(want)
    assert rep["pipeline"]["schedule"] == "interleaved:2"
    assert rep["pipeline"]["microbatches"] == 4
    assert len(rep["pipeline"]["stages"]) == 4
    assert loss.tolist() == [s["loss"] for s in want["steps"]]


def test_train_gpt_pipeline_equals_cli(tmp_path):
    # The GPT pipelined over two chips (issue 35): the same report as the command line's.
    path = tmp_path / "ring2.yaml"
    path.write_text("pod:\n  shape: [2]\nchip:\n  variant: 16x16\n")
    want = run_cli(["train", "--model", "gpt", "--config", str(path), "--mesh", "stage=2",
                    "--layers", "2", "--batch", "2", "--microbatches", "2", "--schedule", "1f1b",
                    "--steps", "1", "--engine", "cpp", "--threads", "1", "--quiet"], tmp_path)
    loss, rep = tpusim.train(config=str(path), model="gpt", mesh="stage=2", layers=[2], batch=2,
                             microbatches=2, schedule="1f1b", steps=1, threads=1)
    assert stable(rep) == stable(want)
    assert rep["pipeline"]["schedule"] == "1f1b"
    assert [s["slots"][0]["slot"] for s in rep["pipeline"]["stages"]] == ["F mb0", "F mb0"]
    assert rep["golden"]["verdict"] == "pass"
    assert loss.tolist() == [s["loss"] for s in want["steps"]]


def test_train_settings_of_the_other_model_are_refused():
    with pytest.raises(ValueError, match="GPT settings; the model is mlp"):
        tpusim.train(config=SMALL_POD, layers=[32, 32], d_model=64)
    with pytest.raises(ValueError, match="MLP settings; the model is gpt"):
        tpusim.train(model="gpt", grad_pieces=2)
    with pytest.raises(ValueError, match="mlp or gpt"):
        tpusim.train(model="lstm")


def test_train_gpt_bad_input_is_the_cli_message():
    pod = os.path.join(SOURCE_DIR, "configs", "pod_2x2.yaml")
    want = cli_error(["train", "--model", "gpt", "--config", pod, "--heads", "3", "--quiet"])
    with pytest.raises(ValueError) as e:
        tpusim.train(config=pod, model="gpt", heads=3)
    assert str(e.value) == want


# --- errors: the command line's messages ---------------------------------------------------


def test_bad_config_key_is_the_cli_message(tmp_path):
    bad = {"chip": {"variant": "4x4", "bogus_key": 1}}
    path = tmp_path / "bad.yaml"
    path.write_text("chip:\n  variant: 4x4\n  bogus_key: 1\n")
    want = cli_error(["matmul", "--config", str(path), "--quiet"])
    with pytest.raises(ValueError) as e:
        tpusim.matmul(config=bad)
    assert str(e.value) == want.replace(str(path), "<config dict>")
    with pytest.raises(ValueError) as e:
        tpusim.matmul(config=str(path))
    assert str(e.value) == want


def test_bad_pod_config_is_the_cli_message(tmp_path):
    bad = {"pod": {"shape": [2, 2], "link_latency": 999}, "chip": {"variant": "4x4"}}
    path = tmp_path / "bad_pod.yaml"
    path.write_text("pod:\n  shape: [2, 2]\n  link_latency: 999\nchip:\n  variant: 4x4\n")
    want = cli_error(["allreduce", "--config", str(path), "--quiet"])
    with pytest.raises(ValueError) as e:
        tpusim.allreduce(config=bad)
    assert str(e.value) == want.replace(str(path), "<config dict>")


def test_bad_dict_and_bad_arguments():
    with pytest.raises(ValueError, match="config dict"):
        tpusim.allreduce(config={"pod": {"shape": object()}})
    with pytest.raises(ValueError, match="config: a path"):
        tpusim.allreduce(config=42)
    with pytest.raises(ValueError, match="engine='systemc'"):
        tpusim.allreduce(config=SMALL_POD, engine="systemc")
    with pytest.raises(ValueError, match="not a collective"):
        tpusim.collective("all_sum", config=SMALL_POD)


def test_bad_shapes():
    a = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"W has 5 rows but a has K = 3 columns"):
        tpusim.matmul(a, np.zeros((5, 2), np.float32), variant="4x4")
    with pytest.raises(ValueError, match="2-D"):
        tpusim.matmul(np.zeros(4, np.float32), np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError, match="dtype float64"):
        tpusim.matmul(a.astype(np.float64), np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="one per chip"):
        tpusim.allreduce([np.zeros(64, np.float32)] * 3, config=SMALL_POD)
    with pytest.raises(ValueError, match="chip 1's array has 32 elements"):
        tpusim.allreduce([np.zeros(64, np.float32), np.zeros(32, np.float32)] * 2,
                         config=SMALL_POD)


def test_bad_flag_value_is_the_cli_message(tmp_path):
    want = cli_error(["allreduce", "--config", os.path.join(SOURCE_DIR, "configs/pod_2x2.yaml"),
                      "--bytes", "6", "--quiet"])
    with pytest.raises(ValueError) as e:
        tpusim.allreduce(bytes=6)
    assert str(e.value) == want


# --- Ctrl-C and the GIL ----------------------------------------------------------------------

LONG_RUN = """
import sys, tpusim
print("started", flush=True)
tpusim.allreduce(config={"pod": {"shape": [2, 2]}, "chip": {"variant": "4x4"}},
                 bytes=6 << 20, threads=1, load="backdoor")
print("finished", flush=True)
"""


def test_ctrl_c_stops_a_run():
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "-c", LONG_RUN], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "started"
    time.sleep(1.5)  # inside the simulation
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    stopped = time.monotonic() - t0
    assert "finished" not in out
    assert p.returncode != 0 and "KeyboardInterrupt" in err, err
    assert stopped < 5, stopped


def test_gil_released_while_simulating():
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=count)
    t.start()
    t0 = time.monotonic()
    try:
        tpusim.allreduce(config=SMALL_POD, bytes=1 << 20, threads=1, load="backdoor")
    finally:
        done.set()
        t.join()
    elapsed = time.monotonic() - t0
    during = [x for x in ticks if x <= t0 + elapsed]
    # The thread ran all along (about one tick per 10 ms; a loaded machine slows it, so a fifth
    # of that), to the end: with the GIL held it would not tick at all until the run returned.
    assert elapsed > 0.2
    assert len(during) >= max(5, 0.2 * elapsed / 0.01), (len(during), elapsed)
    assert max(during) > t0 + 0.7 * elapsed
