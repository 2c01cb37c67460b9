# SPDX-License-Identifier: MIT
"""A tiny PyTorch training loop whose attention is flashattn's operator: one causal
self-attention block learns to copy its input shifted by one token, on the CPU (or on CUDA with
--device cuda). Before training, one step's loss and gradients are checked against the same
model with torch.nn.functional.scaled_dot_product_attention.

    python examples/train_step.py [--steps 40] [--device cpu]
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

from flashattn.torch import attention


class Block(nn.Module):
    def __init__(self, dim=64, heads=4, kv_heads=2, use_flashattn=True):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.qkv = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim)
        self.proj = nn.Linear(dim, dim)
        self.use_flashattn = use_flashattn

    def forward(self, x):
        b, s, _ = x.shape
        d, h, hkv = self.head_dim, self.heads, self.kv_heads
        # (B, S, H, D) views of the one projection, as FlashAttention's layout takes them
        q, k, v = self.qkv(x).view(b, s, h + 2 * hkv, d).split([h, hkv, hkv], dim=2)
        if self.use_flashattn:
            y = attention(q, k, v, causal=True, layout="bshd")
        else:
            y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True,
                                               enable_gqa=True).transpose(1, 2)
        return x + self.proj(y.reshape(b, s, h * d))


def batch(generator, device, b=8, s=32, dim=64):
    x = torch.randn(b, s, dim, generator=generator).to(device)
    target = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)  # the previous token
    return x, target


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    model = Block().to(args.device)

    # one step against SDPA: same weights, same batch
    reference = Block(use_flashattn=False).to(args.device)
    reference.load_state_dict(model.state_dict())
    x, target = batch(generator, args.device)
    losses = []
    for m in (model, reference):
        loss = F.mse_loss(m(x), target)
        loss.backward()
        losses.append(loss.item())
    worst = max((p.grad - r.grad).abs().max().item()
                for p, r in zip(model.parameters(), reference.parameters()))
    print(f"loss {losses[0]:.6f} (SDPA {losses[1]:.6f}), largest gradient difference {worst:.2e}")
    if abs(losses[0] - losses[1]) > 1e-5 or worst > 1e-4:
        raise SystemExit("flashattn and SDPA disagree")

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(args.steps):
        x, target = batch(generator, args.device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}")
    if loss.item() >= losses[0]:
        raise SystemExit("the loss did not go down")


if __name__ == "__main__":
    main()
