-- test_autograd_higher.lua — higher-order gradients from Lua: tide.autograd.grad (values, options,
-- errors), backward with create_graph, tide.autograd.gradgradcheck on a table of the
-- differentiable tide functions and nn.functional composites (every name must exist), a
-- Hessian-vector product of a small MLP against finite differences of its gradient, a gradient
-- penalty under tide.jit equal to eager, and no tensor left alive afterwards.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local F = require "tide.nn.functional"
local nn = require "tide.nn"
local autograd = tide.autograd

local function f64(t, grad)
  return tide.tensor(t, { dtype = "float64", requires_grad = grad ~= false })
end

-- Deterministic float64 values in [lo, hi) (a fixed sequence, so every run checks the same
-- points) of the given shape; positive = away from 0 with both signs when sign is set.
local seq = 0
local function vals(shape, lo, hi, sign, grad)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 1, n do
    seq = seq + 1
    local u = (math.sin(seq * 12.9898) * 43758.5453) % 1
    v[i] = lo + (hi - lo) * u
    if sign and (seq % 2 == 0) then v[i] = -v[i] end
  end
  return tide.tensor(v, { dtype = "float64" }):reshape(shape):requires_grad_(grad ~= false)
end
local function R(...) return vals({ ... }, -2, 2) end            -- general
local function P(...) return vals({ ... }, 0.5, 2) end           -- positive
local function NZ(...) return vals({ ... }, 0.5, 2, true) end    -- away from 0
local function C(...) return vals({ ... }, -2, 2, false, false) end -- a constant

H.test("grad: values, create_graph, non-leaf inputs, several outputs", function()
  local x = f64({ 1, -2, 0.5 })
  local y = (x ^ 3):sum()
  local g = autograd.grad(y, x, { create_graph = true })
  H.values(g, { 3, 12, 0.75 }, 1e-12, "3x^2")
  H.eq(g.requires_grad, true, "in a graph")
  local h = autograd.grad(g:sum(), x)
  H.values(h, { 6, -12, 3 }, 1e-12, "6x")
  H.eq(h.requires_grad, false)
  H.eq(x.grad, nil, "grad touches no .grad")
  -- a non-leaf input, two outputs (one given a gradient), and two inputs as two results
  local u = x * 2
  local a, b = (u * u):sum(), x:exp()
  local gu = autograd.grad(a, u, { retain_graph = true })
  H.values(gu, { 4, -8, 2 }, 1e-12, "d sum(u^2)/du = 2u")
  local v = tide.tensor({ 1, 0, 2 }, { dtype = "float64" })
  local gx, gu2 = autograd.grad({ a, b }, { x, u }, { grad_outputs = { nil, v } })
  -- d/dx: 8x + v e^x; d/du: 2u (b does not depend on u)
  H.values(gx, { 8 + math.exp(1), -16, 4 + 2 * math.exp(0.5) }, 1e-12, "two outputs")
  H.values(gu2, { 4, -8, 2 }, 1e-12, "the non-leaf too")
end)

H.test("grad: allow_unused and the errors", function()
  local x, z = f64({ 1, 2 }), f64({ 3, 4 })
  local y = (x * x):sum()
  H.raises(function() return autograd.grad(y, { x, z }, { retain_graph = true }) end,
    "input 2 ([2] float64) was not used")
  local gx, gz = autograd.grad(y, { x, z }, { allow_unused = true, retain_graph = true })
  H.values(gx, { 2, 4 })
  H.eq(gz, nil, "nil for the unused input")
  H.raises(function() return autograd.grad(y, tide.ones(2), { retain_graph = true }) end,
    "does not require grad")
  H.raises(function() return autograd.grad(x * 2, x) end, "implicitly")
  H.raises(function() return autograd.grad(y, x, { create = true }) end, "create")
  H.raises(function() return autograd.grad(y, x, { create_graph = 1 }) end, "boolean")
  H.raises(function() return autograd.grad(y, "x") end, "inputs must be a tensor")
  autograd.grad(y, x)
  H.raises(function() return autograd.grad(y, x) end, "second time")
end)

