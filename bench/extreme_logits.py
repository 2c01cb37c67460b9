#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Backward accuracy at large scores: flashattn against PyTorch's SDPA kernels on the same tensors.

    python3 bench/extreme_logits.py [--lib build/libflashattn.so] [--std 30] [--scale 1]

q and k are N(0, std^2), v and dO N(0, 1), scale 1 (so with std 30 and head dim 64 the scores are
about 1e4): the case of issue 15. For each dtype the max abs error of O, dQ, dK and dV against a
float64 reference is printed for flashattn's CUDA backend (through fa_buffer_wrap_cuda on
PyTorch's stream) and for each SDPA kernel that runs the shape, all on the same tensors.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashattn_ctypes as fa  # noqa: E402
from compare_torch import DTYPES, Wrapped, try_sdpa  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def errors(outs, ref):
    return {k: (outs[k].double() - ref[k]).abs().max().item() for k in ref}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib")
    ap.add_argument("--std", type=float, default=30.0)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    lib = fa.load(args.lib)
    stream = torch.cuda.Stream()
    B, S, H, D = args.batch, args.seq, args.heads, args.head_dim
    with torch.cuda.stream(stream), fa.Context(lib, backend="cuda",
                                               cuda_stream=stream.cuda_stream) as ctx:
        for name in ("f32", "f16", "bf16"):
            tdtype = DTYPES[name][0]
            torch.manual_seed(args.seed)
            q = (torch.randn(B, S, H, D, device="cuda") * args.std).to(tdtype)
            k = (torch.randn(B, S, H, D, device="cuda") * args.std).to(tdtype)
            v, do = (torch.randn(B, S, H, D, device="cuda").to(tdtype) for _ in range(2))
            # float64 reference from the inputs as rounded to the dtype
            q64, k64, v64 = (x.double().transpose(1, 2).requires_grad_() for x in (q, k, v))
            o64 = F.scaled_dot_product_attention(q64, k64, v64, is_causal=args.causal,
                                                 scale=args.scale)
            g = torch.autograd.grad(o64, (q64, k64, v64), do.double().transpose(1, 2))
            ref = {"O": o64.detach().transpose(1, 2), "dQ": g[0].transpose(1, 2),
                   "dK": g[1].transpose(1, 2), "dV": g[2].transpose(1, 2)}
            rows = {}
            o, dq, dk, dv = (torch.empty_like(q) for _ in range(4))
            lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
            w = Wrapped(ctx)
            try:
                desc = fa.AttentionDesc(scale=args.scale, causal=args.causal)
                t = [w.bshd(x) for x in (q, k, v, o, do, dq, dk, dv)]
                ctx.forward(desc, t[0], t[1], t[2], t[3], w.lse(lse))
                ctx.backward(desc, t[0], t[1], t[2], t[3], t[4], w.lse(lse), t[5], t[6], t[7])
                stream.synchronize()
                rows["flashattn"] = errors({"O": o, "dQ": dq, "dK": dk, "dV": dv}, ref)
            finally:
                w.release()
            for kernel in ("flash", "cudnn", "efficient", "math"):
                qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))

                def run():
                    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=args.causal,
                                                         scale=args.scale)
                    grads = torch.autograd.grad(out, (qt, kt, vt), do.transpose(1, 2))
                    return {"O": out.detach().transpose(1, 2), "dQ": grads[0].transpose(1, 2),
                            "dK": grads[1].transpose(1, 2), "dV": grads[2].transpose(1, 2)}
                res, why = try_sdpa(kernel, run)
                if res is not None:
                    rows[kernel] = errors(res, ref)
            largest = {k: v.abs().max().item() for k, v in ref.items()}
            print(f"{name}: B={B} S={S} H={H} D={D} std={args.std} scale={args.scale} "
                  f"causal={args.causal}; largest |ref| " +
                  " ".join(f"{k} {v:.3g}" for k, v in largest.items()))
            for who, e in rows.items():
                print(f"  {who:10s} " + " ".join(f"{k} {v:10.4g}" for k, v in e.items()))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
