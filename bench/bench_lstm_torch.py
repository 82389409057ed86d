#!/usr/bin/python3
"""bench_lstm_torch.py — PyTorch's side of bench/bench_lstm.lua: a 2-layer LSTM (hidden 256,
input 256, batch 32, 100 steps), forward + backward of sum(output^2) + sum(h_n), eager.

  /usr/bin/python3 bench/bench_lstm_torch.py STEPS THREADS [WARMUP]

Prints `torch: VERSION`, `threads: N`, `ms_per_step: MEDIAN` (wall clock, median over STEPS timed
steps) and `cpu_ms_per_step: MEDIAN` (the process's CPU time).
"""
import statistics
import sys
import time

import torch


def main():
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    T, B, I, H = 100, 32, 256, 256
    lstm = torch.nn.LSTM(I, H, num_layers=2)
    x = torch.randn(T, B, I)

    def step():
        lstm.zero_grad(set_to_none=True)
        out, (h, c) = lstm(x)
        loss = (out * out).sum() + h.sum()
        loss.backward()
        return loss.item()

    for _ in range(warmup):
        step()
    times, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print("torch:", torch.__version__)
    print("threads:", torch.get_num_threads())
    print("ms_per_step: %.4f" % (1000 * statistics.median(times)))
    print("cpu_ms_per_step: %.4f" % (1000 * statistics.median(cpu)))


if __name__ == "__main__":
    main()
