"""A small GPT-style decoder (pre-norm, causal self-attention) for the reference trainer."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from training.config import ModelConfig


class Block(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.n_heads = c.n_heads
        self.head_dim = c.d_model // c.n_heads
        self.ln1 = nn.LayerNorm(c.d_model)
        # Separate query, key and value projections, so that tensor parallelism can split each column-wise by
        # heads (a column split of one fused [3d, d] weight would hand a rank queries and keys of other heads).
        # Initialised from one fused layer's draw: the same initial values as the fused projection they replace,
        # and (built on the meta device, so drawing nothing) the same random stream for every later layer.
        fused = nn.Linear(c.d_model, 3 * c.d_model)
        self.q, self.k, self.v = (nn.Linear(c.d_model, c.d_model, device="meta").to_empty(device=fused.weight.device)
                                  for _ in range(3))
        with torch.no_grad():
            for i, lin in enumerate((self.q, self.k, self.v)):
                lin.weight.copy_(fused.weight[i * c.d_model:(i + 1) * c.d_model])
                lin.bias.copy_(fused.bias[i * c.d_model:(i + 1) * c.d_model])
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.mlp = nn.Sequential(nn.Linear(c.d_model, 4 * c.d_model), nn.GELU(), nn.Linear(4 * c.d_model, c.d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h = self.ln1(x)
        # -1 heads: all of them, or this rank's under tensor parallelism (q, k, v hold its heads' columns)
        q, k, v = (lin(h).view(b, t, -1, self.head_dim).transpose(1, 2) for lin in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, -1))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.seq_len, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)

    def tp_plan(self) -> dict:
        """The tensor-parallel plan (``torch.distributed.tensor.parallel``) of each block and of the root: attention
        split by heads (q, k, v column-wise, the output projection row-wise), the MLP column- then row-wise, the
        output head column-wise with its logits gathered. Norms and embeddings stay replicated over the TP ranks."""
        from torch.distributed.tensor import Replicate
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

        block = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "proj": RowwiseParallel(),
                 "mlp.0": ColwiseParallel(), "mlp.2": RowwiseParallel()}
        return {"block": block, "root": {"head": ColwiseParallel(output_layouts=Replicate())}}

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))

    def loss_sum(self, batch: torch.Tensor) -> torch.Tensor:
        """Sum over samples of each sample's mean next-token loss (batch: [b, seq_len + 1])."""
        logits = self(batch[:, :-1])
        per_tok = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="none")
        return per_tok.view(batch.shape[0], -1).mean(dim=1).sum()
