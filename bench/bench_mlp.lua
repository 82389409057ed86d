-- bench_mlp.lua — training steps/s of the MLP 784-512-256-10 (ReLU, cross-entropy, SGD with
-- momentum 0.9) on random data, batch 128 and 32: eager tide, and PyTorch in the same run when
-- python3 can import torch (bench/bench_mlp_torch.py; "absent" otherwise). Both get the same
-- thread count (TIDE_NUM_THREADS / OMP_NUM_THREADS / OPENBLAS_NUM_THREADS, default: tide's).
--
--   build/lua/tide bench/bench_mlp.lua [seconds_per_case]
--
-- Prints `name: value unit` lines; ratio = tide step time / PyTorch step time (< 1: tide faster).
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"
local optim = require "tide.optim"

local seconds = tonumber(arg and arg[1]) or 3
local threads = tide.get_num_threads()
local here = (arg and arg[0] or "bench/bench_mlp.lua"):match("(.*/)") or "./"

local function tide_steps_per_s(batch)
  tide.manual_seed(0)
  local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                              nn.Linear(256, 10))
  local opt = optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
  local x = tide.randn(batch, 784)
  local y = tide.randint(1, 11, { batch })
  local function step()
    opt:zero_grad()
    local loss = F.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end
  for _ = 1, 5 do step():item() end -- warm-up: caches, BLAS threads
  local n, t0 = 0, tide.clock()
  repeat
    step():item()
    n = n + 1
  until tide.clock() - t0 >= seconds
  return n / (tide.clock() - t0)
end

-- The first Python that imports torch: the PATH's, else Debian's own (python3-torch is built for
-- /usr/bin/python3, which a PATH with another Python in front hides).
local function torch_python()
  for _, py in ipairs({ "python3", "/usr/bin/python3" }) do
    if os.execute(py .. " -c 'import torch' >/dev/null 2>&1") then return py end
  end
end

local function torch_steps_per_s(batch)
  local py = torch_python()
  if not py then return nil end
  local cmd = ("OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d MKL_NUM_THREADS=%d %s %s %d %d %g 2>/dev/null")
    :format(threads, threads, threads, py, here .. "bench_mlp_torch.py", batch, threads, seconds)
  local p = io.popen(cmd)
  if not p then return nil end
  local out = p:read("a")
  p:close()
  return tonumber(out:match("steps_per_s ([%d%.eE+-]+)"))
end

print(("threads: %d"):format(threads))
for _, batch in ipairs({ 128, 32 }) do
  local t = tide_steps_per_s(batch)
  print(("mlp_train_b%d_tide_eager: %.1f steps/s (%.3f ms/step)"):format(batch, t, 1000 / t))
  local r = torch_steps_per_s(batch)
  if r then
    print(("mlp_train_b%d_pytorch: %.1f steps/s (%.3f ms/step)"):format(batch, r, 1000 / r))
    print(("mlp_train_b%d_ratio: %.2f (tide step time / pytorch step time; target <= 1.2: %s)")
      :format(batch, r / t, r / t <= 1.2 and "met" or "NOT met"))
  else
    print(("mlp_train_b%d_pytorch: absent (python3 cannot import torch)"):format(batch))
  end
end
