# bench_embed_torch.py CHECKPOINT — PyTorch's batch-1 latency for the MLP of examples/embed on
# the same safetensors weights (read with the standard library: no safetensors package needed).
# Prints "N us", or exits non-zero when torch cannot be imported (bench_embed.sh prints absent).
import json, struct, sys, time

import torch

torch.set_num_threads(torch.get_num_threads())
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
w = {}
for name, info in header.items():
    if name == "__metadata__":
        continue
    a, b = info["data_offsets"]
    assert info["dtype"] == "F32"
    w[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).reshape(info["shape"])
model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10)).eval()
with torch.no_grad():
    for i, key in ((0, "1"), (2, "3"), (4, "5")):
        model[i].weight.copy_(w[key + ".weight"])
        model[i].bias.copy_(w[key + ".bias"])
    x = torch.randn(2000, 784)
    for i in range(200):
        model(x[i:i + 1]).argmax(1)
    t0 = time.perf_counter()
    for i in range(2000):
        model(x[i:i + 1]).argmax(1)
    dt = time.perf_counter() - t0
print("%.1f us" % (dt / 2000 * 1e6))
