-- bench_lstm.lua — a 2-layer LSTM (input 256, hidden 256, batch 32, 100 steps), forward +
-- backward of sum(output^2) + sum(h_n): tide eager, tide.jit (the whole step traced, one plan)
-- and PyTorch 1.13 eager (bench/bench_lstm_torch.py through /usr/bin/python3, same threads), in
-- alternating slices so a machine's drift falls on all three; medians over the slices.
--
--   build/lua/tide bench/bench_lstm.lua [slices=5] [steps_per_slice=3]
--
-- Prints `name: value unit` lines; speedup = PyTorch's step time / tide's (target >= 1.2).
-- Threads: TIDE_NUM_THREADS (default: tide's), given to PyTorch as torch.set_num_threads.
local tide = require "tide"
local nn = require "tide.nn"

local slices = tonumber(arg and arg[1]) or 5
local steps = tonumber(arg and arg[2]) or 3
local threads = tide.get_num_threads()
local here = (arg and arg[0] or "bench/bench_lstm.lua"):match("(.*/)") or "./"
local T, B, I, H = 100, 32, 256, 256

tide.manual_seed(0)
local lstm = nn.LSTM(I, H, { num_layers = 2 })
local x = tide.randn(T, B, I)
local function step()
  for _, p in ipairs(lstm:parameters()) do p.grad = nil end
  local out, hc = lstm(x)
  local loss = (out * out):sum() + hc[1]:sum()
  loss:backward()
  return loss
end
local jitted = tide.jit(step, { dynamic = false })

local function median(v)
  local s = { table.unpack(v) }
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
end

-- The median step time (ms) of n steps of fn, each waited for (its loss read back).
local function time_steps(fn, n)
  local t = {}
  for i = 1, n do
    local t0 = tide.clock()
    fn():item()
    t[i] = (tide.clock() - t0) * 1000
  end
  return median(t)
end

local function torch_ms(n)
  local cmd = ("OMP_NUM_THREADS=%d /usr/bin/python3 %sbench_lstm_torch.py %d %d 1 2>&1")
    :format(threads, here, n, threads)
  local p = io.popen(cmd)
  if not p then return nil end
  local out = p:read("a")
  p:close()
  return tonumber(out:match("ms_per_step: ([%d%.]+)")), out:match("torch: (%S+)"),
         out:match("threads: (%d+)")
end

local t0 = tide.clock()
step():item() -- warm-up: caches, BLAS buffers
jitted():item() -- the trace and its compile
local compile_ms = (tide.clock() - t0) * 1000
local eager, jit, torch = {}, {}, {}
local torch_version, torch_threads
for s = 1, slices do
  eager[s] = time_steps(step, steps)
  jit[s] = time_steps(jitted, steps)
  torch[s], torch_version, torch_threads = torch_ms(steps)
  if not torch[s] then torch = nil break end
end

local me, mj = median(eager), median(jit)
print(("threads: %d"):format(threads))
print(("lstm_warmup_and_compile: %.0f ms (one eager step, then the first jit call)"):format(
  compile_ms))
print(("lstm_train_tide_eager: %.1f ms/step (median of %d slices x %d steps)"):format(me, slices,
  steps))
print(("lstm_train_tide_jit: %.1f ms/step (plans compiled: %d)"):format(mj,
  jitted:stats().compiles))
if torch then
  local mt = median(torch)
  print(("lstm_train_pytorch: %.1f ms/step (torch %s, %s threads, eager)"):format(mt,
    torch_version, torch_threads))
  for _, r in ipairs({ { "eager", me }, { "jit", mj } }) do
    local speedup = mt / r[2]
    print(("lstm_speedup_%s_vs_pytorch: %.2fx (target >= 1.2: %s)"):format(r[1], speedup,
      speedup >= 1.2 and "met" or "NOT met"))
  end
else
  print("lstm_train_pytorch: absent (/usr/bin/python3 cannot import torch)")
end
