"""PLACEHOLDER (minimal Galerkin attention) until the real layer lands; same signature."""
from __future__ import annotations

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d_model, n_heads, head_dim=None, mixer="galerkin", norm="column",
                 pos_dim=0, dropout=0.0, **mixer_options):
        super().__init__()
        self.h, self.dh = n_heads, head_dim or d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * self.h * self.dh)
        self.out = nn.Linear(self.h * (self.dh + pos_dim), d_model)
        self.pos_dim = pos_dim

    def forward(self, x, pos=None, weights=None):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        k = torch.nn.functional.layer_norm(k, (self.dh,))
        v = torch.nn.functional.layer_norm(v, (self.dh,))
        if self.pos_dim:
            p = pos.unsqueeze(1).expand(b, self.h, n, self.pos_dim)
            q, k, v = (torch.cat([t, p], -1) for t in (q, k, v))
        z = q @ (k.transpose(-2, -1) @ v) / n
        return self.out(z.transpose(1, 2).reshape(b, n, -1))
