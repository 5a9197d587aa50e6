"""tpusim: the pod simulator's jobs from Python (docs/python.md).

The same jobs the ``tpusim`` command runs (sw/jobs), in-process, with numpy arrays in and out
and the report as a dict with the keys of the command's ``--json`` report:

    c, rep = tpusim.matmul(a, w)                 # one chip: C = A x W
    out, rep = tpusim.allreduce([x0, x1, x2, x3])  # a pod: one array per chip in and out
    outs, rep = tpusim.collective("all_gather", x)
    y, rep = tpusim.shard(x, w, mesh="data=2,model=2")
    loss, rep = tpusim.train(steps=3)

A config is a path to a YAML file (configs/*.yaml) or a dict with the YAML's structure; either
goes through the same loader as the command line's --config, with the same checks and messages.
Operands: uint16 arrays are bf16 bits, float32 arrays are rounded to bf16 (round to nearest
even), as the command line reads a .npy file. Keyword arguments are named after the command's
flags (--algo: algo=, --x-spec: x_spec=, --waves-chips: waves=).

Errors: bad input is a ValueError with the command line's message (where the command exits 2);
a hang or a chip error is a SimulationError (HangError for a hang), a golden mismatch a
GoldenMismatch (both RuntimeErrors, exit 3 and 1 of the command). Ctrl-C stops a run with
KeyboardInterrupt; the GIL is released while the simulation runs.
"""

import json
import os

from tpusim import _core
from tpusim._core import HangError, SimulationError

__all__ = [
    "matmul",
    "allreduce",
    "collective",
    "shard",
    "train",
    "generate",
    "GoldenMismatch",
    "SimulationError",
    "HangError",
]


class GoldenMismatch(RuntimeError):
    """The run finished but its outputs differ from the golden model (the command's exit 1).

    ``result`` holds what the function would have returned, ``report`` the report (its
    ``golden`` group says how many outputs differ).
    """

    def __init__(self, message, result, report):
        super().__init__(message)
        self.result = result
        self.report = report


def _config(config):
    """A config argument: a path (str or os.PathLike), a dict, or None (the default file)."""
    if config is None:
        return _core._Config(None, None)
    if isinstance(config, dict):
        # JSON is YAML's flow style: the dict as YAML text, read by the same loader as a file.
        try:
            text = json.dumps(config, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"<config dict>: not a YAML document: {e}") from None
        return _core._Config(None, text)
    if isinstance(config, (str, os.PathLike)):
        return _core._Config(os.fspath(config), None)
    raise ValueError(
        f"config: a path to a YAML file or a dict with its structure, not {type(config).__name__}"
    )


def _path(value, name):
    if value is None:
        return ""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise ValueError(f"{name}: a file path, not {type(value).__name__}")


def _span(value, name):
    if value is None:
        return None
    try:
        a, b = value
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise ValueError(f"{name}: a pair (A, B), as the command line's A:B") from None


def _list(value, name):
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [value]
    try:
        return list(value)
    except TypeError:
        raise ValueError(f"{name}: a list") from None


def _engine(engine, threads, waves, faults, watchdog, trace, trace_cycles):
    return _core._Engine(
        engine,
        threads,
        [int(c) for c in _list(waves, "waves")],
        [str(f) for f in _list(faults, "faults")],
        watchdog,
        _path(trace, "trace"),
        _span(trace_cycles, "trace_cycles"),
    )


def _finish(result, text, passed):
    report = json.loads(text)
    if not passed:
        golden = report.get("golden", {})
        raise GoldenMismatch(
            f"golden check: FAIL ({golden.get('mismatches', '?')} of "
            f"{golden.get('outputs', '?')} outputs differ): {report.get('command', 'run')}",
            result,
            report,
        )
    return result, report


