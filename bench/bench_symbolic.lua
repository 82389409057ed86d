-- bench_symbolic.lua — symbolic dims (jit/README.md), the targets of its issue in one run:
--   * the Fashion-MNIST MLP training step (784-512-256-10, SGD momentum) met with the 64 batch
--     sizes 1..64 in shuffled order: compiles (target <= 4), fallbacks (0), values equal to
--     eager's (every loss, and the parameters at the end);
--   * an attention forward (softmax(q k^T / 8) v, one head of 64) over sequence lengths 1..256
--     shuffled: compiles (target <= 4), equal to eager;
--   * the time of a symbolic plan's call against a static plan's, in alternating slices (the
--     median of the slices' ratios): the MLP step at batch 128 (target >= 0.95) and softmax
--     over the last dim of 4096 x 4096 (within 5%: >= 0.95);
--   * one epoch of examples/fashion_mnist.lua (its last batch is partial): compiles (target
--     <= 3), when the data set is installed.
--
--   build/lua/tide bench/bench_symbolic.lua [seconds_per_timing]
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"
local optim = require "tide.optim"

local seconds = tonumber(arg and arg[1]) or 4
local slices = 10
local function met(ok) return ok and "met" or "NOT met" end

local function shuffled(n, seed)
  local t = {}
  for i = 1, n do t[i] = i end
  local state = seed
  for i = n, 2, -1 do
    state = (state * 1103515245 + 12345) % 2147483648
    local j = state % i + 1
    t[i], t[j] = t[j], t[i]
  end
  return t
end

local function mlp_step(opts)
  tide.manual_seed(0)
  local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                              nn.Linear(256, 10))
  local opt = optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
  local function step(x, y)
    opt:zero_grad()
    local loss = F.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end
  if opts then return tide.jit(step, opts), model end
  return step, model
end

local cpu = io.open("/proc/cpuinfo")
local model_name = cpu and cpu:read("a"):match("model name%s*:%s*([^\n]+)") or "unknown"
if cpu then cpu:close() end
print(("# cpu: %s; TIDE_CPU_ISA=%s; threads: %d"):format(model_name,
  os.getenv("TIDE_CPU_ISA") or "unset", tide.get_num_threads()))

-- ---- 64 batch sizes through the MLP step ------------------------------------------------------
do
  local fj, mj = mlp_step({})
  local fe, me = mlp_step(nil)
  local differ = 0
  for _, b in ipairs(shuffled(64, 11)) do
    tide.manual_seed(1000 + b)
    local x, y = tide.randn(b, 784), tide.randint(1, 11, { b })
    if fj(x, y):item() ~= fe(x, y):item() then differ = differ + 1 end
  end
  local pj, pe = mj:parameters(), me:parameters()
  for i = 1, #pj do if not tide.equal(pj[i], pe[i]) then differ = differ + 1 end end
  local s = fj:stats()
  print(("mlp_64_batch_sizes_compiles: %d (target <= 4: %s)"):format(s.compiles,
    met(s.compiles <= 4)))
  print(("mlp_64_batch_sizes_fallbacks: %d (target 0: %s)"):format(s.fallbacks,
    met(s.fallbacks == 0)))
  print(("mlp_64_batch_sizes_values_differing_from_eager: %d (target 0: %s)"):format(differ,
    met(differ == 0)))
end

-- ---- attention over sequence lengths 1..256 -------------------------------------------------
do
  tide.manual_seed(2)
  local wq, wk, wv = tide.randn(64, 64) * 0.125, tide.randn(64, 64) * 0.125, tide.randn(64, 64)
  local function attend(x)
    local q, k, v = x:matmul(wq), x:matmul(wk), x:matmul(wv)
    return (q:matmul(k:transpose(2, 3)) * 0.125):softmax(-1):matmul(v)
  end
  local f = tide.jit(attend)
  local differ = 0
  for _, t in ipairs(shuffled(256, 5)) do
    local x = tide.randn(1, t, 64)
    if not tide.equal(f(x), attend(x)) then differ = differ + 1 end
  end
  local s = f:stats()
  print(("attention_256_lengths_compiles: %d (target <= 4: %s)"):format(s.compiles,
    met(s.compiles <= 4)))
  print(("attention_256_lengths_fallbacks: %d (target 0: %s)"):format(s.fallbacks,
    met(s.fallbacks == 0)))
  print(("attention_256_lengths_differing_from_eager: %d (target 0: %s)"):format(differ,
    met(differ == 0)))
