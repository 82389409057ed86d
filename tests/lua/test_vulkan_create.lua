-- test_vulkan_create.lua — creation on a device and `to` as an op, from Lua: every creation and
-- random op with {device = "vulkan"} (values read back), *_like following its argument, the
-- thread's default device, the gradient of x:to(...) flowing back to x's device, and the
-- Vulkan MLP training step under tide.jit with no graph break per call and fresh dropout masks
-- on every call. Skipped (with the reason) where there is no Vulkan.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"
local optim = require "tide.optim"

H.test("an unknown device names the op and the device", function()
  H.raises(function() return tide.zeros(2, { device = "nodev" }) end, 'zeros: device "nodev"')
  H.raises(function() return tide.randn(2, { device = "nodev" }) end, 'randn: device "nodev"')
  H.raises(function() return tide.arange(3, { device = "nodev" }) end, 'arange: device "nodev"')
  H.raises(function() tide.set_default_device("nodev") end, 'set_default_device: device "nodev"')
  H.eq(tide.get_default_device(), "cpu", "the default is left alone")
end)

local ok, why = tide.vulkan.available()
if not ok then
  print("test_vulkan_create.lua: no Vulkan device, the Vulkan tests are skipped: " .. why)
  H.done()
end

local dev = { device = "vulkan" }
local function on(extra)
  local o = { device = "vulkan" }
  for k, v in pairs(extra) do o[k] = v end
  return o
end

-- Both tensors' values are equal bit for bit (read back to Lua numbers).
local function same(a, b, what)
  H.values(a, b:to("cpu"):totable(), 0, what)
end

H.test("every creation op makes its tensor on the device", function()
  local cases = {
    { "zeros", tide.zeros(2, 3, dev), { { 0, 0, 0 }, { 0, 0, 0 } } },
    { "ones", tide.ones({ 2 }, on { dtype = "int32" }), { 1, 1 } },
    { "full", tide.full(2, 2, 2.5, dev), { { 2.5, 2.5 }, { 2.5, 2.5 } } },
    -- 2^53 + 1 is not a double: an int64 fill must not pass through one
    { "full int64", tide.full({ 1 }, 9007199254740993, dev), { 9007199254740993 } },
    { "arange", tide.arange(1, 6, on { dtype = "int32" }), { 1, 2, 3, 4, 5 } },
    { "arange float", tide.arange(0, 1, 0.25, dev), { 0, 0.25, 0.5, 0.75 } },
    { "linspace", tide.linspace(0, 1, 5, dev), { 0, 0.25, 0.5, 0.75, 1 } },
    { "eye", tide.eye(2, 3, dev), { { 1, 0, 0 }, { 0, 1, 0 } } },
    { "tensor", tide.tensor({ { 1, 2 }, { 3, 4 } }, dev), { { 1, 2 }, { 3, 4 } } },
    { "tensor int", tide.tensor({ 7, -8 }, on { dtype = "int64" }), { 7, -8 } },
    { "tensor scalar", tide.tensor(3.5, dev), 3.5 },
  }
  for _, c in ipairs(cases) do
    H.eq(c[2].device, "vulkan", c[1] .. " device")
    if type(c[3]) == "number" then
      H.eq(c[2]:item(), c[3], c[1])
    else
      H.values(c[2], c[3], 0, c[1]) -- exact: small integers and dyadic fractions
    end
  end
  local e = tide.empty(3, 4, on { dtype = "float64" })
  H.eq(e.device, "vulkan")
  H.eq(e.dtype, "float64")
  H.eq(H.shape_of(e:totable())[2], 4)
end)

H.test("random ops on the device draw the CPU's numbers under the same seed", function()
  -- every element is a function of (seed, offset + i) on every device
  local makers = {
    { "rand", function(o) return tide.rand(4, 5, o) end },
    { "randn", function(o) return tide.randn(4, 5, o) end },
    { "randint", function(o) return tide.randint(-3, 9, { 20 }, o) end },
    { "randperm", function(o) return tide.randperm(12, o) end },
  }
  for _, m in ipairs(makers) do
    tide.manual_seed(11)
    local v = m[2](dev)
    tide.manual_seed(11)
    local c = m[2]({ device = "cpu" })
    H.eq(v.device, "vulkan", m[1] .. " device")
    same(v, c, m[1] .. " equals the CPU's")
  end
  tide.manual_seed(3)
  local p = tide.full(1000, 0.25, dev)
  local b = tide.bernoulli(p)
  H.eq(b.device, "vulkan", "bernoulli follows p")
  local mean = b:mean():item()
  -- 1000 draws of p = 0.25: the mean's standard deviation is 0.014; 6 of them
  H.ok(math.abs(mean - 0.25) < 0.085, "bernoulli mean " .. mean)
  local u = tide.zeros(500, dev)
  u:uniform_(2, 3)
  H.eq(u.device, "vulkan")
  H.ok(u:min():item() >= 2 and u:max():item() < 3, "uniform_ range on the device")
end)

H.test("*_like follows its argument's device and dtype", function()
  local x = tide.zeros(2, 3, on { dtype = "float64" })
  for _, name in ipairs({ "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like" }) do
    local y = tide[name](x)
    H.eq(y.device, "vulkan", name .. " device")
    H.eq(y.dtype, "float64", name .. " dtype")
  end
  local f = tide.full_like(x, 4)
  H.eq(f.device, "vulkan")
  H.values(f, { { 4, 4, 4 }, { 4, 4, 4 } }, 0)
  H.values(tide.ones_like(x), { { 1, 1, 1 }, { 1, 1, 1 } }, 0)
  H.eq(tide.zeros_like(x, { device = "cpu" }).device, "cpu", "an explicit device wins")
end)

