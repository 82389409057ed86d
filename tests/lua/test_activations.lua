-- test_activations.lua — tide.erf / x:erf(), and gelu's two forms (exact and PyTorch's tanh
-- approximation, as a string or {approximate = ...}): values against plain double loops,
-- gradients against the derivatives, jit bitwise equal to eager, Vulkan against the CPU, errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

-- erf in double: the Taylor series, for |v| <= 3 (the largest term, ~170 at v = 3, leaves the
-- sum within ~4e-14 of erf) and 1 - erfc's continued fraction past 3 (erfc(3) = 2.2e-5).
local function erf_ref(v)
  local a = math.abs(v)
  local r
  if a <= 3 then
    local term, sum, n = a, a, 0
    repeat
      n = n + 1
      term = -term * a * a / n
      sum = sum + term / (2 * n + 1)
    until math.abs(term) < 1e-18
    r = 2 / math.sqrt(math.pi) * sum
  else -- erfc(a) = exp(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))
    local f = a
    for k = 60, 1, -1 do f = a + (k / 2) / f end
    r = 1 - math.exp(-a * a) / math.sqrt(math.pi) / f
  end
  return v < 0 and -r or r
end

local XS = {}
for i = 0, 160 do XS[#XS + 1] = -4 + i / 20 end

H.test("erf values in float64 and float32", function()
  local want = H.map(XS, erf_ref)
  -- float64: the kernel's 1 ulp plus this reference's 4e-14: 1e-13
  H.values(tide.tensor(XS, { dtype = "float64" }):erf(), want, 1e-13, "float64")
  -- float32: 1 ulp of a value at most 1 (6e-8) plus the input's rounding to float32, which
  -- moves erf by up to 2/sqrt(pi) * 2^-24 * |x| (4.5e-7 at |x| = 4): 6e-7
  H.values(tide.erf(tide.tensor(XS)), want, 6e-7, "float32")
  H.eq(tide.erf(tide.tensor({ 1, 2 }, { dtype = "int32" })).dtype, "float32", "int gives float32")
  local y = tide.tensor({ 0.5, -0.5 })
  H.eq(y:erf_() == y, true, "erf_ returns self")
  H.values(y, { erf_ref(0.5), erf_ref(-0.5) }, 1e-7, "in place")
end)

H.test("erf gradient is 2/sqrt(pi) exp(-x^2)", function()
  local x = tide.tensor(XS, { dtype = "float64", requires_grad = true })
  x:erf():sum():backward()
  -- exp's 1 ulp and x*x's rounding (2 x^2 ulps in exp, x^2 <= 16): 1e-14
  H.values(x.grad, H.map(XS, function(v) return 2 / math.sqrt(math.pi) * math.exp(-v * v) end),
    1e-14)
end)

local C = math.sqrt(2 / math.pi)
local function gelu_tanh(v) return 0.5 * v * (1 + math.tanh(C * (v + 0.044715 * v ^ 3))) end
local function gelu_tanh_grad(v)
  local t = math.tanh(C * (v + 0.044715 * v ^ 3))
  return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * C * (1 + 3 * 0.044715 * v * v)
end
local function gelu_exact(v) return 0.5 * v * (1 + erf_ref(v / math.sqrt(2))) end

H.test("gelu: exact by default, tanh with {approximate = \"tanh\"}", function()
  local x = tide.tensor(XS, { dtype = "float64" })
  -- SLEEF's erfc (1.5 ulp) times its sensitivity to its argument's rounding (~2 z^2 + 1 ulp,
  -- 17 at |x| = 4): 1e-13 covers it
  H.values(tide.gelu(x), H.map(XS, gelu_exact), 1e-13, "exact")
  H.values(tide.gelu(x, { approximate = "none" }), H.map(XS, gelu_exact), 1e-13, "none")
  local t = tide.gelu(x, { approximate = "tanh" })
  H.values(t, H.map(XS, gelu_tanh), 1e-14, "tanh")
  H.eq(tide.equal(t, x:gelu("tanh")), true, "table and string forms agree")
  local xg = tide.tensor(XS, { dtype = "float64", requires_grad = true })
  tide.gelu(xg, { approximate = "tanh" }):sum():backward()
  H.values(xg.grad, H.map(XS, gelu_tanh_grad), 1e-13, "tanh gradient")
end)

H.test("exact gelu's gradient is Phi(x) + x phi(x), and autograd keeps x alone", function()
  local xg = tide.tensor(XS, { dtype = "float64", requires_grad = true })
  tide.gelu(xg):sum():backward()
  local function grad(v)
    local pdf = math.exp(-0.5 * v * v) / math.sqrt(2 * math.pi)
    return 0.5 * (1 + erf_ref(v / math.sqrt(2))) + v * pdf
  end
  -- erf's and exp's 1 ulp through a sum and products, against erf_ref's own error: 1e-13
  H.values(xg.grad, H.map(XS, grad), 1e-13, "gradient")
  -- one op: the output is the only new tensor (the composite it replaced kept ~19 of x's size)
  local x = tide.randn(1 << 20):requires_grad_(true)
  collectgarbage(); collectgarbage()
  local before = tide.memory_stats().in_use
  local y = tide.gelu(x)
  local grown = tide.memory_stats().in_use - before
  H.eq(grown <= 1.25 * 4 * (1 << 20), true, ("gelu's forward kept %d bytes for a 4 MiB input")
    :format(grown))
  y:sum():backward()
  H.eq(x.grad:numel(), 1 << 20, "gradient size")
end)

H.test("silu and its gradient, sigmoid(x) (1 + x (1 - sigmoid(x)))", function()
  local function sig(v) return 1 / (1 + math.exp(-v)) end
  local xg = tide.tensor(XS, { dtype = "float64", requires_grad = true })
  local y = tide.silu(xg)
  -- exp's 1 ulp through a handful of roundings: 1e-14
  H.values(y, H.map(XS, function(v) return v * sig(v) end), 1e-14, "values")
  y:sum():backward()
  H.values(xg.grad, H.map(XS, function(v) return sig(v) * (1 + v * (1 - sig(v))) end), 1e-14,
    "gradient")
end)

H.test("jit equals eager bitwise on the CPU", function()
  local fs = {
    erf = function(x) return (x * 1.5):erf() * x end,
    gelu_tanh = function(x) return tide.gelu(x * 2, { approximate = "tanh" }) + x end,
    gelu = function(x) return tide.gelu(x - 0.5) end,
    silu = function(x) return tide.silu(x) * 3 end,
  }
  local x = tide.randn(3000)
  for name, f in pairs(fs) do
    H.eq(tide.equal(tide.jit(f)(x), f(x)), true, name .. " in a jit function")
  end
end)

H.test("errors", function()
  H.raises(function() return tide.erf("x") end, "erf")
  H.raises(function() return tide.gelu(tide.ones(2), { approximate = "exact" }) end,
    "gelu", "approximate")
  H.raises(function() return tide.gelu(tide.ones(2), "sigmoid") end, "gelu", "approximate")
end)

if tide.vulkan.available() then
  H.test("Vulkan against the CPU", function()
    local x = tide.randn(4, 257) * 2
    -- the shader's erf is within 4 ulps (devices/vulkan/shaders/common.glsl): 4 * 6e-8 of a
    -- value at most 1; gelu tanh: tanh and sigmoid shaders' 2e-5 relative (test_vulkan.c)
    H.values(x:to("vulkan"):erf():to("cpu"), x:erf():totable(), 2.4e-7, "erf")
    H.values(tide.gelu(x:to("vulkan"), { approximate = "tanh" }):to("cpu"),
      tide.gelu(x, { approximate = "tanh" }):totable(), 2e-5, "gelu tanh")
    H.values(tide.gelu(x:to("vulkan")):to("cpu"), tide.gelu(x):totable(), 2e-5, "gelu exact")
    H.values(tide.silu(x:to("vulkan")):to("cpu"), tide.silu(x):totable(), 2e-5, "silu")
    local f = tide.jit(function(v) return tide.gelu(v:erf() + v, { approximate = "tanh" }) end)
    H.values(f(x:to("vulkan")):to("cpu"), f(x):totable(), 2e-5, "erf + gelu tanh jitted")
  end)
else
  print("test_activations.lua: no Vulkan device, its test is skipped")
end

H.done()