def matmul(
    a=None,
    w=None,
    *,
    config=None,
    variant=None,
    m=64,
    k=64,
    n=64,
    seed=1,
    dist="narrow",
    bias=None,
    relu=False,
    out_dtype=None,
    mxu_only=False,
    faults=None,
    watchdog=None,
    waves=None,
    trace=None,
    trace_cycles=None,
):
    """One bf16 matmul C = A x W on one chip (``tpusim matmul``), golden-checked.

    a: (M, K), w: (K, N), uint16 (bf16 bits) or float32 (rounded to bf16); both None: random
    operands of m, k, n from seed and dist, as the command makes them. config: a chip config
    (default configs/default.yaml). bias: a .npy file of N float32 values (--bias). waves: an FST
    file of every signal of the chip; trace: the timeline (Chrome JSON) with trace_cycles=(A, B).

    Returns (c, report): C as float32 (M, N) (out_dtype="bf16": rounded on the VPU), the report
    as a dict with the keys of ``tpusim matmul --json``.
    """
    c, text, passed = _core.matmul(
        _config(config),
        a,
        w,
        variant,
        int(m),
        int(k),
        int(n),
        int(seed),
        dist,
        _path(bias, "bias"),
        bool(relu),
        out_dtype,
        bool(mxu_only),
        [str(f) for f in _list(faults, "faults")],
        watchdog,
        _path(waves, "waves"),
        _path(trace, "trace"),
        _span(trace_cycles, "trace_cycles"),
    )
    return _finish(c, text, passed)


def collective(
    kind,
    x=None,
    *,
    config=None,
    bytes=None,
    dtype=None,
    op="sum",
    algo=None,
    mesh=None,
    axis=None,
    root=0,
    block_rows=0,
    rounds=0,
    load="host",
    seed=1,
    engine="cpp",
    threads=None,
    waves=None,
    faults=None,
    watchdog=None,
    trace=None,
    trace_cycles=None,
):
    """One collective on a pod (``tpusim collective --kind KIND``), golden-checked.

    kind: all_reduce, reduce_scatter, all_gather, all_to_all or broadcast. x: one 1-D array per
    chip (chip order of the config's pod), float32 or uint16 (bf16 bits); dtype: "f32" or "bf16"
    (default: uint16 arrays are bf16, others f32; float32 with dtype="bf16" is rounded). The
    bytes per chip follow from the arrays (all_gather: of the output); x None: random inputs of
    `bytes` (default 65536) from `seed`, as the command makes them. config: a pod config (default
    configs/pod_2x2.yaml). engine: "cpp" (the SystemC kernel elaborates one pod per process);
    threads (default: the cores), waves (chips to dump: --waves-chips), faults, watchdog, trace,
    trace_cycles as the command's flags.

    Returns (outputs, report): one 1-D array per chip (float32, or uint16 bf16 bits) and the report
    as a dict with the keys of ``tpusim collective --json``.
    """
    if dtype is None:
        dtype = "f32"
        if x is not None and len(x) > 0 and getattr(x[0], "dtype", None) == "uint16":
            dtype = "bf16"
    outs, text, passed, _ = _core.collective(
        _config(config),
        kind,
        list(x) if x is not None else None,
        bytes,
        dtype,
        op,
        algo or "",
        mesh or "",
        axis or "",
        int(root),
        int(block_rows),
        int(rounds),
        load,
        int(seed),
        _engine(engine, threads, waves, faults, watchdog, trace, trace_cycles),
    )
    return _finish(list(outs), text, passed)


def allreduce(x=None, **kwargs):
    """An all-reduce on a pod (``tpusim allreduce``): collective("all_reduce", x, ...).

    x: one 1-D array per chip; returns (one array per chip, report).
    """
    return collective("all_reduce", x, **kwargs)


def shard(
    x=None,
    w=None,
    *,
    config=None,
    mesh=None,
    x_spec=None,
    w_spec=None,
    y_spec=None,
    m=512,
    k=512,
    n=512,
    seed=1,
    bias=None,
    relu=False,
    load="host",
    engine="cpp",
    threads=None,
    waves=None,
    faults=None,
    watchdog=None,
    trace=None,
    trace_cycles=None,
):
    """One matmul Y = X @ W sharded over a named mesh of the pod (``tpusim shard``).

    x: (M, K), w: (K, N), uint16 (bf16 bits) or float32 (rounded); both None: random of m, k, n
    from seed. mesh: "data=2,model=2" (default: the config's mesh: section); x_spec, w_spec,
    y_spec: partition specs as --x-spec ("data,-"). bias: a .npy file of N float32 values.

    Returns (y, report): the gathered Y as float32 (M, N) and the report of ``tpusim shard --json``.
    """
    y, text, passed = _core.shard(
        _config(config),
        x,
        w,
        mesh or "",
        x_spec or "",
        w_spec or "",
        y_spec or "",
        int(m),
        int(k),
        int(n),
        int(seed),
        _path(bias, "bias"),
        bool(relu),
        load,
        _engine(engine, threads, waves, faults, watchdog, trace, trace_cycles),
    )
    return _finish(y, text, passed)


