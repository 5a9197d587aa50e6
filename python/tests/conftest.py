"""Shared fixtures of the tpusim module's tests: the tpusim binary of the same build, a small pod
config (2x2 of 4x4 chips) as a file and as a dict, and the CLI run with its --json report."""

import json
import os
import subprocess

import pytest

SOURCE_DIR = os.environ.get(
    "TPU_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
TPUSIM = os.environ.get("TPUSIM", os.path.join(SOURCE_DIR, "build", "sw", "tpusim"))

# A 2x2 torus of 4x4 chips: the pod of configs/pod_2x2.yaml, small chips (fast).
SMALL_POD = {
    "pod": {"shape": [2, 2], "wrap": [True, True], "link_latency": 2},
    "chip": {"variant": "4x4"},
    "mesh": "data=2,model=2",
}
SMALL_POD_YAML = """\
pod:
  shape: [2, 2]
  wrap: [true, true]
  link_latency: 2
chip:
  variant: 4x4
mesh: "data=2,model=2"
"""

# Keys that differ between two runs of the same job: host times and paths.
VOLATILE = {"wall_seconds", "run_seconds", "sim_cycles_per_second", "config", "trace", "inputs",
            "save", "out"}


def stable(report):
    """The report without host times and paths (recursively)."""
    if isinstance(report, dict):
        return {k: stable(v) for k, v in report.items() if k not in VOLATILE}
    if isinstance(report, list):
        return [stable(v) for v in report]
    return report


def run_cli(args, tmp_path, expect_rc=0):
    """Runs `tpusim ARGS --json` and returns its report (a dict)."""
    out = tmp_path / "cli_report.json"
    p = subprocess.run([TPUSIM] + args + ["--json", str(out)], capture_output=True, text=True,
                       cwd=SOURCE_DIR, timeout=300)
    assert p.returncode == expect_rc, p.stderr
    return json.loads(out.read_text())


def cli_error(args):
    """Runs tpusim ARGS expecting exit 2 and returns its error message."""
    p = subprocess.run([TPUSIM] + args, capture_output=True, text=True, cwd=SOURCE_DIR,
                       timeout=120)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    prefix = "tpusim: error: "
    assert p.stderr.startswith(prefix), p.stderr
    return p.stderr[len(prefix):].strip()


@pytest.fixture
def small_pod_file(tmp_path):
    path = tmp_path / "pod_small.yaml"
    path.write_text(SMALL_POD_YAML)
    return str(path)
