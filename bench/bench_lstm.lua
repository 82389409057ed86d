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

-- The median step times (ms) of n steps of fn, each waited for (its loss read back): wall
-- clock, and this process's CPU time (os.clock), which on a shared machine leaves out the time
-- other processes held the cores; with one thread it is the fairer figure there.
local function time_steps(fn, n)
  local wall, cpu = {}, {}
  for i = 1, n do
    local t0, c0 = tide.clock(), os.clock()
    fn():item()
    wall[i], cpu[i] = (tide.clock() - t0) * 1000, (os.clock() - c0) * 1000
  end
  return median(wall), median(cpu)
end

local function torch_ms(n)
  local cmd = ("OMP_NUM_THREADS=%d /usr/bin/python3 %sbench_lstm_torch.py %d %d 1 2>&1")
    :format(threads, here, n, threads)
  local p = io.popen(cmd)
  if not p then return nil end
  local out = p:read("a")
  p:close()
  return tonumber(out:match("%f[%w_]ms_per_step: ([%d%.]+)")),
         tonumber(out:match("cpu_ms_per_step: ([%d%.]+)")),
         out:match("torch: (%S+)"), out:match("threads: (%d+)")
end

local t0 = tide.clock()
step():item() -- warm-up: caches, BLAS buffers
jitted():item() -- the trace and its compile
local compile_ms = (tide.clock() - t0) * 1000
local eager, jit, torch = { wall = {}, cpu = {} }, { wall = {}, cpu = {} }, { wall = {}, cpu = {} }
local torch_version, torch_threads, have_torch = nil, nil, true
for s = 1, slices do
  eager.wall[s], eager.cpu[s] = time_steps(step, steps)
  jit.wall[s], jit.cpu[s] = time_steps(jitted, steps)
  if have_torch then
    torch.wall[s], torch.cpu[s], torch_version, torch_threads = torch_ms(steps)
    have_torch = torch.wall[s] ~= nil
  end
end

print(("threads: %d"):format(threads))
print(("lstm_warmup_and_compile: %.0f ms (one eager step, then the first jit call)"):format(
  compile_ms))
print(("lstm_jit_plans: %d"):format(jitted:stats().compiles))
if have_torch then
  print(("pytorch: torch %s, %s threads, eager"):format(torch_version, torch_threads))
else
  print("lstm_train_pytorch: absent (/usr/bin/python3 cannot import torch)")
end
for _, clock in ipairs({ "wall", "cpu" }) do
  local what = ("(median of %d slices x %d steps, %s time)"):format(slices, steps, clock)
  local me, mj = median(eager[clock]), median(jit[clock])
  print(("lstm_train_tide_eager_%s: %.1f ms/step %s"):format(clock, me, what))
  print(("lstm_train_tide_jit_%s: %.1f ms/step"):format(clock, mj))
  if have_torch then
    local mt = median(torch[clock])
    print(("lstm_train_pytorch_%s: %.1f ms/step"):format(clock, mt))
    for _, r in ipairs({ { "eager", me }, { "jit", mj } }) do
      local speedup = mt / r[2]
      print(("lstm_speedup_%s_vs_pytorch_%s: %.2fx (target >= 1.2: %s)"):format(r[1], clock,
        speedup, speedup >= 1.2 and "met" or "NOT met"))
    end
  end
end