def train(
    *,
    config=None,
    model=None,
    mesh=None,
    layers=None,
    batch=None,
    steps=None,
    lr=None,
    seed=None,
    fresh_batches=False,
    grad_pieces=None,
    stages=None,
    microbatches=None,
    schedule=None,
    d_model=None,
    heads=None,
    seq=None,
    warmup=None,
    weight_decay=None,
    data=None,
    load="host",
    trace_steps=None,
    save=None,
    engine="cpp",
    threads=None,
    waves=None,
    faults=None,
    watchdog=None,
    trace=None,
):
    """Training on the pod, every step golden-checked (``tpusim train``).

    model: "mlp" (SGD of an MLP) or "gpt" (the GPT of docs/training.md, AdamW); default the
    config's train.model, else "mlp". Each setting as the command takes it: the argument when
    given, else the config's train: key, else the default (MLP: layers=[64, 128, 32], batch=256,
    steps=20, lr=0.5, seed=1, grad_pieces=4; GPT: layers=2 (its blocks), d_model=32, heads=2,
    seq=32, batch=8, steps=20, lr=0.01, warmup=0, weight_decay=0, data: the project's
    docs/*.md). mesh: "data=D,model=M,stage=P" (stage: a pipeline, with stages="0-1,2-3",
    microbatches=m and schedule="gpipe" | "1f1b" | "interleaved:v"; the MLP takes model or
    stage, the GPT both). trace_steps=(A, B): the
    steps trace= records. save: a directory for the run (MLP: x.npy, y.npy, weights, loss.npy,
    train.json; GPT: tokens.npy, init/, final/, loss.npy, train.json).

    Returns (loss, report): the loss of every step (float64) and the report of
    ``tpusim train --json``.
    """
    if layers is not None and isinstance(layers, int):
        layers = [layers]
    loss, text, passed = _core.train(
        _config(config),
        mesh or "",
        None if layers is None else [int(v) for v in _list(layers, "layers")],
        batch,
        steps,
        None if lr is None else float(lr),
        seed,
        bool(fresh_batches),
        grad_pieces,
        load,
        _span(trace_steps, "trace_steps"),
        _path(save, "save"),
        model,
        stages,
        microbatches,
        schedule,
        d_model,
        heads,
        seq,
        warmup,
        None if weight_decay is None else float(weight_decay),
        None if data is None else _path(data, "data"),
        _engine(engine, threads, waves, faults, watchdog, trace, None),
    )
    return _finish(loss, text, passed)


def generate(
    *,
    load,
    prompt,
    tokens=64,
    config=None,
    engine="cpp",
    threads=None,
    waves=None,
    faults=None,
    watchdog=None,
    trace=None,
):
    """Greedy decoding on the pod from a GPT run saved by ``train(model="gpt", save=DIR)``
    (``tpusim generate``): the keys and values cached in HBM, every token's logits checked bit for
    bit against the golden. prompt: str (UTF-8) or bytes.

    Returns (text, report): the generated bytes (bytes) and the report of
    ``tpusim generate --json``.
    """
    if isinstance(prompt, str):
        prompt = prompt.encode("utf-8")
    if not isinstance(prompt, (bytes, bytearray)):
        raise ValueError("prompt: str or bytes, not %s" % type(prompt).__name__)
    text, report, passed = _core.generate(
        _config(config),
        _path(load, "load"),
        bytes(prompt),
        int(tokens),
        _engine(engine, threads, waves, faults, watchdog, trace, None),
    )
    return _finish(text, report, passed)