H.test("the thread's default device", function()
  H.eq(tide.get_default_device(), "cpu")
  tide.set_default_device("vulkan")
  local ok2, err = pcall(function()
    H.eq(tide.get_default_device(), "vulkan")
    H.eq(tide.zeros(2).device, "vulkan", "zeros")
    H.eq(tide.randn(2).device, "vulkan", "randn")
    H.eq(tide.arange(3).device, "vulkan", "arange")
    H.eq(tide.tensor({ 1, 2 }).device, "vulkan", "tensor")
    H.values(tide.tensor({ 1, 2 }), { 1, 2 }, 0)
    H.eq(tide.zeros(2, { device = "cpu" }).device, "cpu", "an explicit device wins")
  end)
  tide.set_default_device("cpu")
  H.ok(ok2, tostring(err))
  H.eq(tide.zeros(2).device, "cpu")
end)

H.test("to is recorded: the gradient comes back to the CPU", function()
  local x = tide.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
  local y = x:to("vulkan"):mul(2):to("cpu"):sum()
  H.eq(y.device, "cpu")
  y:backward()
  H.eq(x.grad.device, "cpu")
  H.values(x.grad, { 2, 2, 2 }, 0)
  -- and from a Vulkan leaf through the CPU
  local v = tide.tensor({ 1.0, -1.0 }, on { requires_grad = true })
  local z = (v:to("cpu") * v:to("cpu")):sum()
  z:backward()
  H.eq(v.grad.device, "vulkan")
  H.values(v.grad, { 2, -2 }, 0) -- d(v^2)/dv = 2v, exact
end)

H.test("to under the jit: traced in its source's segment, recorded by autograd", function()
  local f = tide.jit(function(x)
    local y = (x * 3):to("vulkan"):mul(2):to("cpu"):sum()
    y:backward()
    return y
  end)
  for i = 1, 3 do
    local x = tide.tensor({ 1.0, 2.0, 4.0 }, { requires_grad = true })
    local y = f(x)
    H.eq(y.device, "cpu")
    H.eq(y:item(), 42, "call " .. i) -- 6 * 7, exact
    H.eq(x.grad.device, "cpu")
    H.values(x.grad, { 6, 6, 6 }, 0, "call " .. i)
  end
  -- each call: the CPU segment ends with its copy to Vulkan (the copy is a node of it), the
  -- Vulkan segment (mul, the copy back, and backward's copies) likewise: a later call compiles
  -- nothing and runs every segment, copies included, from the cache
  local st = f:stats()
  H.ok(st.breaks >= 2, "a segment is on one device: " .. st.breaks)
  local before = f:stats()
  f(tide.tensor({ 1.0, 2.0, 4.0 }, { requires_grad = true }))
  local after = f:stats()
  H.eq(after.compiles, before.compiles, "a fourth call compiles nothing")
  H.ok(after.hits - before.hits >= 3, "its segments (with the copies) hit the cache: "
       .. (after.hits - before.hits))
  -- a transposed view of a traced result, moved both ways
  local g = tide.jit(function(a) return (a * 2):t():to("vulkan"):to("cpu"):t():to("vulkan") end)
  local a = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float32" })
  for i = 1, 2 do
    local r = g(a)
    H.eq(r.device, "vulkan")
    H.values(r, { { 2, 4, 6 }, { 8, 10, 12 } }, 0, "call " .. i)
  end
end)

-- The Fashion-MNIST MLP (smaller: 784-64-32-10, batch 16) with dropout, on Vulkan.
local function mlp_step(make_opt)
  tide.manual_seed(0)
  local model = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Dropout(0.5), nn.Linear(64, 32),
                              nn.ReLU(), nn.Linear(32, 10)):to("vulkan")
  local opt = make_opt(model:parameters())
  local x = tide.randn(16, 784, dev)
  local y = tide.randint(1, 11, { 16 }, dev)
  return function()
    opt:zero_grad()
    local loss = F.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end
end

local optimizers = {
  SGD = function(p) return optim.SGD(p, { lr = 0.01, momentum = 0.9 }) end,
  Adam = function(p) return optim.Adam(p, { lr = 1e-3 }) end,
}
for name, make in pairs(optimizers) do
  H.test("jit MLP step on vulkan (" .. name .. ", dropout): no graph break per call", function()
    local step = tide.jit(mlp_step(make))
    for _ = 1, 3 do step():item() end -- warm-up: optimizer state appears, plans compile
    local before = step:stats()
    for _ = 1, 3 do step():item() end
    local after = step:stats()
    print(("  %s: breaks %d -> %d, compiles %d -> %d, hits %d -> %d"):format(name, before.breaks,
      after.breaks, before.compiles, after.compiles, before.hits, after.hits))
    H.eq(after.breaks - before.breaks, 0, "breaks in 3 calls after warm-up")
    H.eq(after.compiles, before.compiles, "nothing compiled after warm-up")
  end)
end

H.test("jit dropout on vulkan: a fresh mask every call, each equal to eager's", function()
  local x = tide.ones(64, 32, dev)
  local function f(t) return F.dropout(t, 0.5, true) * 1 end
  local jf = tide.jit(f)
  for _ = 1, 2 do jf(x) end -- compiled and cached
  tide.manual_seed(42)
  local e1, e2 = f(x), f(x)
  tide.manual_seed(42)
  local j1, j2 = jf(x), jf(x)
  H.eq(j1.device, "vulkan")
  same(j1, e1, "first call equals eager") -- values 0 or 2: exact
  same(j2, e2, "second call equals eager")
  local differ = (j1 - j2):abs():sum():item()
  H.ok(differ > 0, "the two calls draw different masks")
  H.ok(jf:stats().hits >= 3, "the calls hit the cached plan")
end)

H.done()
