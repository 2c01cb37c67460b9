#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Index values out of range on a decoding call, on one backend: a block_table entry outside
[0, num_pages) and a seqlens_k value outside [0, Sk] must each come back as ERROR_OUT_OF_BOUNDS,
either from the call itself (backends that read the indices back first) or from the next
fa_context_synchronize (CUDA, whose kernels clamp and mark them); then a valid call and its
synchronize must succeed (the mark cleared). Needs no PyTorch: the library's own buffers.

    python3 bench/index_errors.py --backend cuda [--lib PATH]

Prints one line per check and 'N passed, N failed'; exit status 1 when one failed.
"""
import argparse
import ctypes
import random
import struct
import sys

import flashattn_ctypes as fa



def f16_bytes(values):
    return b"".join(struct.pack("<e", x) for x in values)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--lib")
    args = ap.parse_args()
    lib = fa.load(args.lib)
    ctx = fa.Context(lib, args.backend)
    B, Hq, Hkv, D, page, pages_per_seq = 2, 8, 2, 64, 16, 4
    num_pages, sk = B * pages_per_seq, pages_per_seq * page
    rnd = random.Random(1)
    q = ctx.buffer(B * Hq * D * 2, f16_bytes(rnd.uniform(-1, 1) for _ in range(B * Hq * D)))
    kv_elems = num_pages * page * Hkv * D
    k = ctx.buffer(kv_elems * 2, f16_bytes(rnd.uniform(-1, 1) for _ in range(kv_elems)))
    v = ctx.buffer(kv_elems * 2, f16_bytes(rnd.uniform(-1, 1) for _ in range(kv_elems)))
    o = ctx.buffer(B * Hq * D * 2)
    table = ctx.buffer(B * pages_per_seq * 4)
    lens = ctx.buffer(B * 4)
    tq = fa.tensor(q, fa.DTYPE_F16, (B, 1, Hq, D), (Hq * D, Hq * D, D, 1))
    pstride = (page * Hkv * D, Hkv * D, D, 1)
    tk = fa.tensor(k, fa.DTYPE_F16, (num_pages, page, Hkv, D), pstride)
    tv = fa.tensor(v, fa.DTYPE_F16, (num_pages, page, Hkv, D), pstride)
    to = fa.tensor(o, fa.DTYPE_F16, (B, 1, Hq, D), (Hq * D, Hq * D, D, 1))
    ttable = fa.tensor(table, fa.DTYPE_I32, (B, pages_per_seq, 1, 1), (pages_per_seq, 1, 1, 1))
    tlens = fa.tensor(lens, fa.DTYPE_I32, (B, 1, 1, 1), (1, 1, 1, 1))
    good = list(range(num_pages))
    passed = failed = 0

    def attempt(entries, seqlens):
        """The status name of the call, or of the synchronize after it, and where it came."""
        table.write(struct.pack(f"<{len(entries)}i", *entries))
        desc = fa.AttentionDesc(scale=0.0, causal=False)
        desc.block_table = ctypes.cast(ctypes.pointer(ttable), ctypes.c_void_p)
        if seqlens is not None:
            lens.write(struct.pack(f"<{B}i", *seqlens))
            desc.seqlens_k = ctypes.cast(ctypes.pointer(tlens), ctypes.c_void_p)
        try:
            ctx.forward(desc, tq, tk, tv, to)
        except fa.FaError as e:
            return e.name, "call", str(e)
        try:
            ctx.synchronize()
        except fa.FaError as e:
            return e.name, "synchronize", str(e)
        return "OK", "", ""

    bad_entry = good[:]
    bad_entry[5] = num_pages + 7  # sequence 1's second page
    bad_length = [sk, sk + 1]
    unread = good[:]
    unread[7] = -3  # sequence 1's last page, past its 40 keys
    cases = [("valid table", good, None, "OK"),
             ("entry out of range", bad_entry, None, "ERROR_OUT_OF_BOUNDS"),
             ("valid table again", good, None, "OK"),
             ("length out of range", good, bad_length, "ERROR_OUT_OF_BOUNDS"),
             ("valid lengths", good, [sk, 40], "OK"),
             ("bad entry past the length (never read)", unread, [sk, 40], "OK")]
    for name, entries, seqlens, want in cases:
        got, where, detail = attempt(entries, seqlens)
        ok = got == want
        passed += ok
        failed += not ok
        print(f"{'pass' if ok else 'FAIL'}  {name}: {got}{' from ' + where if where else ''}"
              f"{(': ' + detail) if detail and not ok else ''}")
    print(f"{passed} passed, {failed} failed")
    ctx.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