H.test("backward with create_graph: x.grad is in a graph; accumulation is out of place", function()
  local x = f64({ 1, -2, 0.5 })
  local y = (x ^ 3):sum()
  y:backward({ create_graph = true })
  H.values(x.grad, { 3, 12, 0.75 }, 1e-12)
  H.eq(x.grad.requires_grad, true)
  local first = x.grad
  x.grad:sum():backward()
  H.values(x.grad, { 9, 0, 3.75 }, 1e-12, "3x^2 + 6x")
  H.values(first, { 3, 12, 0.75 }, 1e-12, "the first grad was not written in place")
  -- tide.backward too
  x.grad = nil
  tide.backward((x * x):sum(), nil, { create_graph = true })
  H.values(autograd.grad(x.grad:sum(), x), { 2, 2, 2 }, 1e-12)
  x.grad = nil -- breaks the cycle x -> grad -> graph -> x (PyTorch has the same)
end)

-- Every differentiable function of tide (and the main nn.functional composites), second
-- derivatives against finite differences of the gradient. Linear ops are squared (or multiplied
-- by a nonlinear term) so the gradient reaching them depends on the input and their formula is
-- differentiated with a gradient inside the graph.
local function sq(y) return y * y end
local idx = function(t) return tide.tensor(t, { dtype = "int64" }) end
local OPS = {
  { "neg", function(x) return sq(tide.neg(x)) end, { R(2, 3) } },
  { "abs", function(x) return sq(tide.abs(x)) * x end, { NZ(2, 3) } },
  { "exp", tide.exp, { R(2, 3) } },
  { "log", tide.log, { P(2, 3) } },
  { "sqrt", tide.sqrt, { P(2, 3) } },
  { "rsqrt", tide.rsqrt, { P(2, 3) } },
  { "sin", tide.sin, { R(2, 3) } },
  { "cos", tide.cos, { R(2, 3) } },
  { "tanh", tide.tanh, { R(2, 3) } },
  { "sigmoid", tide.sigmoid, { R(2, 3) } },
  { "erf", tide.erf, { R(2, 3) } },
  { "relu", function(x) return sq(tide.relu(x)) end, { NZ(2, 3) } },
  { "reciprocal", tide.reciprocal, { NZ(2, 3) } },
  { "floor", function(x) return tide.floor(x) * x * x end, { NZ(2, 3) } },
  { "ceil", function(x) return tide.ceil(x) * x * x end, { NZ(2, 3) } },
  { "round", function(x) return tide.round(x) * x * x end, { NZ(2, 3) } },
  { "sign", function(x) return tide.sign(x) * x * x end, { NZ(2, 3) } },
  { "clamp", function(x) return sq(tide.clamp(x, -1, 1)) end, { R(2, 3) } },
  { "add", function(a, b) return sq(tide.add(a, b)) end, { R(2, 3), R(3) } },
  { "sub", function(a, b) return sq(tide.sub(a, b)) end, { R(2, 3), R(2, 1) } },
  { "mul", tide.mul, { R(2, 3), R(2, 3) } },
  { "div", tide.div, { R(2, 3), NZ(2, 3) } },
  { "pow", tide.pow, { P(2, 3), R(2, 3) } },
  { "maximum", function(a, b) return sq(tide.maximum(a, b)) end, { R(2, 3), R(2, 3) } },
  { "minimum", function(a, b) return sq(tide.minimum(a, b)) end, { R(2, 3), R(2, 3) } },
  { "remainder", function(a, b) return sq(tide.remainder(a, b)) end, { R(2, 3), NZ(2, 3) } },
  { "floor_divide", function(a, b) return tide.floor_divide(a, b) * a * b end, { R(2, 3), NZ(2, 3) } },
  { "where", function(a, b) return sq(tide.where(a:gt(0), a, b)) end, { NZ(2, 3), R(2, 3) } },
  { "masked_fill", function(x) return sq(tide.masked_fill(x, x:gt(0), 0.5)) end, { NZ(2, 3) } },
  { "sum", function(x) return sq(tide.sum(x, 2)) end, { R(2, 3) } },
  { "mean", function(x) return sq(tide.mean(x, 1)) end, { R(2, 3) } },
  { "prod", function(x) return tide.prod(x, 2) end, { NZ(2, 3) } },
  { "max", function(x) return sq((tide.max(x, 2))) end, { R(2, 3) } },
  { "min", function(x) return sq((tide.min(x, 1))) end, { R(2, 3) } },
  { "cumsum", function(x) return sq(tide.cumsum(x, 2)) end, { R(2, 3) } },
  { "logsumexp", function(x) return tide.logsumexp(x, 2) end, { R(2, 3) } },
  { "topk", function(x) return sq((tide.topk(x, 2))) end, { R(2, 4) } },
  { "reshape", function(x) return sq(tide.reshape(x, { 3, 2 })) end, { R(2, 3) } },
  { "permute", function(x) return sq(tide.permute(x, 2, 1)) * x:t() end, { R(2, 3) } },
  { "transpose", function(x) return sq(tide.transpose(x, 1, 2)) end, { R(2, 3) } },
  { "expand", function(x) return sq(tide.expand(x, 2, 3)) end, { R(1, 3) } },
  { "narrow", function(x) return sq(tide.narrow(x, 2, 2, 2)) end, { R(2, 3) } },
  { "select", function(x) return sq(tide.select(x, 1, 2)) end, { R(2, 3) } },
  { "cat", function(a, b) return sq(tide.cat({ a, b }, 1)) end, { R(2, 3), R(1, 3) } },
  { "stack", function(a, b) return sq(tide.stack({ a, b }, 2)) end, { R(2, 3), R(2, 3) } },
  { "pad", function(x) return sq(tide.pad(x, { 1, 2 })) end, { R(2, 3) } },
  { "flip", function(x) return sq(tide.flip(x, 2)) * x end, { R(2, 3) } },
  { "gather", function(x) return sq(tide.gather(x, 2, idx({ { 1, 3 }, { 2, 2 } }))) end, { R(2, 3) } },
  { "index_select", function(x) return sq(tide.index_select(x, 2, idx({ 3, 1, 3 }))) end, { R(2, 3) } },
  { "scatter_add", function(x, s) return sq(tide.scatter_add(x, 2, idx({ { 1, 3 }, { 2, 2 } }), s)) end,
    { R(2, 3), R(2, 2) } },
  { "embedding", function(w) return sq(tide.embedding(idx({ 2, 1, 2 }), w)) end, { R(3, 2) } },
  { "matmul", tide.matmul, { R(2, 3), R(3, 2) } },
  { "linear", function(x, w, b) return sq(tide.linear(x, w, b)) end, { R(2, 3), R(2, 3), R(2) } },
  { "conv2d", function(x, w) return sq(tide.conv2d(x, w)) end, { R(1, 1, 3, 3), R(1, 1, 2, 2) } },
  { "max_pool2d", function(x) return sq((tide.max_pool2d(x, 2))) end, { R(1, 1, 2, 4) } },
  { "avg_pool2d", function(x) return sq(tide.avg_pool2d(x, 2)) end, { R(1, 1, 2, 4) } },
  { "adaptive_avg_pool2d", function(x) return sq(tide.adaptive_avg_pool2d(x, { 1, 2 })) end,
    { R(1, 1, 2, 3) } },
  { "softmax", function(x) return tide.softmax(x, 2) end, { R(2, 3) } },
  { "log_softmax", function(x) return tide.log_softmax(x, 2) end, { R(2, 3) } },
  { "layer_norm", function(x, w, b) return tide.layer_norm(x, { 3 }, w, b) end, { R(2, 3), R(3), R(3) } },
  { "batch_norm", function(x, w, b) return tide.batch_norm(x, nil, nil, w, b, true) end,
    { R(4, 2), R(2), R(2) } },
  { "gelu", tide.gelu, { R(2, 3) } },
  { "silu", tide.silu, { R(2, 3) } },
  { "mse_loss", tide.mse_loss, { R(2, 3), R(2, 3) } },
  { "cross_entropy", function(x) return tide.cross_entropy(x, idx({ 3, 1 })) end, { R(2, 3) } },
  { "nll_loss", function(x) return tide.nll_loss(x:log_softmax(2), idx({ 2, 1 })) end, { R(2, 3) } },
  { "binary_cross_entropy_with_logits", tide.binary_cross_entropy_with_logits, { R(2, 3), P(2, 3) } },
  { "F.elu", function(x) return F.elu(x) end, { NZ(2, 3) } },
  { "F.softplus", function(x) return F.softplus(x) end, { R(2, 3) } },
  { "F.leaky_relu", function(x) return sq(F.leaky_relu(x, 0.1)) end, { NZ(2, 3) } },
  { "F.relu6", function(x) return sq(F.relu6(x)) end, { NZ(2, 3) } },
  { "F.rms_norm", function(x, w) return F.rms_norm(x, { 3 }, w) end, { R(2, 3), R(3) } },
  { "F.l1_loss", function(a, b) return F.l1_loss(a, b) * a:sum() end, { R(2, 3), R(2, 3) } },
}

