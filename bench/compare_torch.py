#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""flashattn against PyTorch's scaled_dot_product_attention, in one process on the same tensors.

Run it on a CUDA machine with PyTorch and a built libflashattn:

    python3 bench/compare_torch.py --quick                 # seqlen 512 and 2k, checked
    python3 bench/compare_torch.py --json out.json --png out.png
    python3 bench/compare_torch.py --dtype bf16 --sdpa flash --lib build/libflashattn.so
    python3 bench/compare_torch.py --decode                # one-token decoding, GB/s
    python3 bench/compare_torch.py --decode --trace        # ... and each call's kernels
    python3 bench/compare_torch.py --variants              # window, softcap, ALiBi vs FlexAttention

libflashattn is loaded with ctypes (bench/flashattn_ctypes.py); its CUDA context issues work on
PyTorch's stream, and PyTorch's tensors are used in place (fa_buffer_wrap_cuda). q, k, v are
(B, S, H, D) tensors: flashattn reads them as packed BSHD, SDPA gets their .transpose(1, 2)
views, so both read the very same memory. Each row is timed with CUDA events on that stream:
warm-up, then at most --repeat runs queued back to back (fewer if they would take over 1 s),
median. The backward is timed alone: flashattn's fa_attention_backward after one forward, and
for SDPA torch.autograd.grad(out, (q, k, v), dout, retain_graph=True) after one forward, as
FlashAttention's benchmark does.

The grid is FlashAttention's benchmark: 16k tokens (batch = 16384 / seqlen), hidden 2048
(heads = 2048 / head dim), seqlen 512..16k, head dim 64 and 128, causal off and on, forward and
backward, f16 and bf16; then the target row (forward, B=1 H=16 N=4096 D=128 f32), for which
SDPA's 'efficient' and 'math' kernels are shown (its flash and cuDNN kernels have no f32);
--f32 runs only f32 forward rows (that one, head dims 64 and 256, causal, 16k, N=512).
FLOPs: 4*B*H*N*N*D per forward, half when causal, 2.5x for backward. The ratios are
flashattn TF/s over SDPA's (above 1: flashattn is faster).

--check (default on with --quick) compares each row with a float64 reference of two whole
heads, by the project's rule (tools/testkit/fa_testkit.h): flashattn's max abs error must be at
most k * the error of PyTorch's SDPA on the same tensors + 1e-5, k = 2 for O and 3 for dQ, dK,
dV; its LSE within 1e-3 relative; no NaN or Inf. SDPA's 'flash' kernel is the baseline where it
ran (else the next of cudnn, efficient, math). A failed check or a failed flashattn call prints
FAIL and makes the exit code 1; a shape an SDPA kernel refuses is shown as n/a.
"""
import argparse
import csv
import ctypes
import json
import math
import os
import re
import statistics
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashattn_ctypes as fa  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("compare_torch.py needs PyTorch (pip install torch)")

TOKENS, HIDDEN = 16384, 2048
ALL_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
QUICK_SEQLENS = [512, 2048]
HEAD_DIMS = [64, 128]
DTYPES = {"f32": (torch.float32, fa.DTYPE_F32), "f16": (torch.float16, fa.DTYPE_F16),
          "bf16": (torch.bfloat16, fa.DTYPE_BF16)}
SDPA_NAMES = ["flash", "cudnn", "efficient", "math"]  # also the baseline preference order
TARGET_SDPA = ["efficient", "math"]
K_FORWARD, K_BACKWARD, ABS_SLACK, LSE_REL = 2.0, 3.0, 1e-5, 1e-3  # fa_testkit.h


def flops(batch, heads, seqlen, head_dim, causal, backward):
    f = 4.0 * batch * heads * seqlen * seqlen * head_dim
    if causal:
        f *= 0.5
    return 2.5 * f if backward else f


def cuda_time(fn, warmup, repeat, budget_ms=1000.0, samples=None, warm_ms=25.0):
    """(median ms, last result) of fn() timed with CUDA events on the current stream. The timed
    calls are queued back to back, each between its own pair of events, so that the GPU stays
    ahead of the CPU and host-side launch costs (ctypes, autograd) are not what is measured.
    Warm-up: `warmup` calls, then more until about warm_ms of GPU time has passed (on the H200 a
    0.5 ms decoding call ran 13 % slower through its first ~5 ms, whichever library ran first).
    The timed calls: at most `repeat`, fewer where the last warm-up call says 1 s would pass;
    `samples` (a list) receives each one's ms."""
    Event = torch.cuda.Event
    out, first = None, Event(enable_timing=True)
    start, end = Event(enable_timing=True), Event(enable_timing=True)
    first.record()
    for _ in range(max(1, warmup)):
        start.record()
        out = fn()
        end.record()
    end.synchronize()
    per_call = max(start.elapsed_time(end), 1e-3)
    spent = first.elapsed_time(end)
    if spent < warm_ms:
        for _ in range(min(1000, int((warm_ms - spent) / per_call) + 1)):
            out = fn()
    n = max(1, min(repeat, int(budget_ms / per_call)))
    events = [(Event(enable_timing=True), Event(enable_timing=True)) for _ in range(n)]
    for start, end in events:
        start.record()
        out = fn()
        end.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in events]
    if samples is not None:
        samples.extend(times)
    return statistics.median(times), out


