-- test_math.lua — issue 24's elementwise math, special-value tests and activations from Lua:
-- known answers (functions, methods, in-place forms, keyword options), the nn modules, PyTorch's
-- semantics of isclose/allclose/equal/remainder, jit against eager, Vulkan against the CPU, and
-- errors naming the op. Gradients and ulps are checked in C (test_math_ops, test_math_ulps).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = tide.nn
local F = nn.functional

local function d(t) return tide.tensor(t, { dtype = "float64" }) end

-- float64 results of a few libm-accurate steps: 1e-14 relative (harness: tol * (1 + |want|))
local TOL = 1e-14

H.test("math functions: known answers", function()
  H.values(tide.log1p(d({ 1e-10, 1, -0.5 })), { 1e-10 - 5e-21, math.log(2), math.log(0.5) }, TOL, "log1p")
  H.values(d({ 1e-10, 1 }):expm1(), { 1e-10 + 5e-21, math.exp(1) - 1 }, TOL, "expm1")
  H.values(tide.log2(d({ 8, 0.5, 3 })), { 3, -1, math.log(3, 2) }, TOL, "log2")
  H.values(tide.tan(d({ 0.5 })), { math.tan(0.5) }, TOL, "tan")
  H.values(tide.asin(d({ 1, 0.5 })), { math.pi / 2, math.asin(0.5) }, TOL, "asin")
  H.values(tide.acos(d({ -1, 0.5 })), { math.pi, math.acos(0.5) }, TOL, "acos")
  H.values(tide.atan(d({ 1 })), { math.pi / 4 }, TOL, "atan")
  H.values(tide.atan2(d({ 1, 1, -1 }), d({ 0, -1, -1 })), { math.pi / 2, 3 * math.pi / 4, -3 * math.pi / 4 },
    TOL, "atan2")
  H.values(tide.sinh(d({ 1 })), { (math.exp(1) - math.exp(-1)) / 2 }, TOL, "sinh")
  H.values(tide.cosh(d({ 1 })), { (math.exp(1) + math.exp(-1)) / 2 }, TOL, "cosh")
  H.values(tide.trunc(d({ -2.5, 2.5 })), { -2, 2 }, 0, "trunc")
  H.values(tide.frac(d({ -2.5, 2.25 })), { -0.5, 0.25 }, 0, "frac")
  H.values(tide.fmod(d({ -7, 7 }), 3), { -1, 1 }, 0, "fmod: the dividend's sign")
  H.values(tide.remainder(d({ -7, 7 }), 3), { 2, 1 }, 0, "remainder: the divisor's sign")
  H.values(tide.fmod(tide.tensor({ -7, 7 }), -3), { -1, 1 }, 0, "integer fmod")
  H.values(tide.hypot(d({ 3, 3e200 }), d({ 4, 4e200 })), { 5, 5e200 }, TOL, "hypot without overflow")
  H.values(tide.lerp(d({ 1, 1 }), d({ 3, 5 }), 0.5), { 2, 3 }, 0, "lerp with a number")
  H.values(tide.lerp(d({ 1 }), d({ 3 }), d({ 1 })), { 3 }, 0, "lerp weight 1 gives end")
  H.values(tide.logaddexp(d({ 1000, 0 }), d({ 1000, 0 })), { 1000 + math.log(2), math.log(2) }, TOL, "logaddexp")
  H.values(tide.xlogy(d({ 0, 2 }), d({ 0, math.exp(1) })), { 0, 2 }, TOL, "xlogy")
  H.values(d({ -3, 2 }):square(), { 9, 4 }, 0, "square")
  H.values(tide.addcmul(d({ 1 }), d({ 2 }), d({ 3 }), { value = 0.5 }), { 4 }, 0, "addcmul")
  H.values(tide.addcdiv(d({ 1 }), d({ 2 }), d({ 4 }), 2), { 2 }, 0, "addcdiv")
  H.values(d({ -1, 2 }):clamp_min(0), { 0, 2 }, 0, "clamp_min")
  H.values(d({ -1, 2 }):clamp_max(0), { -1, 0 }, 0, "clamp_max")
  H.values(tide.exp2(d({ 3, -1, 0.5 })), { 8, 0.5, math.sqrt(2) }, TOL, "exp2")
  H.values(d({ 1000, 0.01 }):log10(), { 3, -2 }, TOL, "log10")
  H.eq(tide.logical_xor(tide.tensor({ 1, 0, 2 }), tide.tensor({ true, false, false })):totable(),
    { false, false, true }, "logical_xor")
  local y = d({ 0.5 })
  H.eq(y:log1p_() == y, true, "log1p_ returns self")
  H.values(y, { math.log(1.5) }, TOL, "in place")
  H.eq(tide.atan(tide.tensor({ 1, 2 })).dtype, "float32", "integers give float32")
end)