end

-- ---- symbolic against static, alternating slices ---------------------------------------------

-- Calls of fn and seconds taken over about secs seconds.
local function run_for(fn, secs)
  local n, t0 = 0, tide.clock()
  repeat
    fn()
    n = n + 1
  until tide.clock() - t0 >= secs
  return n, tide.clock() - t0
end

-- Rates of a (static) and b (symbolic), alternating; the median of b/a over the slices.
local function compare(name, a, b)
  for _ = 1, 3 do a(); b() end
  local ratios, an, at, bn, bt = {}, 0, 0, 0, 0
  for _ = 1, slices do
    local n1, t1 = run_for(a, seconds / slices / 2)
    local n2, t2 = run_for(b, seconds / slices / 2)
    an, at, bn, bt = an + n1, at + t1, bn + n2, bt + t2
    ratios[#ratios + 1] = (n2 / t2) / (n1 / t1)
  end
  table.sort(ratios)
  local med = (ratios[slices // 2] + ratios[slices // 2 + 1]) / 2
  print(("%s_static: %.3f ms/call"):format(name, 1000 * at / an))
  print(("%s_symbolic: %.3f ms/call"):format(name, 1000 * bt / bn))
  print(("%s_symbolic_vs_static: %.3f x median, %.3f-%.3f over %d alternating slices " ..
         "(target >= 0.95: %s)"):format(name, med, ratios[1], ratios[slices], slices,
         met(med >= 0.95)))
end

do -- the MLP step at batch 128: a static plan, and the symbolic plan made by other sizes
  local fs = mlp_step({ dynamic = false })
  local fd = mlp_step({})
  tide.manual_seed(3)
  local x, y = tide.randn(128, 784), tide.randint(1, 11, { 128 })
  for _, b in ipairs({ 64, 100, 64 }) do fd(tide.randn(b, 784), tide.randint(1, 11, { b })) end
  local before = fd:stats().compiles
  compare("mlp_b128_step", function() fs(x, y):item() end, function() fd(x, y):item() end)
  print(("mlp_b128_symbolic_compiles_at_128: %d (the symbolic plan served it: %s)")
    :format(fd:stats().compiles - before, met(fd:stats().compiles == before)))
end

do -- softmax over the last dim of 4096 x 4096; the symbolic plan made by other shapes
  local function sm(x) return x:softmax(-1) end
  local fs, fd = tide.jit(sm, { dynamic = false }), tide.jit(sm)
  local x = tide.randn(4096, 4096)
  fd(tide.randn(100, 3000))
  fd(tide.randn(300, 3500))
  local before = fd:stats().compiles
  compare("softmax_4096x4096", function() fs(x) end, function() fd(x) end)
  print(("softmax_symbolic_compiles_at_4096: %d (the symbolic plan served it: %s)")
    :format(fd:stats().compiles - before, met(fd:stats().compiles == before)))
end

-- ---- one Fashion-MNIST epoch -------------------------------------------------------------------
do
  local here = (arg[0]:match("(.*/)") or "./")
  local example = here .. "../examples/fashion_mnist.lua"
  local interp = arg[-1] or "tide"
  local p = io.popen(("%q %q --epochs 1 --quiet 2>&1"):format(interp, example))
  local out = p and p:read("a") or ""
  if p then p:close() end
  local compiles = out:match("jit: (%d+) compiles")
  if compiles then
    print(("fashion_mnist_epoch_compiles: %s (last batch %s; target <= 3: %s)"):format(compiles,
      out:match("last batch (%d+)") or "?", met(tonumber(compiles) <= 3)))
  else
    print("fashion_mnist_epoch_compiles: not measured (" .. (out:match("[^\n]*$") or "") .. ")")
  end
end