def kernel_trace(fn, calls=20):
    """What the GPU ran for one call of fn(), from torch.profiler (CUPTI, which also sees
    flashattn's own launches): a line with each kernel (or memset, copy) and its mean time per
    call, the calls' mean period when queued back to back, and the idle part of that period."""
    import tempfile
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as g:
            trace = json.load(g)
    work = [e for e in trace.get("traceEvents", [])
            if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy") and "dur" in e]
    if not work:
        return "trace: no GPU activity recorded"
    by_name = {}
    for e in work:
        by_name.setdefault(re.sub(r"\(.*", "", e["name"])[:48], []).append(e["dur"])
    period = (max(e["ts"] + e["dur"] for e in work) - min(e["ts"] for e in work)) / calls
    busy = sum(e["dur"] for e in work) / calls
    parts = [f"{n} x{len(d) / calls:g} {sum(d) / len(d):.1f} us" for n, d in by_name.items()]
    return (f"trace: period {period:.1f} us, busy {busy:.1f}, idle {period - busy:.1f}; " +
            "; ".join(parts))


def sdpa_kernel(name):
    from torch.nn.attention import SDPBackend, sdpa_kernel as kernel

    attr = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION",
            "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}[name]
    if not hasattr(SDPBackend, attr):
        raise RuntimeError(f"this PyTorch has no SDPBackend.{attr}")
    return kernel([getattr(SDPBackend, attr)])


def try_sdpa(name, fn):
    """fn() under SDPA kernel `name`: (result, None), or (None, reason) when the kernel refuses
    the shape (or memory runs out); SDPA's warnings saying why become the reason."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(name):
                return fn(), None
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one too
            torch.cuda.synchronize()
            why = [re.sub(r"\s*\(Triggered internally at [^)]*\)", "", str(w.message)).strip()
                   for w in caught] + [str(e).splitlines()[0]]
            # keep the reasons, not the headers or the kernels our selection turned off
            why = [w for w in why if w and not w.endswith("because:") and "runtime disabled"
                   not in w]
            return None, "; ".join(why)


class Wrapped:
    """fa_tensor views of PyTorch CUDA tensors, in place. release() before the tensors go."""

    def __init__(self, ctx):
        self.ctx, self.buffers = ctx, []

    def _wrap(self, x):
        span = 1 + sum((n - 1) * s for n, s in zip(x.shape, x.stride()))  # elements it reaches
        buf = self.ctx.wrap_cuda(x.data_ptr(), span * x.element_size())
        self.buffers.append(buf)
        return buf

    def bshd(self, x):
        """x: a (B, S, H, D) torch tensor with any strides (stride[3] == 1)."""
        dtype = {t: f for t, f in DTYPES.values()}[x.dtype]
        return fa.tensor(self._wrap(x), dtype, tuple(x.shape), tuple(x.stride()))

    def table(self, x):
        """x: a (B, max_pages) int32 torch tensor, the block table, seen as (B, max_pages, 1, 1)."""
        return fa.tensor(self._wrap(x), fa.DTYPE_I32, (x.shape[0], x.shape[1], 1, 1),
                         (x.stride(0), x.stride(1), 1, 1))

    def lse(self, x):
        """x: a (B, H, S) float32 torch tensor, seen in the logical (B, S, H, 1) order."""
        B, H, S = x.shape
        return fa.tensor(self._wrap(x), fa.DTYPE_F32, (B, S, H, 1),
                         (x.stride(0), x.stride(2), x.stride(1), 1))

    def release(self):
        for b in self.buffers:
            b.destroy()
        self.buffers = []


# ---- the check ----------------------------------------------------------------------------------

def reference_head(q, k, v, do, b, h, causal):
    """Float64 O, LSE and (with do) dQ, dK, dV of head h of batch b, in query-row chunks."""
    Q, K, V = (x[b, :, h].detach().double() for x in (q, k, v))
    Sq, Sk, D = Q.shape[0], K.shape[0], Q.shape[1]
    scale = 1.0 / math.sqrt(D)
    O, lse = torch.empty_like(Q), torch.empty(Sq, dtype=torch.float64, device=Q.device)
    dQ = torch.empty_like(Q) if do is not None else None
    dK, dV = (torch.zeros_like(K), torch.zeros_like(V)) if do is not None else (None, None)
    dO = do[b, :, h].double() if do is not None else None
    chunk = max(1, (1 << 24) // Sk)  # keeps each (chunk, Sk) float64 matrix near 128 MiB
    for i0 in range(0, Sq, chunk):
        i1 = min(Sq, i0 + chunk)
        s = (Q[i0:i1] @ K.T) * scale
        if causal:  # bottom-right aligned: query i sees keys j <= i + Sk - Sq
            i = torch.arange(i0, i1, device=Q.device)[:, None]
            s.masked_fill_(torch.arange(Sk, device=Q.device)[None, :] > i + (Sk - Sq), -math.inf)
        lse[i0:i1] = torch.logsumexp(s, dim=1)
        p = torch.exp(s - lse[i0:i1, None])
        O[i0:i1] = p @ V
        if do is not None:
            dOc = dO[i0:i1]
            delta = (dOc * O[i0:i1]).sum(dim=1, keepdim=True)
            ds = p * (dOc @ V.T - delta)
            dQ[i0:i1] = scale * (ds @ K)
            dK += scale * (ds.T @ Q[i0:i1])
            dV += p.T @ dOc
    return {"O": O, "LSE": lse, "dQ": dQ, "dK": dK, "dV": dV}


def max_err(x, ref, heads):
    """Max abs error of (B, S, H, D) tensor x against the per-head references; NaN/Inf -> inf."""
    worst = 0.0
    for (b, h), r in zip(heads, ref):
        e = (x[b, :, h].double() - r).abs().max().item()
        worst = max(worst, e if math.isfinite(e) else math.inf)
    return worst


def check_row(q, k, v, do, causal, ours, lse, sdpa_out):
    """ours / sdpa_out[name]: {"O": ...} or {"dQ", "dK", "dV"}, (B, S, H, D) tensors."""
    B, _, H, _ = q.shape
    heads = sorted({(0, 0), (B - 1, H - 1)})
    refs = [reference_head(q, k, v, do, b, h, causal) for b, h in heads]
    baseline = next(n for n in SDPA_NAMES if n in sdpa_out)
    result = {"baseline": baseline, "heads": heads, "outputs": {}, "pass": True, "ratio": 0.0}
    for name, x in ours.items():
        kf = K_FORWARD if name == "O" else K_BACKWARD
        ref = [r[name] for r in refs]
        err = max_err(x, ref, heads)
        errs = {n: max_err(out[name], ref, heads) for n, out in sdpa_out.items()}
        base = errs[baseline]
        ok = err <= kf * base + ABS_SLACK
        result["outputs"][name] = {"err": err, "sdpa_err": errs, "k": kf, "pass": ok}
        result["pass"] &= ok
        result["ratio"] = max(result["ratio"], err / base if base > 0 else
                              (0.0 if err == 0 else math.inf))
    if lse is not None:  # the LSE against the reference alone, relative
        rel = 0.0
        for (b, h), r in zip(heads, refs):
            e = ((lse[b, h].double() - r["LSE"]).abs() / r["LSE"].abs().clamp(min=1)).max().item()
            rel = max(rel, e if math.isfinite(e) else math.inf)
        result["outputs"]["LSE"] = {"rel_err": rel, "pass": rel <= LSE_REL}
        result["pass"] &= rel <= LSE_REL
    return result


# ---- one grid point -----------------------------------------------------------------------------

def run_point(ctx, args, dtype_name, B, H, S, D, causal, backward, sdpa_names, check):
    """Times flashattn and each SDPA kernel on one problem: a list of one or two row dicts."""
    tdtype = DTYPES[dtype_name][0]
    torch.manual_seed(args.seed)
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=tdtype) for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_(backward)  # SDPA then also keeps the LSE, as flashattn writes it
    o = torch.empty(B, S, H, D, device="cuda", dtype=tdtype)
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, S, D) views for SDPA
    w = Wrapped(ctx)
    desc = fa.AttentionDesc(scale=0.0, causal=causal)
    timing = dict(warmup=args.warmup, repeat=args.repeat)
    base = dict(dtype=dtype_name, causal=causal, head_dim=D, seqlen=S, batch=B, heads=H)
    rows = []
    try:
        tq, tk, tv, to, tlse = w.bshd(q), w.bshd(k), w.bshd(v), w.bshd(o), w.lse(lse)
        row = dict(base, direction="fwd", sdpa={})
        try:
            row["flashattn"] = cuda_time(lambda: ctx.forward(desc, tq, tk, tv, to, tlse),
                                         **timing)[0]
        except fa.FaError as e:
            row["flashattn"], row["error"] = None, str(e)
        outs = {}
        for name in sdpa_names:
            res, why = try_sdpa(name, lambda: cuda_time(
                lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), **timing))
            row["sdpa"][name] = res[0] if res else why
            if res:
                outs[name] = {"O": res[1].detach().transpose(1, 2)}
        if check and row["flashattn"] is not None:
            if not outs:  # no baseline timed: SDPA's math kernel in the same dtype
                res, _ = try_sdpa("math", lambda: F.scaled_dot_product_attention(
                    qt, kt, vt, is_causal=causal))
                if res is not None:
                    outs["math"] = {"O": res.detach().transpose(1, 2)}
            row["check"] = check_row(q, k, v, None, causal, {"O": o}, lse, outs) if outs else \
                {"pass": False, "error": "no SDPA kernel ran to serve as the baseline"}
        rows.append(row)
        del outs
        if not backward:
            return rows

        row = dict(base, direction="bwd", sdpa={})
        dq, dk, dv = (torch.empty_like(o) for _ in range(3))
        tdo, tdq, tdk, tdv = w.bshd(do), w.bshd(dq), w.bshd(dk), w.bshd(dv)
        try:
            ctx.forward(desc, tq, tk, tv, to, tlse)  # the O and LSE the backward reads
            row["flashattn"] = cuda_time(lambda: ctx.backward(desc, tq, tk, tv, to, tdo, tlse,
                                                              tdq, tdk, tdv), **timing)[0]
        except fa.FaError as e:
            row["flashattn"], row["error"] = None, str(e)
        grads = {}

        def sdpa_backward():
            out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            # dO's values in out's own layout: some kernels want grad_output strided like out
            dout = torch.empty_like(out).copy_(do.transpose(1, 2))
            return cuda_time(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True),
                             **timing)

        for name in sdpa_names:
            res, why = try_sdpa(name, sdpa_backward)
            row["sdpa"][name] = res[0] if res else why
            if res:
                grads[name] = dict(zip(("dQ", "dK", "dV"), res[1]))
        if check and row["flashattn"] is not None:
            if not grads:
                res, _ = try_sdpa("math", lambda: torch.autograd.grad(
                    F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (q, k, v),
                    do.transpose(1, 2)))
                if res is not None:
                    grads["math"] = dict(zip(("dQ", "dK", "dV"), res))
            row["check"] = check_row(q, k, v, do, causal, {"dQ": dq, "dK": dk, "dV": dv}, None,
                                     grads) if grads else \
                {"pass": False, "error": "no SDPA kernel ran to serve as the baseline"}
        rows.append(row)
        return rows
    finally:
        w.release()  # flashattn forgets the memory before PyTorch may free it


# ---- variants -----------------------------------------------------------------------------------

def run_variants(ctx, args):
    """Forward and backward of one f16 problem (B=1, H=16, D=128, --variant-seqlen) with a
    sliding window (4096 keys back, causal), a softcap (30) or ALiBi (slopes 2^(-8 (h+1) / H))
    against PyTorch's FlexAttention (torch.compile'd, the matching block mask or score_mod):
    milliseconds, flex / flashattn, and the largest |O difference| between the two (both f16:
    a sanity check, not the float64 rule). Returns (rows, failed)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    flex = torch.compile(flex_attention, dynamic=False)
    B, H, S, D, W = 1, 16, args.variant_seqlen, 128, 4096
    torch.manual_seed(args.seed)
    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16) for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_(True)
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], device="cuda")
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    timing = dict(warmup=args.warmup, repeat=args.repeat)
    window_mask = create_block_mask(lambda b, h, qi, ki: (qi >= ki) & (qi - ki <= W), None, None,
                                    S, S, device="cuda")
    variants = [("window 4096,0", dict(block_mask=window_mask)),
                ("softcap 30", dict(score_mod=lambda s, b, h, qi, ki: 30.0 * torch.tanh(s / 30.0))),
                ("alibi", dict(score_mod=lambda s, b, h, qi, ki: s - slopes[h] * (qi - ki).abs()))]
    print(f"\nvariants: f16, B={B} H={H} N={S} D={D}; milliseconds, FlexAttention / flashattn, "
          f"max |O difference|")
    print(f"{'variant':<15} {'dir':<4} {'flashattn':>10} {'flex':>10} {'flex/fa':>8}  O diff")
    rows, failed = [], False
    w = Wrapped(ctx)
    try:
        tq, tk, tv, to, tlse = w.bshd(q), w.bshd(k), w.bshd(v), w.bshd(o), w.lse(lse)
        dq, dk, dv = (torch.empty_like(o) for _ in range(3))  # alive while flashattn writes them
        tdo, tdq, tdk, tdv = (w.bshd(x) for x in (do, dq, dk, dv))
        tslopes = w.bshd(slopes.view(1, 1, H, 1))
        for name, kw in variants:
            desc = fa.AttentionDesc(scale=0.0, causal=name.startswith("window"))
            if name.startswith("window"):
                desc.window = fa.Window(True, W, 0)
            if name.startswith("softcap"):
                desc.softcap = 30.0
            if name == "alibi":
                desc.alibi_slopes = ctypes.cast(ctypes.pointer(tslopes), ctypes.c_void_p)
            row = dict(variant=name)
            try:
                row["fa_fwd"] = cuda_time(lambda: ctx.forward(desc, tq, tk, tv, to, tlse),
                                          **timing)[0]
                row["fa_bwd"] = cuda_time(lambda: ctx.backward(desc, tq, tk, tv, to, tdo, tlse,
                                                               tdq, tdk, tdv), **timing)[0]
            except fa.FaError as e:
                row["error"] = str(e)
            try:
                row["flex_fwd"], out = cuda_time(lambda: flex(qt, kt, vt, **kw), **timing)
                row["o_diff"] = (out.transpose(1, 2).float() - o.float()).abs().max().item()
                dout = torch.empty_like(out).copy_(do.transpose(1, 2))
                row["flex_bwd"] = cuda_time(lambda: torch.autograd.grad(
                    out, (q, k, v), dout, retain_graph=True), **timing)[0]
            except Exception as e:  # noqa: BLE001 (compile or memory failures are reported)
                row["flex_error"] = str(e).splitlines()[0]
            for d in ("fwd", "bwd"):
                ours, theirs = row.get(f"fa_{d}"), row.get(f"flex_{d}")
                cell = lambda x: f"{x:>10.3f}" if x else f"{'n/a':>10}"  # noqa: E731
                ratio = f"{theirs / ours:>8.2f}" if ours and theirs else f"{'-':>8}"
                diff = f"  {row['o_diff']:.2e}" if d == "fwd" and "o_diff" in row else ""
                print(f"{name:<15} {d:<4} {cell(ours)} {cell(theirs)} {ratio}{diff}")
            for key in ("error", "flex_error"):
                if key in row:
                    print(f"      {key}: {row[key]}")
            failed |= "error" in row
            rows.append(row)
    finally:
        w.release()
    return rows, failed


