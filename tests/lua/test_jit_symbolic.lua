-- test_jit_symbolic.lua — symbolic dims from Lua (jit/README.md): training steps met with many
-- batch sizes in shuffled order compile a few plans, never fall back, and equal eager bitwise
-- (the CPU jit's promise); an attention-like forward over many sequence lengths; declared
-- dynamic dims; dynamic = false; f:stats() names the dynamic dims and the recompile reasons;
-- bad options are errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = tide.nn

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

-- a model, its optimizer and one training step, traced or not, from the same seed
local function trainer(traced, optim_name)
  tide.manual_seed(0)
  local model = nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 5))
  local opt = optim_name == "adam" and tide.optim.Adam(model:parameters(), { lr = 0.01 })
    or tide.optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 })
  local function step(x, y)
    opt:zero_grad()
    local loss = nn.functional.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end
  return traced and tide.jit(step) or step, model
end

for _, optim_name in ipairs({ "sgd", "adam" }) do
  H.test("training step over 64 batch sizes (" .. optim_name .. ")", function()
    local fj, mj = trainer(true, optim_name)
    local fe, me = trainer(false, optim_name)
    for _, b in ipairs(shuffled(64, 7)) do
      tide.manual_seed(100 + b)
      local x, y = tide.randn(b, 12), tide.randint(1, 6, { b })
      H.eq(fj(x, y):item(), fe(x, y):item(), "loss at batch " .. b)
    end
    local pj, pe = mj:parameters(), me:parameters()
    for i = 1, #pj do H.ok(tide.equal(pj[i], pe[i]), "parameter " .. i .. " equal to eager") end
    local s = fj:stats()
    -- creating the optimizer's state, the symbolic plan, size 1 (specializes)
    H.ok(s.compiles <= 4, "compiles: " .. s.compiles)
    H.eq(s.fallbacks, 0)
    H.eq(#s.dynamic_dims, 2, "x's and y's batch dims")
    H.eq(s.dynamic_dims[1][1], 1)
    H.eq(s.dynamic_dims[1][2], 1)
    H.ok(#s.recompile_reasons >= 1 and s.recompile_reasons[1]:find("dim made symbolic", 1, true),
         "reason: " .. tostring(s.recompile_reasons[1]))
  end)
end

H.test("attention forward over sequence lengths 1..96", function()
  tide.manual_seed(1)
  local wq, wk = tide.randn(16, 16), tide.randn(16, 16)
  local function attend(x)
    local q, k = x:matmul(wq), x:matmul(wk)
    local scores = q:matmul(k:transpose(2, 3)) * 0.25
    return scores:softmax(-1):matmul(x)
  end
  local f = tide.jit(attend)
  for _, t in ipairs(shuffled(96, 3)) do
    local x = tide.randn(2, t, 16)
    H.ok(tide.equal(f(x), attend(x)), "length " .. t .. " equal to eager")
  end
  local s = f:stats()
  H.ok(s.compiles <= 4, "compiles: " .. s.compiles)
  H.eq(s.fallbacks, 0)
end)

H.test("declared dynamic dims and dynamic = false", function()
  local function g(x) return (x:tanh() * 2):softmax(-1) end
  local d = tide.jit(g, { dynamic = { [1] = { 1 } } })
  for _, b in ipairs({ 5, 9, 30, 2 }) do
    local x = tide.randn(b, 7)
    H.ok(tide.equal(d(x), g(x)), "declared: batch " .. b)
  end
  H.eq(d:stats().compiles, 1, "declared: one plan from the first call")
  local s = tide.jit(g, { dynamic = false })
  for _, b in ipairs({ 5, 9, 30 }) do s(tide.randn(b, 7)) end
  H.eq(s:stats().compiles, 3, "dynamic = false: a plan per shape")
  H.eq(#s:stats().dynamic_dims, 0)
  H.raises(function() tide.jit(g, { dynamic = 3 }) end, "dynamic must be")
  H.raises(function() tide.jit(g, { dynamic = { [0] = { 1 } } }) end, "arguments are 1..16")
  H.raises(function() tide.jit(g, { dynamic = { [1] = { 9 } } }) end, "dims are 1..")
  H.raises(function() tide.jit(g, { dynamic = { [1] = 1 } }) end, "a table of dims")
end)

H.test("guards: size 1, a transposed input, a new dtype", function()
  local function g(x) return (x * x + 1):log():sum(-1) end
  local f = tide.jit(g)
  local function check(x, what) H.ok(tide.equal(f(x), g(x)), what) end
  check(tide.randn(4, 6), "first")
  check(tide.randn(5, 6), "symbolic")
  local c = f:stats().compiles
  check(tide.randn(11, 6), "hit")
  H.eq(f:stats().compiles, c, "a new batch size hits")
  check(tide.randn(1, 6), "size 1")
  check(tide.randn(6, 8):t(), "transposed")
  check(tide.randn(7, 6):to("float64"), "float64")
  H.eq(f:stats().fallbacks, 0)
end)

H.done()
