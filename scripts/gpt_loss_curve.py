#!/usr/bin/python3
"""PyTorch's side of the GPT loss-curve comparison (issue 21, Deliver 5): trains
scripts/torch_gpt.py's GPT for a number of steps and writes everything tide needs to replay the
same run, seed-independently, into one safetensors file:

    /usr/bin/python3 scripts/gpt_loss_curve.py OUT.safetensors [--preset example|small]
                     [--steps 200] [--threads 2]
    tide scripts/gpt_loss_curve.lua OUT.safetensors          # replays it, compares the curves

The file holds the initial weights (init.<PyTorch name>, nanoGPT's init), the batches (batches:
int64 [steps, B, T + 1] of byte tokens, 0-based; x is the first T, y the last T), the learning
rate of each step, and PyTorch's loss at each step (losses, float64). The recipe is the GPT
example's: AdamW betas (0.9, 0.95), weight decay 0.1 on the 2-D weights only, lr 1e-3 with 100
warmup steps and cosine decay to 1e-4 over 1000 planned steps, gradient clipping at 1.0, batch 8
x 128. The text is the Debian package fortunes (/usr/share/games/fortunes), the regular files
(no .dat, no .u8 links) concatenated in sorted name order; the windows are drawn from its first
90% with torch's generator seeded 1337.
"""
import argparse
import math
import os
import sys

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_torch_fixtures import save_safetensors  # noqa: E402
from torch_gpt import GPT  # noqa: E402

PRESETS = {
    "example": dict(vocab_size=256, block_size=256, n_layer=6, n_head=6, n_embd=384),
    "small": dict(vocab_size=256, block_size=64, n_layer=2, n_head=4, n_embd=64),
}
SEQ = {"example": (8, 128), "small": (8, 64)}
LR, MIN_LR, WARMUP, PLANNED, WD, CLIP = 1e-3, 1e-4, 100, 1000, 0.1, 1.0


def corpus(root="/usr/share/games/fortunes"):
    names = sorted(n for n in os.listdir(root)
                   if not n.endswith(".dat") and not os.path.islink(os.path.join(root, n))
                   and os.path.isfile(os.path.join(root, n)))
    if not names:
        sys.exit("no fortune files in %s (scripts/setup.sh installs the package)" % root)
    data = b"".join(open(os.path.join(root, n), "rb").read() for n in names)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def lr_at(step):
    """Linear warmup from LR / WARMUP to LR, then cosine to MIN_LR at PLANNED steps (0-based)."""
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = min(1.0, (step - WARMUP) / (PLANNED - WARMUP))
    return MIN_LR + 0.5 * (LR - MIN_LR) * (1 + math.cos(math.pi * progress))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--preset", default="example", choices=sorted(PRESETS))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = PRESETS[args.preset]
    B, T = SEQ[args.preset]
    text = corpus()
    train = text[: len(text) - len(text) // 10]
    gen = torch.Generator().manual_seed(1337)
    starts = torch.randint(0, len(train) - T - 1, (args.steps, B), generator=gen)
    batches = torch.stack([torch.stack([train[s:s + T + 1] for s in row]) for row in starts])

    torch.manual_seed(0)
    model = GPT(**cfg)
    model.nanogpt_init()
    init = {"init." + k: v.clone() for k, v in model.state_dict().items()}
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    lrs, losses = [], []
    for step in range(args.steps):
        lr = lr_at(step)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batches[step, :, :T], batches[step, :, 1:]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).view(-1, cfg["vocab_size"]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        lrs.append(lr)
        losses.append(loss.item())
        if step % 20 == 0 or step == args.steps - 1:
            print("step %d loss %.4f lr %.2e" % (step + 1, loss.item(), lr), flush=True)
    out = dict(init)
    out.update(batches=batches, lrs=torch.tensor(lrs, dtype=torch.float64),
               losses=torch.tensor(losses, dtype=torch.float64))
    meta = {"torch": torch.__version__, "preset": args.preset}
    meta.update({k: str(v) for k, v in cfg.items()})
    save_safetensors(args.out, out, meta)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
