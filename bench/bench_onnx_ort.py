"""bench_onnx_ort.py — ONNX Runtime's side of bench_onnx.sh: the same models, inputs, batch
sizes, thread count, slices and output lines as bench_onnx.c.

  python bench_onnx_ort.py [--threads N] [--slices S] [--seconds T] [--batches 1,64] model.onnx...

Run in the virtual environment bench_onnx.sh makes (onnxruntime, numpy from PyPI); never needed
by the tests. The session is ONNX Runtime's default CPU one with intra_op_num_threads = N,
inter_op_num_threads = 1, sequential execution, all graph optimizations. Each timed call is
session.run on a numpy input already made, as a C caller would hand it a buffer. Figures by wall
time and (cpu_ lines) by the process's CPU time per call, as bench_onnx.c prints them.
"""
import argparse
import os
import time

import numpy as np
import onnxruntime as ort


def input_values(shape):
    """Element i: the multiplicative hash of i that bench_onnx.c's input_value computes."""
    i = np.arange(int(np.prod(shape)), dtype=np.uint64)
    h = (i * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return ((h >> np.uint64(8)).astype(np.float32) / np.float32(1 << 24) - np.float32(0.5)) \
        .reshape(shape)


def make_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


class Case:
    def __init__(self, path, batch, threads):
        self.name = os.path.basename(path).replace(".onnx", "")
        self.batch = batch
        self.session = make_session(path, threads)
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        shape = [batch if not isinstance(d, int) else d for d in inp.shape]
        self.feed = {self.input_name: input_values(shape)}
        self.slices, self.cpu_slices = [], []

    def run_once(self):
        t0 = time.perf_counter()
        out = self.session.run(None, self.feed)
        return time.perf_counter() - t0, out

    def slice(self, seconds):
        total, runs, cpu0 = 0.0, 0, time.process_time()
        while total < seconds or runs < 2:
            total += self.run_once()[0]
            runs += 1
        self.slices.append(total / runs)
        self.cpu_slices.append((time.process_time() - cpu0) / runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--slices", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.2)
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    print("# onnxruntime %s, providers CPUExecutionProvider, graph optimization ORT_ENABLE_ALL, "
          "intra_op %d threads, inter_op 1, sequential; medians of %d slices (>= %.2f s each) "
          "taken round all cases in turn" % (ort.__version__, args.threads, args.slices,
                                             args.seconds))
    cases = []
    for path in args.models:
        for b in batches:
            c = Case(path, b, args.threads)
            _, out = c.run_once()
            y = out[0].astype(np.float64).ravel()
            w = input_values(y.shape).astype(np.float64)
            print("# %s batch %d: output checksum %.6g" % (c.name, b, float(np.dot(y, w))))
            cases.append(c)
    for _ in range(args.slices):
        for c in cases:
            c.slice(args.seconds)
    for c in cases:
        for kind, v in (("", c.slices), ("cpu_", c.cpu_slices)):
            t = float(np.median(v))
            if c.batch == 1:
                print("%s_b1_t%d_%slatency: %.1f us" % (c.name, args.threads, kind, t * 1e6))
            else:
                print("%s_b%d_t%d_%sthroughput: %.0f samples/s" % (c.name, c.batch, args.threads,
                                                                   kind, c.batch / t))


if __name__ == "__main__":
    main()
