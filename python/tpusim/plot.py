"""Pictures of tpusim's JSON reports (matplotlib, Agg backend): one function per picture.

    python3 -m tpusim.plot REPORT.json -o FILE.png

draws what the report holds:

- a training report (``tpusim train --json``): the loss per step, and per step the breakdown of
  its cycles (compute, exposed communication, exposed memory, idle) as stacked bars with the MFU;
  for a pipelined run (``--mesh ...,stage=P``) also the schedule of its first step: per stage,
  each micro-batch's forward and backward slot where the chips ran it, with the measured bubble;
- a collective sweep (``tpusim sweep allreduce|collective --json``): algorithm and bus bandwidth
  against the size per chip on a log axis, with the ICI bound;
- matmul shapes (``tpusim sweep matmul --json``, or bench_chip's JSON array): a roofline, the
  chip's peak compute and HBM bandwidth, each shape a point.

A report of another kind, or a file that is not JSON, exits with code 2 and a message naming the
file and what was expected. Reads JSON only: it does not need the compiled tpusim module.
"""

import argparse
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

EXPECTED = ("a training report (tpusim train --json), a collective sweep (tpusim sweep "
            "allreduce|collective --json), a matmul sweep (tpusim sweep matmul --json) or "
            "bench_chip's JSON")

# The breakdown's parts, in the order they stack, with their colours and labels.
BREAKDOWN = (("compute", "#4c72b0", "compute"),
             ("communication", "#dd8452", "exposed communication"),
             ("memory", "#55a868", "exposed memory"),
             ("idle", "#c7c7c7", "idle"))


class PlotError(Exception):
    """A report that cannot be drawn: the message names the file and the rule."""


def size_text(b, _pos=None):
    """Bytes with a binary unit: 1024 -> '1K', 4194304 -> '4M'."""
    b = float(b)
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale:
            v = b / scale
            return ("%d%s" if v == int(v) else "%.1f%s") % (v, unit)
    return "%d" % b


def _is_bench_matmul(r):
    """One of bench_chip's matmul cases (its DMA cases have no shape)."""
    return isinstance(r, dict) and {"m", "k", "n", "cycles", "hbm_bytes"} <= set(r)


def report_kind(rep):
    """'train', 'collective_sweep', 'matmul_sweep', 'bench_chip' or None."""
    if isinstance(rep, list):
        if any(_is_bench_matmul(r) for r in rep):
            return "bench_chip"
        return None
    if not isinstance(rep, dict):
        return None
    if rep.get("command") == "train" and isinstance(rep.get("steps"), list):
        return "train"
    if rep.get("command") == "sweep" and isinstance(rep.get("rows"), list):
        if rep.get("sweep") in ("allreduce", "collective"):
            return "collective_sweep"
        if rep.get("sweep") == "matmul":
            return "matmul_sweep"
    return None


def _need(rows, keys, path, what):
    for i, r in enumerate(rows):
        missing = [k for k in keys if k not in r]
        if missing:
            raise PlotError("%s: %s %d has no key %s (expected %s)"
                            % (path, what, i, ", ".join(repr(k) for k in missing), EXPECTED))


