#!/usr/bin/env python3
"""PyTorch DDP on the GPT of osdp's CPU testbed: the yardstick for osdp's runtime overhead.

The same model as validate/reference_gpt.cpp (token + position embedding; per layer a pre-norm
causal self-attention and a tanh-GELU MLP, each with a residual; a final norm and an unbiased
head), fp32, Adam, on local ranks over Gloo, one compute thread per rank (as osdp-runtime runs
its ranks). DDP buckets gradients (25 MB by default) and all-reduces them while backward runs.

Prints one JSON object: {"iteration_times_s": [...], ...}, per measured iteration the slowest
rank's wall time of zero_grad + forward + backward + optimizer step (the batch is made before
the clock starts), as osdp's runtime reports its own.

Run by bench/ddp_bench; by hand: python3 bench/ddp_reference.py --layers 4 --hidden 256 ...
"""

import argparse
import json
import math
import os
import sys
import tempfile
import time

# One compute thread per rank, as osdp-runtime runs its ranks: the BLAS behind Debian's torch
# starts its own threads unless told before it loads (torch.set_num_threads covers OpenMP only).
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import torch  # noqa: E402 (after the thread settings)
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-5)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attention_proj = nn.Linear(hidden, hidden)
        self.mlp_norm = nn.LayerNorm(hidden, eps=1e-5)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(self.attention_norm(x)).split(h, -1)

        def heads_of(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        scores = heads_of(q) @ heads_of(k).transpose(-2, -1) / math.sqrt(d)
        scores = scores.masked_fill(mask, float("-inf"))
        y = (scores.softmax(-1) @ heads_of(v)).transpose(1, 2).reshape(b, s, h)
        x = x + self.attention_proj(y)
        return x + self.mlp_proj(F.gelu(self.fc(self.mlp_norm(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, hidden, heads, sequence, vocabulary):
        super().__init__()
        self.token = nn.Embedding(vocabulary, hidden)
        self.position = nn.Parameter(torch.randn(sequence, hidden) * 0.02)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.head_norm = nn.LayerNorm(hidden, eps=1e-5)
        self.head = nn.Linear(hidden, vocabulary, bias=False)
        # A plain attribute, not a buffer: DDP broadcasts buffers, and Gloo has no bool type.
        self.mask = torch.ones(sequence, sequence, dtype=torch.bool).triu(1)

    def forward(self, inputs, targets):
        x = self.token(inputs) + self.position.unsqueeze(0)
        for block in self.blocks:
            x = block(x, self.mask)
        logits = self.head(self.head_norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def run_rank(rank, args, store_path, result_path):
    torch.set_num_threads(1)
    store = dist.FileStore(store_path, args.ranks)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=args.ranks)
    torch.manual_seed(args.seed)
    model = Gpt(args.layers, args.hidden, args.heads, args.sequence, args.vocabulary)
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)
    times_s = []
    for step in range(args.warmup + args.iterations):
        tokens = torch.randint(0, args.vocabulary, (args.batch, args.sequence + 1),
                               generator=generator)
        inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = ddp(inputs, targets)
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            times_s.append(elapsed)
    # Per iteration the slowest rank, as osdp's runtime reports.
    mine = torch.tensor(times_s, dtype=torch.float64)
    gathered = [torch.zeros_like(mine) for _ in range(args.ranks)]
    dist.all_gather(gathered, mine)
    if rank == 0:
        slowest = torch.stack(gathered).max(0).values.tolist()
        with open(result_path, "w") as result:
            json.dump({"iteration_times_s": slowest, "loss": loss.item(),
                       "bucket_cap_mb": args.bucket_mb, "torch": torch.__version__}, result)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("sequence", 128),
                          ("vocabulary", 2048), ("batch", 2), ("ranks", 2), ("warmup", 2),
                          ("iterations", 20), ("seed", 1)]:
        parser.add_argument("--" + name, type=int, default=default)
    parser.add_argument("--bucket-mb", type=float, default=25.0)
    args = parser.parse_args()
    if args.hidden % args.heads != 0 or min(vars(args).values()) <= 0:
        print("ddp_reference.py: every size must be positive and hidden a multiple of heads",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="osdp-ddp-") as directory:
        store_path = os.path.join(directory, "store")
        result_path = os.path.join(directory, "result.json")
        mp.spawn(run_rank, args=(args, store_path, result_path), nprocs=args.ranks, join=True)
        with open(result_path) as result:
            print(result.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
