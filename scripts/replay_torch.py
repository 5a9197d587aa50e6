#!/usr/bin/python3
"""Replays a GPT run saved by `tpusim train --model gpt --save DIR` in PyTorch and prints both
loss curves side by side (docs/training.md, "The GPT step on the chip").

The model is written again here from its definition (docs/training.md, "The GPT step"), not
from the simulator's code: GPT-2 style, pre-layer-norm, x @ W with W [in, out], f32 parameters,
every matmul operand rounded to bf16 (f32 accumulation), LayerNorm eps 1e-5, causal softmax
attention, GELU in its tanh form, the mean cross-entropy over every token of the global batch,
torch.optim.AdamW (betas 0.9 / 0.95, eps 1e-8, the run's lr, linear warmup and weight decay on
the matrices only). It starts from DIR/init/*.npy and trains on DIR/tokens.npy, the windows the
pod used. The two curves differ only by rounding (libm against the VPU's transcendental unit,
the order of sums), so they stay within a few percent of each other.

Usage: /usr/bin/python3 scripts/replay_torch.py DIR   (Debian's python3-torch and python3-numpy;
an optional tool, not a test dependency). Exit 0 when every step is within --tolerance
(relative, default 0.05) of the pod's loss, 1 otherwise, 2 for a bad directory.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover - the message is the point
    sys.exit("replay_torch.py: PyTorch is missing (apt-get install python3-torch)")


def bf16(x):
    """x rounded to bf16 (round to nearest even), back in f32, keeping the gradient."""
    return x + (x.to(torch.bfloat16).to(torch.float32) - x).detach()


def mm(a, w):
    return bf16(a) @ bf16(w)


def layer_norm(x, g, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * g + b


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(p, tokens, cfg):
    """The mean cross-entropy of the windows (B x (S + 1) token ids)."""
    L, d, H = cfg["layers"], cfg["d_model"], cfg["heads"]
    S = tokens.shape[1] - 1
    dh = d // H
    x_ids, y_ids = tokens[:, :S], tokens[:, 1:]
    h = p["wte"][x_ids] + p["wpe"][:S][None, :, :]
    mask = torch.tril(torch.ones(S, S, dtype=torch.bool))
    for l in range(L):
        n = "h%d." % l
        x = layer_norm(h, p[n + "ln1.g"], p[n + "ln1.b"])
        qkv = mm(x, p[n + "attn.wqkv"]) + p[n + "attn.bqkv"]
        q, k, v = qkv.split(d, dim=-1)
        heads = []
        for j in range(H):
            sl = slice(j * dh, (j + 1) * dh)
            z = mm(q[..., sl], k[..., sl].transpose(-1, -2)) / math.sqrt(dh)
            z = z.masked_fill(~mask, float("-inf"))
            heads.append(mm(torch.softmax(z, dim=-1), v[..., sl]))
        h = h + mm(torch.cat(heads, dim=-1), p[n + "attn.wo"]) + p[n + "attn.bo"]
        x = layer_norm(h, p[n + "ln2.g"], p[n + "ln2.b"])
        a = gelu(mm(x, p[n + "mlp.w1"]) + p[n + "mlp.b1"])
        h = h + mm(a, p[n + "mlp.w2"]) + p[n + "mlp.b2"]
    logits = mm(layer_norm(h, p["lnf.g"], p["lnf.b"]), p["head.w"])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             y_ids.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the directory tpusim train --model gpt --save wrote")
    ap.add_argument("--tolerance", type=float, default=0.05,
                    help="largest relative difference of a step's loss (default 0.05)")
    a = ap.parse_args()
    try:
        with open(os.path.join(a.dir, "train.json")) as f:
            cfg = json.load(f)
        if cfg.get("model") != "gpt":
            raise ValueError("train.json: not a GPT run (model %r)" % cfg.get("model"))
        tokens = np.load(os.path.join(a.dir, "tokens.npy"))
        pod_loss = np.load(os.path.join(a.dir, "loss.npy"))
        names = sorted(n[:-4] for n in os.listdir(os.path.join(a.dir, "init")) if n.endswith(".npy"))
        p = {n: torch.tensor(np.load(os.path.join(a.dir, "init", n + ".npy")), requires_grad=True)
             for n in names}
    except (OSError, ValueError, KeyError) as e:
        print("replay_torch.py: %s: %s" % (a.dir, e), file=sys.stderr)
        return 2
    opt_cfg = cfg["optimizer"]
    matrices = [t for n, t in p.items() if t.dim() == 2]
    vectors = [t for n, t in p.items() if t.dim() != 2]
    wd = opt_cfg.get("weight_decay", 0.0)
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": wd},
                             {"params": vectors, "weight_decay": 0.0}],
                            lr=opt_cfg["lr"], betas=(opt_cfg["beta1"], opt_cfg["beta2"]),
                            eps=opt_cfg["eps"])
    warmup = opt_cfg.get("warmup", 0)
    worst = 0.0
    print("%5s %12s %12s %9s" % ("step", "pod", "torch", "rel_diff"))
    for s in range(tokens.shape[0]):
        if warmup > 0:
            for g in opt.param_groups:
                g["lr"] = opt_cfg["lr"] * min(1.0, (s + 1) / warmup)
        opt.zero_grad()
        loss = forward(p, torch.tensor(tokens[s], dtype=torch.long), cfg)
        loss.backward()
        opt.step()
        rel = abs(float(loss) - float(pod_loss[s])) / abs(float(pod_loss[s]))
        worst = max(worst, rel)
        print("%5d %12.6f %12.6f %9.5f" % (s, float(pod_loss[s]), float(loss), rel))
    print("largest relative difference %.5f (tolerance %.3f)" % (worst, a.tolerance))
    return 0 if worst <= a.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