def _schedule_panel(pipe, ax, path):
    """The first step's slots per stage (data rank 0's chips): forward slots blue, backward
    purple, each labelled with its micro-batch (and chunk), stage 0 on top."""
    stages = pipe["stages"]
    _need(stages, ("stage", "bubble", "slots"), path, "pipeline stage")
    colour = {"F": "#4c72b0", "B": "#8172b3"}
    end = 1
    for st in stages:
        y = st["stage"]
        for sl in st["slots"]:
            kind, mb = sl["slot"][0], sl["slot"][1:].strip()
            mb = mb[2:] if mb.startswith("mb") else mb
            mb = mb.replace(" c", ".")
            w = max(sl["end"] - sl["start"], 1)
            ax.barh(y, w, left=sl["start"], height=0.7, color=colour.get(kind, "#999999"),
                    edgecolor="white", linewidth=0.5)
            ax.text(sl["start"] + w / 2.0, y, mb, ha="center", va="center", fontsize=7,
                    color="white", clip_on=True)
            end = max(end, sl["end"])
    ax.set_yticks([st["stage"] for st in stages])
    # The measured bubble, and the timed model's beside it where the report has one.
    ax.set_yticklabels(["stage %d (bubble %.2f%s)" % (
        st["stage"], st["bubble"],
        ", model %.2f" % st["bubble_model"] if "bubble_model" in st else "") for st in stages])
    ax.set_ylim(len(stages) - 0.5, -0.5)
    ax.set_xlim(0, end * 1.01)
    ax.set_xlabel("pod cycles from the step's first command (first step)")
    ax.set_title("pipeline schedule %s, %s micro-batches, %s stages: bubble formula %.3f"
                 % (pipe.get("schedule", "?"), pipe.get("microbatches", "?"),
                    pipe.get("stage_count", len(stages)), float(pipe.get("bubble_formula", 0))))
    ax.bar(0, 0, color=colour["F"], label="forward (F mb)")
    ax.bar(0, 0, color=colour["B"], label="backward (B mb)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)
    ax.grid(True, axis="x", alpha=0.3)


def plot_train(rep, out, path="report"):
    """Loss per step above; below, each step's cycles split into compute, exposed
    communication, exposed memory and idle (stacked bars, fractions of the step) with the MFU;
    for a pipelined run, the schedule of its first step at the bottom."""
    steps = rep["steps"]
    if not steps:
        raise PlotError("%s: a training report with no steps" % path)
    _need(steps, ("step", "loss", "cycles", "mfu", "breakdown"), path, "step")
    x = [s["step"] for s in steps]
    pipe = rep.get("pipeline")
    if isinstance(pipe, dict) and isinstance(pipe.get("stages"), list):
        # constrained layout: each gap its own height (tight_layout makes them all the largest)
        fig = plt.figure(figsize=(9, 11), layout="constrained")
        gs = fig.add_gridspec(3, 1, height_ratios=[1, 1.3, 1.3])
        ax_loss = fig.add_subplot(gs[0])
        ax_b = fig.add_subplot(gs[1], sharex=ax_loss)
        ax_loss.tick_params(labelbottom=False)
        _schedule_panel(pipe, fig.add_subplot(gs[2]), path)
    else:
        fig, (ax_loss, ax_b) = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True,
                                            gridspec_kw={"height_ratios": [1, 1.3]})
    ax_loss.plot(x, [s["loss"] for s in steps], marker="o", color="#c44e52")
    ax_loss.set_ylabel("loss")
    losses = [s["loss"] for s in steps]
    if min(losses) > 0 and max(losses) / min(losses) > 20:  # a loss falling by decades
        ax_loss.set_yscale("log")
        ax_loss.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: "%g" % v))
    ax_loss.grid(True, which="both", alpha=0.3)
    title = "training"
    t = rep.get("train", {})
    if t.get("model") == "gpt":
        title += " of a GPT (%s layers, d %s, %s heads, S %s)" % (
            t.get("layers", "?"), t.get("d_model", "?"), t.get("heads", "?"), t.get("seq", "?"))
    elif isinstance(t.get("layers"), list):
        title += " of an MLP " + "-".join(str(w) for w in t["layers"])
    pod = rep.get("pod", {})
    if "topology" in pod:
        title += " on %s (%s chips)" % (pod["topology"], pod.get("chips", "?"))
    if "golden" in rep:
        title += ", golden: %s" % rep["golden"].get("verdict", "?")
    ax_loss.set_title(title)

    bottom = [0.0] * len(steps)
    for key, colour, label in BREAKDOWN:
        vals = [float(s["breakdown"].get(key, 0.0)) for s in steps]
        ax_b.bar(x, vals, bottom=bottom, color=colour, label=label, width=0.8)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax_b.plot(x, [s["mfu"] for s in steps], color="black", marker="D", markersize=4,
              linewidth=1.5, label="MFU (useful MACs / peak)")
    ax_b.set_ylim(0, 1.0)
    ax_b.set_ylabel("fraction of the step's cycles")
    ax_b.set_xlabel("step")
    cyc = [s["cycles"] for s in steps]
    ax_b.set_title("where each step's cycles go (%d to %d cycles per step)" % (min(cyc), max(cyc)))
    ax_b.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    if len(x) <= 30:
        ax_b.set_xticks(x)
    if not fig.get_constrained_layout():
        fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_collective_sweep(rep, out, path="report"):
    """Algorithm and bus bandwidth (GB/s) against the size per chip (log axis), with the ICI
    bound's bus bandwidth; a failed golden check is marked with a red cross."""
    rows = rep["rows"]
    if not rows:
        raise PlotError("%s: a sweep report with no rows" % path)
    _need(rows, ("bytes", "algbw_gbps", "busbw_gbps", "bound_busbw_gbps", "golden"), path, "row")
    x = [r["bytes"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ax.plot(x, [r["bound_busbw_gbps"] for r in rows], linestyle="--", color="gray",
            label="bound (busbw, every link of a chip busy)")
    ax.plot(x, [r["busbw_gbps"] for r in rows], marker="o", color="#4c72b0", label="busbw")
    ax.plot(x, [r["algbw_gbps"] for r in rows], marker="s", color="#dd8452", label="algbw")
    bad = [r for r in rows if r["golden"] != "pass"]
    if bad:
        ax.plot([r["bytes"] for r in bad], [r["busbw_gbps"] for r in bad], "x", color="red",
                markersize=12, markeredgewidth=2, label="golden check failed")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(size_text))
    if len(x) <= 16:  # a tick at every size run, where the points are
        ax.set_xticks(x)
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("size per chip (bytes)")
    ax.set_ylabel("bandwidth (GB/s at %s GHz)" % rep.get("clock_ghz", "?"))
    top = max([r["bound_busbw_gbps"] for r in rows] + [r["busbw_gbps"] for r in rows])
    ax.set_ylim(0, top * 1.25)
    ax.grid(True, which="major", alpha=0.3)
    pod = rep.get("pod", {})
    ax.set_title("%s (%s, %s) on %s, groups of %s chips"
                 % (rep.get("kind", "collective"), rep.get("algorithm", "?"),
                    rep.get("dtype", "?"), pod.get("topology", "?"),
                    rep.get("group_chips", "?")))
    ax.legend(loc="upper left", ncol=2, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _roofline(points, peak, bw, unit_perf, unit_bw, title, out):
    """points: (label, intensity, perf, passed); peak: perf units; bw: bytes per time unit
    (None: unknown, the compute roof alone)."""
    fig, ax = plt.subplots(figsize=(9, 6))
    xs = [p[1] for p in points]
    lo = min(xs + ([peak / bw] if bw else [])) / 4
    hi = max(xs + ([peak / bw] if bw else [])) * 4
    grid = [lo * (hi / lo) ** (i / 200.0) for i in range(201)]
    if bw:
        ax.plot(grid, [min(peak, bw * i) for i in grid], color="black", linewidth=2,
                label="roofline: min(peak, HBM x intensity)")
        ridge = peak / bw
        ax.axvline(ridge, color="gray", linestyle=":", linewidth=1)
        ax.annotate("ridge %.3g FLOP/B" % ridge, (ridge, peak), textcoords="offset points",
                    xytext=(6, -14), fontsize=8, color="gray")
        at = math.sqrt(lo * ridge)  # halfway up the slope (log scale)
        ax.annotate("HBM %.4g %s" % (bw, unit_bw), (at, bw * at), textcoords="offset points",
                    xytext=(10, -14), fontsize=8)
    else:
        ax.plot(grid, [peak] * len(grid), color="black", linewidth=2,
                label="peak compute (no HBM peak in the report)")
    ax.annotate("peak %.4g %s" % (peak, unit_perf), (grid[-40], peak),
                textcoords="offset points", xytext=(0, 5), fontsize=8)
    for i, (label, x, y, passed) in enumerate(points):
        ax.plot([x], [y], "o" if passed else "x", color="C%d" % (i % 10), markersize=8,
                markeredgewidth=2, label=label + ("" if passed else " (golden FAILED)"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _p: "%g" % v)  # 0.5, 10, 512: not 5 x 10^-1
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(plain)
    ax.set_xlim(lo, hi)
    ys = [p[2] for p in points]
    ax.set_ylim(min(ys + [peak]) / 4, peak * 2)
    # Within a decade or so the minor ticks need numbers too; over more they would crowd.
    ax.yaxis.set_minor_formatter(plain if peak * 8 / min(ys + [peak]) < 20 else NullFormatter())
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte moved)")
    ax.set_ylabel("achieved (%s)" % unit_perf)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_matmul_sweep(rep, out, path="report"):
    """The roofline of the chip (peak GFLOP/s, HBM GB/s at the clock) with each shape."""
    rows = rep["rows"]
    if not rows:
        raise PlotError("%s: a sweep report with no rows" % path)
    _need(rows, ("shape", "arithmetic_intensity", "achieved_gflops", "golden"), path, "row")
    for k in ("peak_gflops", "hbm_peak_gbps"):
        if k not in rep:
            raise PlotError("%s: a matmul sweep without the key %r (expected %s)"
                            % (path, k, EXPECTED))
    points = [(r["shape"], r["arithmetic_intensity"], r["achieved_gflops"],
               r["golden"] == "pass") for r in rows if r["arithmetic_intensity"] > 0]
    if not points:
        raise PlotError("%s: no row moved HBM bytes (nothing to place on a roofline)" % path)
    _roofline(points, rep["peak_gflops"], rep["hbm_peak_gbps"], "GFLOP/s", "GB/s",
              "matmul roofline, chip %s at %s GHz" % (rep.get("variant", "?"),
                                                     rep.get("clock_ghz", "?")), out)


def plot_bench_chip(rep, out, path="report"):
    """bench_chip's matmul cases on the roofline, per cycle (the bench gives no clock): peak
    2 x rows x cols FLOP per cycle of the variant, HBM from its DMA cases' peak_bytes_per_cycle."""
    mm = [r for r in rep if _is_bench_matmul(r)]
    variant = mm[0].get("variant", "")
    try:
        rows_, cols_ = (int(v) for v in variant.split("x"))
    except ValueError:
        raise PlotError("%s: bench_chip's variant %r is not RxC" % (path, variant))
    peak = 2.0 * rows_ * cols_
    bw = next((r["peak_bytes_per_cycle"] for r in rep
               if isinstance(r, dict) and "peak_bytes_per_cycle" in r), None)
    points = []
    for r in mm:
        flops = 2.0 * r["m"] * r["k"] * r["n"]
        if r["hbm_bytes"] > 0 and r["cycles"] > 0:
            points.append(("%s %dx%dx%d" % (r.get("shape", ""), r["m"], r["k"], r["n"]),
                           flops / r["hbm_bytes"], flops / r["cycles"], True))
    if not points:
        raise PlotError("%s: no matmul case moved HBM bytes" % path)
    _roofline(points, peak, bw, "FLOP/cycle", "B/cycle",
              "bench_chip matmuls on the roofline, chip %s (per cycle)" % variant, out)


def plot_report(rep, out, path="report"):
    """Draws rep (a parsed report) into the PNG `out`; returns the kind drawn. PlotError when
    it is no kind this module draws."""
    kind = report_kind(rep)
    draw = {"train": plot_train, "collective_sweep": plot_collective_sweep,
            "matmul_sweep": plot_matmul_sweep, "bench_chip": plot_bench_chip}.get(kind)
    if draw is None:
        what = ("a JSON array" if isinstance(rep, list) else
                "a report of command %r" % rep.get("command") if isinstance(rep, dict) else
                "a JSON %s" % type(rep).__name__)
        raise PlotError("%s: %s, which has no picture; expected %s" % (path, what, EXPECTED))
    try:
        draw(rep, out, path)
    except (KeyError, TypeError, ValueError) as e:
        raise PlotError("%s: a %s report without what it needs (%s: %s)"
                        % (path, kind, type(e).__name__, e))
    return kind


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m tpusim.plot",
                                 description="Draw a tpusim JSON report as a PNG: " + EXPECTED
                                 + ".")
    ap.add_argument("report", metavar="REPORT.json")
    ap.add_argument("-o", "--output", metavar="FILE.png",
                    help="the picture (default: REPORT with .png for .json)")
    a = ap.parse_args(argv)
    out = a.output or (a.report[:-5] if a.report.endswith(".json") else a.report) + ".png"
    try:
        with open(a.report) as f:
            rep = json.load(f)
    except OSError as e:
        print("tpusim.plot: error: %s: cannot read it (%s)" % (a.report, e.strerror),
              file=sys.stderr)
        return 2
    except ValueError as e:
        print("tpusim.plot: error: %s: not JSON (%s); expected %s" % (a.report, e, EXPECTED),
              file=sys.stderr)
        return 2
    try:
        kind = plot_report(rep, out, a.report)
    except PlotError as e:
        print("tpusim.plot: error: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        print("tpusim.plot: error: -o %s: cannot write it (%s)" % (out, e.strerror or e),
              file=sys.stderr)
        return 2
    print("tpusim.plot: %s -> %s (%s)" % (a.report, out, kind.replace("_", " ")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
