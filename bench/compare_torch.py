#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention over the grid of `flashattn bench`, in the same table.

Run it on a GPU machine with PyTorch (CUDA or ROCm):

    python3 bench/compare_torch.py                      # full grid, f16
    python3 bench/compare_torch.py --quick --dtype bf16
    flashattn bench --csv ours.csv && python3 bench/compare_torch.py --ours ours.csv

With --ours (the CSV or JSON that `flashattn bench` writes) each row also shows flashattn's time
and the ratio torch_ms / ours_ms (above 1: flashattn is faster). The grid is FlashAttention's own
benchmark: 16k tokens per batch (batch = 16384 / seqlen), hidden 2048 (heads = 2048 / head dim),
seqlen 512..16k, head dim 64 and 128, causal off and on, forward and backward, plus the target
row (forward, B=1 H=16 N=4096 D=128 f32). FLOPs are counted the same way as flashattn's:
4*B*H*N*N*D per forward, half when causal, 2.5x for backward.
"""
import argparse
import csv
import json
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("compare_torch.py needs PyTorch (pip install torch)")

TOKENS, HIDDEN = 16384, 2048
ALL_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
QUICK_SEQLENS = [512, 2048]
HEAD_DIMS = [64, 128]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def flops(batch, heads, seqlen, head_dim, causal, backward):
    f = 4.0 * batch * heads * seqlen * seqlen * head_dim
    if causal:
        f *= 0.5
    return 2.5 * f if backward else f


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn, device, warmup, repeat, max_total_s=1.0):
    """Median seconds of fn() after warm-up; each run ends with a device synchronize."""
    for _ in range(warmup):
        fn()
    sync(device)
    samples = []
    while len(samples) < repeat and sum(samples) < max_total_s:
        t0 = time.perf_counter()
        fn()
        sync(device)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def sdpa_context(name):
    """A context manager limiting SDPA to one kernel, or a no-op for 'auto'."""
    import contextlib

    if name == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kinds = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "math": SDPBackend.MATH, "cudnn": SDPBackend.CUDNN_ATTENTION}
    return sdpa_kernel([kinds[name]])


def bench_point(batch, heads, seqlen, head_dim, causal, dtype, device, args, with_backward):
    """[forward_ms, backward_ms or None]; None where torch refuses or runs out of memory."""
    shape = (batch, heads, seqlen, head_dim)
    q, k, v = (torch.randn(shape, dtype=dtype, device=device, requires_grad=with_backward)
               for _ in range(3))
    results = []
    try:
        with sdpa_context(args.sdpa):  # grad enabled: SDPA also keeps the LSE, as ours writes it
            fwd = time_call(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                            device, args.warmup, args.repeat)
        results.append(fwd * 1e3)
    except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
        print(f"  forward failed: {str(e).splitlines()[0]}", file=sys.stderr)
        results.append(None)
    if with_backward:
        try:
            with sdpa_context(args.sdpa):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                d_out = torch.randn_like(out)

                def backward():
                    q.grad = k.grad = v.grad = None
                    out.backward(d_out, retain_graph=True)

                bwd = time_call(backward, device, args.warmup, args.repeat)
            results.append(bwd * 1e3)
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
            print(f"  backward failed: {str(e).splitlines()[0]}", file=sys.stderr)
            results.append(None)
    del q, k, v
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return results


def load_ours(path):
    """{(seqlen, head_dim, causal, dir, batch, heads): ms} from flashattn bench's CSV or JSON."""
    ours = {}
    with open(path) as f:
        if path.endswith(".json"):
            rows = json.load(f)["rows"]
            for r in rows:
                if r.get("ms") is not None:
                    key = (r["seqlen"], r["head_dim"], bool(r["causal"]), r["direction"],
                           r["batch"], r["heads"])
                    ours[key] = float(r["ms"])
        else:
            for r in csv.DictReader(f):
                if r["ms"]:
                    key = (int(r["seqlen"]), int(r["head_dim"]), r["causal"] == "1",
                           r["direction"], int(r["batch"]), int(r["heads"]))
                    ours[key] = float(r["ms"])
    return ours


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="seqlen 512 and 2k only")
    ap.add_argument("--dtype", choices=DTYPES, default="f16")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--sdpa", choices=["auto", "flash", "efficient", "math", "cudnn"],
                    default="auto", help="limit SDPA to one kernel (default: its own choice)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10, help="at most N timed runs (stop at 1 s)")
    ap.add_argument("--ours", help="flashattn bench --csv/--json output, for ratios")
    ap.add_argument("--csv", help="also write torch's results as CSV")
    args = ap.parse_args()

    device = torch.device(args.device)
    dtype = DTYPES[args.dtype]
    ours = load_ours(args.ours) if args.ours else {}
    seqlens = QUICK_SEQLENS if args.quick else ALL_SEQLENS
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__} SDPA ({args.sdpa}): {name}, {args.dtype}\n")

    header = f"{'seqlen':>7} {'D':>4} {'batch':>5} {'heads':>5} {'causal':>6} {'dir':>4} " \
             f"{'ms':>11} {'TFLOP/s':>9}"
    if ours:
        header += f" {'ours ms':>11} {'torch/ours':>10}"
    print(header)
    rows = []

    def emit(seqlen, head_dim, batch, heads, causal, direction, ms, row_dtype):
        line = f"{seqlen:7d} {head_dim:4d} {batch:5d} {heads:5d} {'yes' if causal else 'no':>6} " \
               f"{direction:>4} "
        tflops = None
        if ms is None:
            line += f"{'-':>11} {'-':>9}"
        else:
            tflops = flops(batch, heads, seqlen, head_dim, causal, direction == "bwd") / ms * 1e-9
            line += f"{ms:11.3f} {tflops:9.4f}"
        if ours:
            mine = ours.get((seqlen, head_dim, causal, direction, batch, heads))
            if mine is not None and ms is not None:
                line += f" {mine:11.3f} {ms / mine:10.2f}"
            else:
                line += f" {'-':>11} {'-':>10}"
        print(line, flush=True)
        rows.append(dict(seqlen=seqlen, head_dim=head_dim, batch=batch, heads=heads,
                         causal=int(causal), direction=direction, dtype=row_dtype,
                         ms="" if ms is None else f"{ms:.6g}",
                         tflops="" if tflops is None else f"{tflops:.6g}"))

    points = [(c, d, s) for c in (False, True) for d in HEAD_DIMS for s in seqlens]
    for i, (causal, head_dim, seqlen) in enumerate(points, 1):
        batch, heads = TOKENS // seqlen, HIDDEN // head_dim
        print(f"[{i}/{len(points)}] seqlen {seqlen}, head dim {head_dim}"
              f"{', causal' if causal else ''}", file=sys.stderr)
        fwd, bwd = bench_point(batch, heads, seqlen, head_dim, causal, dtype, device, args, True)
        emit(seqlen, head_dim, batch, heads, causal, "fwd", fwd, args.dtype)
        emit(seqlen, head_dim, batch, heads, causal, "bwd", bwd, args.dtype)

    print("\ntarget (forward, B=1 H=16 N=4096 D=128 f32):")
    (fwd,) = bench_point(1, 16, 4096, 128, False, torch.float32, device, args, False)
    emit(4096, 128, 1, 16, False, "fwd", fwd, "f32")

    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
