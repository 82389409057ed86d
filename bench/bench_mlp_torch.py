"""The PyTorch side of bench_mlp.lua: the same MLP 784-512-256-10, ReLU, cross-entropy, SGD with
momentum 0.9, random data; prints "steps_per_s N". Usage: bench_mlp_torch.py batch threads secs"""
import sys
import time

import torch

batch, threads, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(batch, 784)
y = torch.randint(0, 10, (batch,))


def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


for _ in range(5):
    step().item()
n, t0 = 0, time.perf_counter()
while True:
    step().item()
    n += 1
    if time.perf_counter() - t0 >= seconds:
        break
print("steps_per_s %.3f" % (n / (time.perf_counter() - t0)))
