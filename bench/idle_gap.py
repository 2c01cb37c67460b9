#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How a decoding step's time recovers after the GPU has idled (docs/PERF.md, Vulkan's slow
state). One context, one decoding problem (f16, D=128, 32 query heads on 8 KV heads, one query
token, 32k keys), its pipeline built and warm; then for each idle gap G: sleep G seconds, then
run calls back to back (each call + fa_context_synchronize timed on the host) for `--burst`
seconds. Prints per gap the first call, the median of the first ten, the median of the last ten,
and how long after the gap the calls first ran within 1.5x of the warm median.

    python3 bench/idle_gap.py [--backend vulkan|cuda] [--lib PATH] [--gaps 0.05,0.5,2]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashattn_ctypes as fa  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="vulkan")
    ap.add_argument("--lib")
    ap.add_argument("--gaps", default="0.02,0.1,0.3,0.6,1.0,2.0")
    ap.add_argument("--burst", type=float, default=0.6)
    ap.add_argument("--seq-k", type=int, default=32768)
    a = ap.parse_args()
    lib = fa.load(a.lib)
    B, Hq, Hk, Sk, D = 1, 32, 8, a.seq_k, 128
    rng = np.random.default_rng(1)
    with fa.Context(lib, backend=a.backend) as ctx:
        info = ctx.device()
        print(f"{a.backend}: {info.name.decode()}")

        def buf(n):
            x = rng.standard_normal(n).astype(np.float16)
            return ctx.buffer(x.nbytes, x.tobytes())

        q, k, v = buf(B * Hq * D), buf(B * Sk * Hk * D), buf(B * Sk * Hk * D)
        o = ctx.buffer(B * Hq * D * 2)
        tq = fa.tensor(q, fa.DTYPE_F16, (B, 1, Hq, D), (Hq * D, Hq * D, D, 1))
        tk = fa.tensor(k, fa.DTYPE_F16, (B, Sk, Hk, D), (Sk * Hk * D, Hk * D, D, 1))
        tv = fa.tensor(v, fa.DTYPE_F16, (B, Sk, Hk, D), (Sk * Hk * D, Hk * D, D, 1))
        to = fa.tensor(o, fa.DTYPE_F16, (B, 1, Hq, D), (Hq * D, Hq * D, D, 1))
        desc = fa.AttentionDesc(scale=D ** -0.5)

        def call():
            t = time.perf_counter()
            ctx.forward(desc, tq, tk, tv, to)
            ctx.synchronize()
            return time.perf_counter() - t

        t0 = time.perf_counter()
        first = call()
        print(f"first call (pipeline) {first * 1e3:.1f} ms")
        warm = []
        while time.perf_counter() - t0 < 2.0:  # two seconds of calls: the warm state
            warm.append(call())
        ref = float(np.median(warm[-200:]))
        print(f"warm median {ref * 1e3:.3f} ms over the last 200 of {len(warm)} calls")
        print("gap_s  first_ms  first10_ms  last10_ms  calls  recovered_after_ms")
        for gap in (float(g) for g in a.gaps.split(",")):
            time.sleep(gap)
            times, start = [], time.perf_counter()
            while time.perf_counter() - start < a.burst:
                times.append(call())
            acc, rec = 0.0, None
            for t in times:
                if t < 1.5 * ref:
                    rec = acc
                    break
                acc += t
            print(f"{gap:5.2f}  {times[0] * 1e3:8.3f}  {np.median(times[:10]) * 1e3:10.3f}  "
                  f"{np.median(times[-10:]) * 1e3:9.3f}  {len(times):5d}  "
                  f"{'never' if rec is None else f'{rec * 1e3:.1f}'}")
        for b in (q, k, v, o):
            b.destroy()


if __name__ == "__main__":
    main()
