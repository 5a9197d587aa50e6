#!/usr/bin/env python3
"""The GPT golden's seeded numbers in plain Python (docs/training.md, "The GPT step"): the
parameters' init (tpu::gpt_init) and the byte windows of a step (tpu::gpt_windows), computed with
Python integers and f64 only, so a numpy or PyTorch replay can start from the same bits without
the C++ build. tests/unit/gpt_test.cc runs it and compares every value with the golden.

Usage: scripts/gpt_data.py init --seed S --layers L --d-model D [--n-ctx N] [--count K]
         prints, per parameter in the golden's order, its name and the f32 bits (hex) of its
         first K values (default: all)
       scripts/gpt_data.py windows --seed S --seq N --global-batch B --step T FILE
         prints the step's windows of N + 1 bytes of FILE, one window a line
"""
import argparse
import math
import struct
import sys

M64 = (1 << 64) - 1
VOCAB = 256
SLOTS = ["ln1.g", "ln1.b", "attn.wqkv", "attn.bqkv", "attn.wo", "attn.bo",
         "ln2.g", "ln2.b", "mlp.w1", "mlp.b1", "mlp.w2", "mlp.b2"]


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def normal(base, i):
    """Irwin-Hall: twelve 49-bit uniforms, summed exactly, minus 6."""
    s = sum(splitmix64((base + 12 * i + j) & M64) >> 15 for j in range(12))
    return s * 2.0 ** -49 - 6.0


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def shapes(layers, d, n_ctx):
    out = [("wte", VOCAB, d), ("wpe", n_ctx, d)]
    dims = {"attn.wqkv": (d, 3 * d), "attn.bqkv": (1, 3 * d), "attn.wo": (d, d),
            "mlp.w1": (d, 4 * d), "mlp.b1": (1, 4 * d), "mlp.w2": (4 * d, d)}
    for l in range(layers):
        for s in SLOTS:
            out.append((f"h{l}.{s}",) + dims.get(s, (1, d)))
    return out + [("lnf.g", 1, d), ("lnf.b", 1, d), ("head.w", d, VOCAB)]


def init(seed, layers, d, n_ctx, count=None):
    """[(name, [f32 values as Python floats])] exactly as tpu::gpt_init."""
    sd, sd_out = 0.02, 0.02 / math.sqrt(2.0 * layers)
    out = []
    for p, (name, rows, cols) in enumerate(shapes(layers, d, n_ctx)):
        n = rows * cols if count is None else min(count, rows * cols)
        if rows == 1:
            vals = [1.0 if name.endswith(".g") else 0.0] * n
        else:
            base = splitmix64((seed + 0x9E3779B97F4A7C15 * (p + 1)) & M64)
            sigma = sd_out if name.endswith(("attn.wo", "mlp.w2")) else sd
            vals = [struct.unpack("<f", struct.pack("<f", normal(base, i) * sigma))[0]
                    for i in range(n)]
        out.append((name, vals))
    return out


def windows(text, seed, seq, global_batch, step):
    if len(text) < seq + 1:
        raise ValueError(f"data: the text has {len(text)} bytes, shorter than one window")
    base = splitmix64(seed ^ 0x6A09E667F3BCC909)
    starts = len(text) - seq
    out = []
    for b in range(global_batch):
        s0 = splitmix64((base + step * global_batch + b) & M64) % starts
        out.append(list(text[s0:s0 + seq + 1]))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("init")
    a.add_argument("--seed", type=int, required=True)
    a.add_argument("--layers", type=int, required=True)
    a.add_argument("--d-model", type=int, required=True)
    a.add_argument("--n-ctx", type=int, required=True)
    a.add_argument("--count", type=int)
    w = sub.add_parser("windows")
    w.add_argument("--seed", type=int, required=True)
    w.add_argument("--seq", type=int, required=True)
    w.add_argument("--global-batch", type=int, required=True)
    w.add_argument("--step", type=int, required=True)
    w.add_argument("file")
    args = ap.parse_args(argv)
    if args.cmd == "init":
        for name, vals in init(args.seed, args.layers, args.d_model, args.n_ctx, args.count):
            print(name, " ".join(f"{f32_bits(v):08x}" for v in vals))
    else:
        with open(args.file, "rb") as f:
            text = f.read()
        for win in windows(text, args.seed, args.seq, args.global_batch, args.step):
            print(" ".join(str(x) for x in win))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