H.test("gradgradcheck of every differentiable function in the table", function()
  for _, case in ipairs(OPS) do
    local name, fn, inputs = case[1], case[2], case[3]
    -- the table names real functions (a rename or removal fails here)
    local owner, key = tide, name
    if name:sub(1, 2) == "F." then owner, key = F, name:sub(3) end
    H.eq(type(owner[key]), "function", name .. " exists")
    -- step 1e-6 in float64: the first gradients are exact to ~1e-15 relative, so finite
    -- differences of them are good to ~1e-9; 1e-6 leaves room for the curvature of exp/pow.
    local ok, err = pcall(autograd.gradgradcheck, fn, inputs, { eps = 1e-6, atol = 1e-6, rtol = 1e-5 })
    H.ok(ok, name .. ": " .. tostring(err))
    ok, err = pcall(autograd.gradcheck, fn, inputs, { eps = 1e-6, atol = 1e-6, rtol = 1e-5 })
    H.ok(ok, name .. " (gradcheck): " .. tostring(err))
  end
  print(("test_autograd_higher: %d functions gradgradchecked"):format(#OPS))
end)

H.test("gradgradcheck catches a wrong second derivative and refuses attention's", function()
  -- a gradient that is right to first order but detached: its own gradient is wrong
  local x = R(3)
  local wrong = function(a) return a * a:detach() end -- d/da = a (should be 2a)
  H.raises(function() return autograd.gradcheck(wrong, { x }) end, "gradcheck: input 1")
  local q = R(1, 2, 4)
  local attn = function(a) return tide.scaled_dot_product_attention(a, a, a) end
  H.raises(function() return autograd.gradgradcheck(attn, { q }) end,
    "double backward of scaled_dot_product_attention is not supported")
  H.raises(function() return autograd.gradcheck(tide.exp, { tide.randn(3, { requires_grad = true }) }) end,
    "float64")
end)

-- A Hessian-vector product of a Linear-tanh-Linear MLP under MSE: grad of <grad_w L, v> with
-- create_graph, against central differences of the gradient along v.
H.test("Hessian-vector product of an MLP against finite differences of the gradient", function()
  tide.manual_seed(3)
  local m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
  m:double()
  local params = m:parameters()
  local x, y = tide.randn(5, 3, { dtype = "float64" }), tide.randn(5, 2, { dtype = "float64" })
  local vs = {}
  for i, p in ipairs(params) do vs[i] = tide.randn(p.shape, { dtype = "float64" }) end
  local function grads()
    return table.pack(autograd.grad(F.mse_loss(m(x), y), params, { create_graph = true }))
  end
  local g = grads()
  local dot = tide.zeros({}, { dtype = "float64" })
  for i = 1, #params do dot = dot + (g[i] * vs[i]):sum() end
  local hv = table.pack(autograd.grad(dot, params))
  -- (grad(w + eps v) - grad(w - eps v)) / 2 eps: truncation O(eps^2) ~ 1e-10, rounding
  -- ~1e-16 / 1e-5 ~ 1e-11 relative: 1e-7 is safe and far below any real error
  local eps = 1e-5
  local function shifted(s)
    tide.no_grad(function()
      for i, p in ipairs(params) do p:add_(vs[i] * s) end
    end)
    local r = grads()
    tide.no_grad(function()
      for i, p in ipairs(params) do p:sub_(vs[i] * s) end
    end)
    return r
  end
  local gp, gm = shifted(eps), shifted(-eps)
  for i = 1, #params do
    local fd = (gp[i] - gm[i]) / (2 * eps)
    local err = (hv[i] - fd):abs():max():item()
    H.ok(err < 1e-7, ("parameter %d: |Hv - finite differences| = %.3g"):format(i, err))
    H.ok(hv[i]:abs():max():item() > 1e-3, "a non-trivial Hv")
  end
end)

-- A gradient penalty (WGAN-GP): the gradient of a critic with respect to its input, taken with
-- create_graph, penalised, and the whole thing differentiated into the critic's parameters.
H.test("a gradient penalty under tide.jit equals eager", function()
  local function make()
    tide.manual_seed(5)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
  end
  local function step(m, x)
    local xr = x:clone():requires_grad_()
    local out = m(xr):sum()
    local g = autograd.grad(out, xr, { create_graph = true })
    local penalty = ((g * g):sum(2):sqrt() - 1):pow(2):mean()
    penalty:backward()
    return penalty
  end
  local m1, m2 = make(), make()
  local jitted = tide.jit(step)
  local stats = tide.jit_stats()
  for call = 1, 3 do
    local x = tide.randn(4, 3)
    local want = step(m1, x)
    local got = jitted(m2, x)
    -- float32; the jit fuses the same ops in another order: a few ulps
    H.near(got:item(), want:item(), 1e-5, "penalty, call " .. call)
    local p1, p2 = m1:parameters(), m2:parameters()
    for i = 1, #p1 do
      -- the last bias does not move the input gradient: no grad in either (as PyTorch)
      H.eq(p2[i].grad == nil, p1[i].grad == nil, "parameter " .. i .. " has a grad in both or neither")
      if i == #p1 then
        H.eq(p1[i].grad, nil, "the last bias gets no gradient")
        break
      end
      local err = (p1[i].grad - p2[i].grad):abs():max():item()
      H.ok(err <= 1e-5 * math.max(1, p1[i].grad:abs():max():item()),
        ("call %d parameter %d grad: jit vs eager %.3g"):format(call, i, err))
    end
  end
  local now = tide.jit_stats()
  H.ok(now.hits > stats.hits, "a traced plan was replayed")
  H.eq(now.fallbacks - stats.fallbacks, 0, "no fallback to eager")
  H.eq(now.breaks - stats.breaks, 0, "no graph break")
end)

-- The recorded backward runs through the dispatcher, so a second derivative on Vulkan is the
-- same ops on that device; against the CPU in float32 (a few ulps of tanh's shader).
local vk_ok, vk_why = tide.vulkan.available()
if vk_ok then
  H.test("second derivatives on vulkan equal the cpu", function()
    local function hess_diag_ish(x)
      local g = autograd.grad((x:tanh() * x):sum(), x, { create_graph = true })
      return autograd.grad((g * g):sum(), x)
    end
    local v = { 1.0, -2.0, 0.5, 0.25 }
    local got = hess_diag_ish(tide.tensor(v):to("vulkan"):requires_grad_())
    local want = hess_diag_ish(tide.tensor(v):requires_grad_())
    H.eq(got.device, "vulkan")
    H.values(got:to("cpu"), want:totable(), 1e-5)
  end)
else
  print("test_autograd_higher: vulkan skipped: " .. tostring(vk_why))
end

H.test("graphs made with create_graph are freed", function()
  local before = tide.collect().in_use
  do
    local x = tide.randn(50, { dtype = "float64", requires_grad = true })
    for _ = 1, 3 do
      local g = autograd.grad((x:tanh() * x):sum(), x, { create_graph = true })
      autograd.grad((g * g):sum(), x)
      local y = (x ^ 3):sum()
      y:backward({ create_graph = true })
      x.grad:sum():backward()
      x.grad = nil
    end
  end
  local after = tide.collect().in_use
  H.eq(after, before, "bytes in use after the graphs are gone")
end)

H.done()
