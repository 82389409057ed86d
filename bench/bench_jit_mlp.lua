-- bench_jit_mlp.lua — the Fashion-MNIST MLP (784-512-256-10, ReLU, cross-entropy, SGD momentum
-- 0.9) training step on random data, eager vs tide.jit, batch 128 and 32, in one run; and the
-- time from the first jit call to the first compiled step (trace + passes + codegen + libtcc).
--
--   build/lua/tide bench/bench_jit_mlp.lua [seconds_per_case]
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"
local optim = require "tide.optim"

local seconds = tonumber(arg and arg[1]) or 2

local function setup(batch)
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
  return step
end

-- The step's eight products alone, as eager tide.matmul on the same shapes and layouts: three
-- forward (x W^T), three weight gradients (dy^T h) and two input gradients (dy W; the input's
-- gradient is not needed). Neither eager nor the jit can take less than these (both call the
-- same BLAS), so eager time / this time is the most any fusion of the rest could gain.
local function products(batch)
  tide.manual_seed(0)
  local sizes = { 784, 512, 256, 10 }
  local w, h, dy = {}, {}, {}
  for l = 1, 3 do
    w[l] = tide.randn(sizes[l + 1], sizes[l])
    h[l] = tide.randn(batch, sizes[l])
    dy[l] = tide.randn(batch, sizes[l + 1])
  end
  return function()
    local last
    for l = 1, 3 do
      last = tide.matmul(h[l], w[l]:t())
      last = tide.matmul(dy[l]:t(), h[l])
      if l > 1 then last = tide.matmul(dy[l], w[l]) end
    end
    return last[1][1] -- one element, for run_for's item()
  end
end

-- Steps run and seconds taken by step over about secs seconds.
local function run_for(step, secs)
  local n, t0 = 0, tide.clock()
  repeat
    step():item()
    n = n + 1
  until tide.clock() - t0 >= secs
  return n, tide.clock() - t0
end

-- Eager and jit alternate in slices of the run, so a drift of the machine's speed (a noisy
-- 2-core VM) falls on both alike; the ratio is of the totals, the median of the slices' ratios
-- is printed beside it.
local slices = 10
local function met(ok) return ok and "met" or "NOT met" end
print(("threads: %d"):format(tide.get_num_threads()))
print(("# TIDE_CPU_ISA=%s"):format(os.getenv("TIDE_CPU_ISA") or "unset"))
for _, batch in ipairs({ 128, 32 }) do
  local estep = setup(batch)
  for _ = 1, 3 do estep():item() end
  local jstep = tide.jit(setup(batch))
  local t0 = tide.clock()
  jstep():item() -- first call: momentum buffers absent, traced and compiled
  jstep():item() -- second call: the steady-state graph compiled
  local first = tide.clock() - t0
  jstep():item()
  local gstep = products(batch)
  local en, et, jn, jt, gn, gt, ratios = 0, 0, 0, 0, 0, 0, {}
  for _ = 1, slices do
    local a, ta = run_for(estep, seconds / slices)
    local b, tb = run_for(jstep, seconds / slices)
    local c, tc = run_for(gstep, seconds / slices / 2)
    en, et, jn, jt, gn, gt = en + a, et + ta, jn + b, jt + tb, gn + c, gt + tc
    ratios[#ratios + 1] = (b / tb) / (a / ta)
  end
  table.sort(ratios)
  local e, j = en / et, jn / jt
  local s = jstep:stats()
  print(("mlp_b%d_eager: %.1f steps/s (%.3f ms/step)"):format(batch, e, 1000 / e))
  print(("mlp_b%d_jit: %.1f steps/s (%.3f ms/step)"):format(batch, j, 1000 / j))
  local med = (ratios[slices // 2] + ratios[slices // 2 + 1]) / 2
  print(("mlp_b%d_speedup: %.2f x (the totals' ratio)"):format(batch, j / e))
  print(("mlp_b%d_speedup_slices: %.2f x median, %.2f-%.2f over %d alternating slices (target >= 1.3: %s)")
    :format(batch, med, ratios[1], ratios[slices], slices, met(med >= 1.3)))
  local g = gn / gt
  print(("mlp_b%d_products_alone: %.3f ms/step (the eight matmuls of a step, eager)")
    :format(batch, 1000 / g))
  print(("mlp_b%d_jit_of_products: %.2f (products' time / the jit step's; 1 = nothing but them)")
    :format(batch, j / g))
  print(("mlp_b%d_speedup_ceiling: %.2f x (eager step / products alone: the most a jit can gain)")
    :format(batch, g / e))
  print(("mlp_b%d_first_two_jit_steps: %.1f ms (compile_ms %.1f over %d compiles; target <= 100: %s)")
    :format(batch, first * 1000, s.compile_ms, s.compiles, met(first * 1000 <= 100)))
end