H.test("special values", function()
  local x = tide.tensor({ 0 / 0, 1 / 0, -1 / 0, 1 })
  H.eq(x:isnan():totable(), { true, false, false, false }, "isnan")
  H.eq(x:isinf():totable(), { false, true, true, false }, "isinf")
  H.eq(tide.isfinite(x):totable(), { false, false, false, true }, "isfinite")
  local big = 3.4028234663852886e38
  H.values(tide.nan_to_num(x), { 0, big, -big, 1 }, 0, "nan_to_num defaults")
  H.values(x:nan_to_num(1, 2, -2), { 1, 2, -2, 1 }, 0, "positional")
  H.values(tide.nan_to_num(x, { posinf = 5 }), { 0, 5, -big, 1 }, 0, "options")
  -- PyTorch's isclose/allclose/equal: |a - b| <= atol + rtol |b|, infinities equal to
  -- themselves, NaN only with equal_nan; equal wants the same shape
  local a, b = tide.tensor({ 1, 1 / 0, 0 / 0 }), tide.tensor({ 1 + 1e-6, 1 / 0, 0 / 0 })
  H.eq(tide.isclose(a, b):totable(), { true, true, false }, "isclose")
  H.eq(a:isclose(b, 1e-5, 1e-8, true):totable(), { true, true, true }, "isclose equal_nan")
  H.eq(tide.allclose(a, b), false, "allclose: NaN")
  H.eq(a:allclose(b, 1e-5, 1e-8, true), true, "allclose equal_nan")
  H.eq(tide.equal(tide.ones(2), tide.ones(2)), true, "equal")
  H.eq(tide.ones(2):equal(tide.ones(3)), false, "equal: shapes differ")
end)

H.test("activations: known answers", function()
  local x = d({ -2, -0.5, 0.5, 2 })
  local function map(f) return H.map(x:totable(), f) end
  local function elu(v, a) return v > 0 and v or a * (math.exp(v) - 1) end
  H.values(F.elu(x, 0.5), map(function(v) return elu(v, 0.5) end), TOL, "elu")
  H.values(F.selu(x), map(function(v) return 1.0507009873554805 * elu(v, 1.6732632423543772) end), TOL, "selu")
  H.values(F.celu(x, 2), map(function(v) return v > 0 and v or 2 * (math.exp(v / 2) - 1) end), TOL, "celu")
  H.values(F.softplus(x, { beta = 2 }), map(function(v) return math.log(1 + math.exp(2 * v)) / 2 end), TOL,
    "softplus")
  H.values(F.mish(x), map(function(v) local sp = math.log(1 + math.exp(v)) return v * (math.exp(2 * sp) - 1) /
    (math.exp(2 * sp) + 1) end), TOL, "mish")
  H.values(F.softsign(x), map(function(v) return v / (1 + math.abs(v)) end), TOL, "softsign")
  H.values(F.hardtanh(x, -1, 1), { -1, -0.5, 0.5, 1 }, 0, "hardtanh")
  H.values(F.relu6(d({ -1, 3, 7 })), { 0, 3, 6 }, 0, "relu6")
  H.values(F.leaky_relu(x, 0.1), { -0.2, -0.05, 0.5, 2 }, TOL, "leaky_relu")
  H.values(F.hardswish(d({ -4, 1, 4 })), { 0, 4 / 6, 4 }, TOL, "hardswish")
  H.values(F.hardsigmoid(d({ -4, 0, 4 })), { 0, 0.5, 1 }, TOL, "hardsigmoid")
  H.values(F.logsigmoid(d({ 0, 40, -40 })), { -math.log(2), -math.exp(-40), -40 - math.exp(-40) }, TOL,
    "logsigmoid: tiny values stay")
  H.values(F.elu(d({ -1e-10 })), { -1e-10 + 5e-21 }, TOL, "elu keeps small values (expm1)")
  H.values(F.glu(d({ { 1, 2, 0, 100 } })), { { 0.5, 2 } }, TOL, "glu along the last dim")
  H.values(F.glu(d({ { 1 }, { 0 } }), 1), { { 0.5 } }, TOL, "glu along dim 1")
end)