# ---- decoding -----------------------------------------------------------------------------------

DECODE_SHAPES = [(1, 4096), (1, 32768), (1, 131072), (16, 4096), (16, 32768), (64, 4096)]
DECODE_HQ, DECODE_HKV, DECODE_D = 32, 8, 128


def to_pages(x, page_size, perm):
    """x (B, Sk, H, D) as pages (num_pages, page_size, H, D) in the shuffled order perm: logical
    page j of entry b (pages of Sk / page_size keys each) is page perm[b * max_pages + j]."""
    B, Sk, H, D = x.shape
    pages = torch.empty(B * Sk // page_size, page_size, H, D, device=x.device, dtype=x.dtype)
    pages[perm] = x.reshape(B * Sk // page_size, page_size, H, D)
    return pages


def run_decode(ctx, args, names):
    """One query token against caches of DECODE_SHAPES (f16, GQA 32:8, D=128): GB/s of K and V
    read by flashattn and by each SDPA kernel (enable_gqa), O checked against float64 by the
    rule of the main grid (at most 2x SDPA's error + 1e-5). With --page-size, flashattn reads K
    and V as a paged cache (pages shuffled, a block table) while SDPA reads them contiguous: the
    same numbers, so the ratio is the paged path's cost against SDPA's contiguous one. Returns
    (rows, failed)."""
    rows, failed = [], False
    tdtype = torch.float16
    paged = f", flashattn's cache in pages of {args.page_size}" if args.page_size else ""
    print(f"\ndecoding: f16, one query token, {DECODE_HQ} query heads on {DECODE_HKV} KV heads, "
          f"D={DECODE_D}{paged}; GB/s of K and V read (then flashattn / each)")
    print(f"{'batch':>5} {'cache':>7} {'flashattn':>10} " + " ".join(f"{n:>9}" for n in names) +
          " " + " ".join(f"{'fa/' + n:>10}" for n in names) + "  O err / SDPA's")
    for B, Sk in DECODE_SHAPES:
        torch.manual_seed(args.seed)
        q = torch.randn(B, 1, DECODE_HQ, DECODE_D, device="cuda", dtype=tdtype)
        k, v = (torch.randn(B, Sk, DECODE_HKV, DECODE_D, device="cuda", dtype=tdtype)
                for _ in range(2))
        o = torch.empty_like(q)
        lse = torch.empty(B, DECODE_HQ, 1, device="cuda", dtype=torch.float32)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        gbytes = 2.0 * B * Sk * DECODE_HKV * DECODE_D * 2 / 1e9
        row = dict(batch=B, seq_k=Sk, heads=DECODE_HQ, kv_heads=DECODE_HKV, head_dim=DECODE_D,
                   page_size=args.page_size, sdpa={})
        w = Wrapped(ctx)
        try:
            desc = fa.AttentionDesc(scale=0.0, causal=False, num_splits=args.splits)
            tq, to, tlse = w.bshd(q), w.bshd(o), w.lse(lse)
            if args.page_size:
                perm = torch.randperm(B * Sk // args.page_size, device="cuda")
                kp, vp = to_pages(k, args.page_size, perm), to_pages(v, args.page_size, perm)
                table = perm.to(torch.int32).reshape(B, Sk // args.page_size)
                tk, tv, ttable = w.bshd(kp), w.bshd(vp), w.table(table)
                desc.block_table = ctypes.cast(ctypes.pointer(ttable), ctypes.c_void_p)
            else:
                tk, tv = w.bshd(k), w.bshd(v)
            try:
                times = []
                ms = cuda_time(lambda: ctx.forward(desc, tq, tk, tv, to, tlse),
                               warmup=args.warmup, repeat=args.repeat, samples=times)[0]
                row["flashattn"] = gbytes / (ms * 1e-3)
                if args.trace:
                    row["trace"] = {"flashattn": kernel_trace(
                        lambda: ctx.forward(desc, tq, tk, tv, to, tlse)) +
                        "; timed calls " + " ".join(f"{t * 1e3:.1f}" for t in times) + " us"}
            except fa.FaError as e:
                row["flashattn"], row["error"] = None, str(e)
                failed = True
            sdpa_out = None
            for name in names:
                res, why = try_sdpa(name, lambda: cuda_time(
                    lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True),
                    warmup=args.warmup, repeat=args.repeat))
                row["sdpa"][name] = gbytes / (res[0] * 1e-3) if res else why
                if res and args.trace:
                    with sdpa_kernel(name):
                        row.setdefault("trace", {})[name] = kernel_trace(
                            lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True))
                if res and sdpa_out is None:
                    sdpa_out = res[1].detach().transpose(1, 2)
            if row["flashattn"] is not None and sdpa_out is not None:
                g = DECODE_HQ // DECODE_HKV  # float64 reference, every head
                K64 = k.double().repeat_interleave(g, dim=2).permute(0, 2, 3, 1)
                V64 = v.double().repeat_interleave(g, dim=2).transpose(1, 2)
                s = torch.matmul(q.double().transpose(1, 2), K64) / math.sqrt(DECODE_D)
                ref = torch.matmul(torch.softmax(s, dim=-1), V64).transpose(1, 2)
                ours = (o.double() - ref).abs().max().item()
                theirs = (sdpa_out.double() - ref).abs().max().item()
                lse_ref = torch.logsumexp(s, dim=-1)[..., 0]
                lse_err = ((lse.double()[..., 0] - lse_ref).abs() /
                           lse_ref.abs().clamp_min(1.0)).max().item()
                ok = ours <= K_FORWARD * theirs + ABS_SLACK and lse_err <= LSE_REL and \
                    bool(torch.isfinite(o).all())
                row["check"] = dict(pass_=ok, err=ours, sdpa_err=theirs, lse_rel=lse_err)
                failed |= not ok
            del sdpa_out
        finally:
            w.release()
        ours = row.get("flashattn")
        cells = [f"{row['sdpa'][n]:>9.1f}" if isinstance(row["sdpa"][n], float) else
                 f"{'n/a':>9}" for n in names]
        ratios = [f"{ours / row['sdpa'][n]:>10.2f}" if ours and
                  isinstance(row["sdpa"][n], float) else f"{'-':>10}" for n in names]
        chk = row.get("check")
        note = (f"  {chk['err']:.2e} / {chk['sdpa_err']:.2e} "
                f"{'pass' if chk['pass_'] else 'FAIL'}") if chk else \
            ("  " + row.get("error", "")) if ours is None else ""
        print(f"{B:>5} {Sk:>7} " + (f"{ours:>10.1f}" if ours else f"{'FAIL':>10}") + " " +
              " ".join(cells) + " " + " ".join(ratios) + note)
        for n in names:
            if not isinstance(row["sdpa"][n], float):
                print(f"      {n}: {row['sdpa'][n]}")
        for who, line in row.get("trace", {}).items():
            print(f"      {who} {line}")
        rows.append(row)
        del q, k, v, o, lse, qt, kt, vt
        torch.cuda.empty_cache()
    return rows, failed


def finish_row(row):
    """Adds TF/s and ratios to a row from run_point."""
    f = flops(row["batch"], row["heads"], row["seqlen"], row["head_dim"], row["causal"],
              row["direction"] == "bwd")
    tf = lambda ms: f / ms * 1e-9 if isinstance(ms, float) else None  # noqa: E731
    row["flashattn_tflops"] = tf(row["flashattn"])
    row["sdpa_tflops"] = {n: tf(ms) for n, ms in row["sdpa"].items()}
    row["ratio"] = {n: (row["flashattn_tflops"] / t if t and row["flashattn_tflops"] else None)
                    for n, t in row["sdpa_tflops"].items()}
    return row


def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def width(name):
    return max(10, len(name) + 3)  # room for "fa/" + name


def header(names):
    return (f"{'dtype':>5} {'causal':>6} {'D':>4} {'seqlen':>6} {'batch':>5} {'heads':>5} "
            f"{'dir':>4} {'flashattn':>10}" + "".join(f" {n:>{width(n)}}" for n in names) +
            "".join(f" {'fa/' + n:>{width(n)}}" for n in names) + "  check")


def print_row(row, names):
    c = row.get("check")
    check = "-" if c is None else ("PASS" if c["pass"] else "FAIL") + (
        f" {c['ratio']:.2f}x" if "ratio" in c else "")
    line = (f"{row['dtype']:>5} {'yes' if row['causal'] else 'no':>6} {row['head_dim']:4d} "
            f"{row['seqlen']:6d} {row['batch']:5d} {row['heads']:5d} {row['direction']:>4} "
            f"{fmt(row['flashattn_tflops'], '10.1f'):>10}")
    line += "".join(f" {fmt(row['sdpa_tflops'][n], '.1f'):>{width(n)}}" for n in names)
    line += "".join(f" {fmt(row['ratio'][n], '.2f'):>{width(n)}}" for n in names)
    print(f"{line}  {check}", flush=True)
    if "error" in row:
        print(f"  FAIL flashattn: {row['error']}", file=sys.stderr)
    for n in names:
        if isinstance(row["sdpa"][n], str):
            print(f"  sdpa {n} n/a: {row['sdpa'][n]}", file=sys.stderr)
    if c is not None and not c["pass"]:
        print(f"  FAIL check: {json.dumps(c)}", file=sys.stderr)


def row_failed(row):
    return row["flashattn"] is None or ("check" in row and not row["check"]["pass"])


def write_csv(path, rows, names):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dtype", "causal", "head_dim", "seqlen", "batch", "heads", "direction",
                    "flashattn_ms", "flashattn_tflops"] +
                   [f"{n}_{x}" for n in names for x in ("ms", "tflops", "ratio")] + ["check"])
        for r in rows:
            ms = lambda x: x if isinstance(x, float) else ""  # noqa: E731
            w.writerow([r["dtype"], int(r["causal"]), r["head_dim"], r["seqlen"], r["batch"],
                        r["heads"], r["direction"], ms(r["flashattn"]),
                        ms(r["flashattn_tflops"])] +
                       [ms(v) for n in names for v in (r["sdpa"].get(n), r["sdpa_tflops"].get(n),
                                                       r["ratio"].get(n))] +
                       ["" if "check" not in r else ("pass" if r["check"]["pass"] else "fail")])


