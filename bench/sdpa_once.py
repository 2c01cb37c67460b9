# SPDX-License-Identifier: MIT
"""Runs PyTorch's scaled_dot_product_attention a few times on one shape and one SDPA backend,
untimed: the process to put under a profiler (bench/ncu_compare.sh).

usage: sdpa_once.py B H N D CAUSAL BACKWARD cudnn|flash|efficient [f16|bf16] [runs]"""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def main(argv):
    if len(argv) < 7:
        sys.exit(__doc__)
    b, h, n, d, causal, backward = (int(x) for x in argv[:6])
    dtype = torch.bfloat16 if len(argv) > 7 and argv[7] == "bf16" else torch.float16
    runs = int(argv[8]) if len(argv) > 8 else 4
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype, requires_grad=bool(backward))
               for _ in range(3))
    with sdpa_kernel(BACKENDS[argv[6]]):
        for _ in range(runs):
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
            if backward:
                o.backward(torch.ones_like(o))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