H.test("modules", function()
  local x = d({ -2, -0.5, 0.5, 2 })
  local cases = {
    { nn.ELU(0.5), F.elu(x, 0.5) }, { nn.SELU(), F.selu(x) }, { nn.CELU({ alpha = 2 }), F.celu(x, 2) },
    { nn.Softplus(2, 3), F.softplus(x, 2, 3) }, { nn.Mish(), F.mish(x) }, { nn.Softsign(), F.softsign(x) },
    { nn.Hardtanh(-0.5, 0.5), F.hardtanh(x, -0.5, 0.5) }, { nn.ReLU6(), F.relu6(x) },
    { nn.Hardswish(), F.hardswish(x) }, { nn.Hardsigmoid(), F.hardsigmoid(x) },
    { nn.LogSigmoid(), F.logsigmoid(x) }, { nn.GLU(), F.glu(x) },
  }
  for _, c in ipairs(cases) do
    H.values(c[1]:forward(x), c[2]:totable(), 0, tostring(c[1]))
  end
  H.eq(tostring(nn.Hardtanh({ min_val = 0 })), "Hardtanh(min_val=0, max_val=1.0)", "repr")
  H.eq(tostring(nn.ELU()), "ELU(alpha=1.0)", "default")
end)

H.test("jit equals eager bitwise on the CPU", function()
  local x, y = tide.randn(3000), tide.rand(3000) + 0.5
  local fs = {
    trig = function(a) return tide.atan2(a:sin(), a:cos()) + a:tan():atan() + a:tanh():asin() end,
    hyper = function(a) return a:sinh() - a:cosh() + a:expm1() + a:abs():log1p() + a:abs():log2() end,
    rounding = function(a) return a:trunc() + a:frac() + tide.fmod(a * 7, 3) end,
    composites = function(a) return tide.hypot(a, y) + tide.logaddexp(a, y) + tide.xlogy(y, y) +
      tide.lerp(a, y, 0.3) + tide.addcdiv(a, a, y) end,
    acts = function(a) return F.selu(a) + F.mish(a) + F.hardswish(a) + F.logsigmoid(a) + F.softplus(a) end,
  }
  for name, f in pairs(fs) do
    H.eq(tide.equal(tide.jit(f)(x), f(x)), true, name .. " in a jit function")
  end
end)

-- Eager runs pow by one 2 as x * x; the fused kernel must give the same bits (SLEEF's pow is
-- within 1 ulp, not exact), also in the gradient of x^3 (3 x^2) and for pow_ in place.
H.test("pow by 2: jit, gradients and pow_ equal eager bitwise", function()
  tide.manual_seed(7)
  local x0 = tide.randn(1000)
  H.eq(tide.equal(tide.jit(function(x) return x:pow(2) end)(x0), x0 * x0), true)
  local e = tide.full({1000}, 2.0)
  H.eq(tide.equal(tide.pow(x0, e), x0 * x0), true)
  local y = x0:clone()
  y:pow_(e)
  H.eq(tide.equal(y, x0 * x0), true)
  local function grad(x)
    x:abs():pow(3):sum():backward()
    return x.grad
  end
  local eager = grad(x0:clone():requires_grad_())
  local jitted = tide.jit(grad)
  jitted(x0:clone():requires_grad_())
  H.eq(tide.equal(jitted(x0:clone():requires_grad_()), eager), true)
end)