def plot(path, rows, names):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no plot written to {path}", file=sys.stderr)
        return
    panels = sorted({(r["dtype"], r["direction"]) for r in rows}, key=lambda p: (p[0], p[1] != "fwd"))
    cols = sorted({(r["causal"], r["head_dim"]) for r in rows})
    fig, axes = plt.subplots(len(panels), len(cols), squeeze=False,
                             figsize=(4 * len(cols), 3.2 * len(panels)))
    for i, (dt, direction) in enumerate(panels):
        for j, (causal, D) in enumerate(cols):
            ax = axes[i][j]
            sel = sorted((r for r in rows if (r["dtype"], r["direction"], r["causal"],
                                              r["head_dim"]) == (dt, direction, causal, D)),
                         key=lambda r: r["seqlen"])
            for label, get in [("flashattn", lambda r: r["flashattn_tflops"])] + \
                    [(f"sdpa {n}", lambda r, n=n: r["sdpa_tflops"][n]) for n in names]:
                pts = [(r["seqlen"], get(r)) for r in sel if get(r) is not None]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{dt} {direction} D={D}{' causal' if causal else ''}", fontsize=9)
            ax.set_xlabel("seqlen")
            ax.set_ylabel("TF/s")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="seqlen 512 and 2k only")
    ap.add_argument("--seqlen", type=int, action="append",
                    help="only this seqlen of the grid (repeatable)")
    ap.add_argument("--head-dim", type=int, action="append",
                    help=f"head dims of the grid (repeatable; default {HEAD_DIMS}; the grid's "
                    "batch and heads keep 16k tokens and 2048 channels, e.g. 256 at 8k: B=2 H=8)")
    ap.add_argument("--dtype", choices=["f16", "bf16", "both"], default="both")
    ap.add_argument("--sdpa", default="flash,cudnn",
                    help="comma-separated SDPA kernels of flash,cudnn,efficient,math "
                         "(default flash,cudnn)")
    ap.add_argument("--lib", help="libflashattn.so (default: build/, then LD_LIBRARY_PATH)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index")
    ap.add_argument("--repeat", type=int, default=10, help="at most N timed runs (stop at 1 s)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                    help="check every row against a float64 reference (default: with --quick)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the rows as JSON")
    ap.add_argument("--png", help="write a TF/s plot (needs matplotlib)")
    ap.add_argument("--csv", help="write the rows as CSV")
    ap.add_argument("--f32", action="store_true",
                    help="f32 forward rows only: the target row, head dims 64 and 256, causal, 16k "
                    "(FA_CUDA_F32=cores in the environment: the CUDA-core kernel instead of 3xTF32)")
    ap.add_argument("--decode", action="store_true",
                    help="the decoding rows instead (one query token, GQA 32:8, D=128, f16)")
    ap.add_argument("--page-size", type=int, default=0,
                    help="with --decode: flashattn's K and V as a paged cache of N-key pages")
    ap.add_argument("--variants", action="store_true",
                    help="the variant rows instead (window, softcap, ALiBi against FlexAttention)")
    ap.add_argument("--variant-seqlen", type=int, default=16384,
                    help="with --variants: the sequence length (default 16384)")
    ap.add_argument("--trace", action="store_true",
                    help="with --decode: each row's kernels and idle time per call (torch.profiler)")
    ap.add_argument("--splits", type=int, default=0,
                    help="fa_attention_desc.num_splits of the decoding rows (0: flashattn's)")
    args = ap.parse_args()
    names = [n.strip() for n in args.sdpa.split(",") if n.strip()]
    if not names or any(n not in SDPA_NAMES for n in names):
        ap.error(f"--sdpa: choose from {','.join(SDPA_NAMES)}")
    check = args.quick if args.check is None else args.check
    if not torch.cuda.is_available():
        sys.exit("compare_torch.py needs a CUDA GPU visible to PyTorch")

    lib = fa.load(args.lib)
    torch.cuda.set_device(args.device)
    # A stream of our own: the default stream's handle is 0, which flashattn would take as "no
    # stream" and use one of its own, unordered with PyTorch's work and its events.
    stream = torch.cuda.Stream()
    dtypes = ["f16", "bf16"] if args.dtype == "both" else [args.dtype]
    seqlens = args.seqlen or (QUICK_SEQLENS if args.quick else ALL_SEQLENS)
    head_dims = args.head_dim or HEAD_DIMS
    rows, failed = [], False
    with torch.cuda.stream(stream), fa.Context(lib, "cuda", device=args.device,
                                               cuda_stream=stream.cuda_stream,
                                               log_level=fa.LOG_WARN) as ctx:
        gpu = torch.cuda.get_device_name(args.device)
        ours_gpu = ctx.device().name.decode()
        if ours_gpu != gpu:
            print(f"warning: flashattn's device is {ours_gpu}, PyTorch's {gpu}", file=sys.stderr)
        print(f"flashattn {fa.version(lib)} ({fa.find_library(args.lib)}) vs torch "
              f"{torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
              f"{torch.backends.cudnn.version()}) on {gpu}; check {'on' if check else 'off'}\n")
        print("TF/s of flashattn and of each SDPA kernel, then flashattn's TF/s over each; check:"
              " worst error ratio flashattn / SDPA baseline (limit 2 for O, 3 for gradients)")
        if args.variants:
            rows, failed = run_variants(ctx, args)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"flashattn": fa.version(lib), "torch": torch.__version__,
                               "device": gpu, "failed": failed, "variants": rows}, f, indent=1)
            return 1 if failed else 0
        if args.decode:
            rows, failed = run_decode(ctx, args, names)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"flashattn": fa.version(lib), "torch": torch.__version__,
                               "device": gpu, "sdpa": names, "failed": failed,
                               "decode": rows}, f, indent=1)
            return 1 if failed else 0
        if args.f32:
            points = [(1, 16, 4096, 128, False), (1, 32, 4096, 64, False),
                      (1, 8, 4096, 256, False), (1, 16, 4096, 128, True),
                      (1, 16, 16384, 128, False), (8, 16, 512, 128, False)]
            print(header(TARGET_SDPA))
            for B, H, S, D, causal in points:
                for row in run_point(ctx, args, "f32", B, H, S, D, causal, False, TARGET_SDPA,
                                     check):
                    rows.append(finish_row(row))
                    print_row(row, TARGET_SDPA)
                    failed |= row_failed(row)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump({"flashattn": fa.version(lib), "torch": torch.__version__,
                               "device": gpu, "sdpa": TARGET_SDPA, "failed": failed,
                               "f32": rows}, f, indent=1)
            return 1 if failed else 0
        print(header(names))
        points = [(dt, c, d, s) for dt in dtypes for c in (False, True) for d in head_dims
                  for s in seqlens]
        for i, (dt, causal, D, S) in enumerate(points, 1):
            print(f"[{i}/{len(points)}] {dt} seqlen {S} D {D}{' causal' if causal else ''}",
                  file=sys.stderr)
            for row in run_point(ctx, args, dt, TOKENS // S, HIDDEN // D, S, D, causal, True,
                                 names, check):
                rows.append(finish_row(row))
                print_row(row, names)
                failed |= row_failed(row)
            torch.cuda.empty_cache()

        print("\ntarget (forward, B=1 H=16 N=4096 D=128 f32; SDPA's flash and cuDNN have no f32):")
        print(header(TARGET_SDPA))
        target = [finish_row(r) for r in run_point(ctx, args, "f32", 1, 16, 4096, 128, False,
                                                   False, TARGET_SDPA, check)]
        for row in target:
            print_row(row, TARGET_SDPA)
            failed |= row_failed(row)

    checked = [r for r in rows + target if "check" in r]
    if checked:
        bad = sum(not r["check"]["pass"] for r in checked)
        print(f"\ncheck: {len(checked) - bad}/{len(checked)} rows pass"
              f"{'' if not bad else ' -- FAIL'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"flashattn": fa.version(lib), "torch": torch.__version__,
                       "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                       "device": gpu, "sdpa": names, "check": check, "failed": failed,
                       "rows": rows, "target": target}, f, indent=1)
    if args.csv:
        write_csv(args.csv, rows + target, names + [n for n in TARGET_SDPA if n not in names])
    if args.png:
        plot(args.png, rows, names)
    if failed:
        print("FAIL", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