H.test("errors", function()
  H.raises(function() return tide.log1p("x") end, "log1p")
  H.raises(function() return tide.atan2(tide.ones(2), tide.ones(3)) end, "atan2", "[2]", "[3]")
  H.raises(function() return tide.fmod(tide.ones(2, { dtype = "bool" }), true) end, "fmod", "bool")
  H.raises(function() return F.glu(tide.ones(3)) end, "glu", "even")
  H.raises(function() return F.glu(tide.ones(2), 0) end, "glu", "out of range")
  H.raises(function() return F.glu(tide.ones(2), 4.6e18) end, "glu", "must be an integer")
  H.raises(function() return F.hardtanh(tide.ones(2), 1, 0) end, "hardtanh", "min_val")
  H.raises(function() return F.elu(tide.ones(2, { dtype = "int32" })) end, "elu", "int32")
  H.raises(function() return F.softplus(tide.ones(2), { beta = "x" }) end, "softplus", "beta")
  H.raises(function() return tide.lerp(tide.ones(2), tide.ones(2), "w") end, "lerp")
  H.raises(function() return nn.ELU({ beta = 1 }) end, "ELU", "beta")
  H.raises(function() return tide.addcmul(tide.ones(2), tide.ones(3), tide.ones(2)) end, "addcmul")
end)

if tide.vulkan.available() then
  H.test("Vulkan against the CPU", function()
    local x = tide.randn(4, 257) * 2
    local p = x:abs() + 0.1
    -- the shaders' ulps measured by test_math_ulps (common.glsl): at most 15 ulps (expm1 on
    -- [-20, 20]; 4 here) of float32, 2e-6 relative; composites add a few roundings: 1e-5
    local function vk(f, ...)
      local args, vargs = { ... }, {}
      for i, a in ipairs(args) do vargs[i] = a:to("vulkan") end
      H.values(f(table.unpack(vargs)):to("cpu"), f(table.unpack(args)):totable(), 1e-5,
        "vulkan " .. debug.getinfo(f, "S").linedefined)
    end
    for _, f in ipairs({ tide.log1p, tide.expm1, tide.log2, tide.atan, tide.sinh, tide.cosh,
                         tide.trunc, tide.frac, tide.square }) do
      vk(function(a) return f(a) end, p)
    end
    vk(function(a) return tide.asin(a / 5):add(tide.acos(a / 5)) end, x)
    vk(tide.atan2, x, p)
    vk(tide.fmod, x, p)
    vk(tide.hypot, x, p)
    vk(tide.logaddexp, x, p)
    vk(tide.xlogy, x, p)
    vk(function(a, b) return tide.lerp(a, b, 0.3) end, x, p)
    for _, f in ipairs({ F.elu, F.selu, F.celu, F.softplus, F.mish, F.softsign, F.hardtanh,
                         F.relu6, F.leaky_relu, F.hardswish, F.hardsigmoid, F.logsigmoid }) do
      vk(function(a) return f(a) end, x)
    end
    vk(F.glu, tide.randn(4, 258))
    -- a jit function of them on Vulkan (fused where the shaders can) against the CPU
    local f = tide.jit(function(a, b)
      return tide.atan2(a, b) + a:tanh():asin() + b:log1p() + a:expm1() + a:sinh() +
        tide.fmod(a, b) + F.mish(a) + tide.hypot(a, b) + F.hardswish(a)
    end)
    H.values(f(x:to("vulkan"), p:to("vulkan")):to("cpu"), f(x, p):totable(), 1e-5, "jit on Vulkan")
  end)
else
  print("test_math.lua: no Vulkan device, its test is skipped")
end

H.done()
