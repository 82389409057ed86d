-- tide.autograd — torch.autograd's functions from Lua:
--   tide.autograd.grad(outputs, inputs [, {grad_outputs=, retain_graph=, create_graph=,
--                      allow_unused=}])  -> one gradient per input (C: tide_autograd_grad)
--   tide.autograd.set_backward_hooks(params, on_ready, on_done)  (C: tide_set_backward_hooks)
--   tide.autograd.gradcheck(fn, inputs [, {eps=, atol=, rtol=}])
--   tide.autograd.gradgradcheck(fn, inputs [, {eps=, atol=, rtol=, grad_outputs=}])
-- The checks compare autograd with central finite differences in float64: every input that
-- requires grad must be a contiguous float64 CPU tensor. fn(inputs...) returns a tensor or
-- several (a list or multiple values); the check differentiates L = sum_k sum(out_k * W_k)
-- with fixed pseudo-random weights W_k of both signs, so one gradient checks every output.
local tide = require "tide"

local M = {}

M.grad = tide._autograd_grad
-- set_backward_hooks(params, on_ready, on_done): on_ready(i) as soon as params[i].grad holds
-- all of a backward pass's contributions (while the rest of backward still runs: data-parallel
-- training starts reducing a bucket there), on_done() after the pass; nil removes them.
M.set_backward_hooks = tide._set_backward_hooks

-- fn's results as a list (nil results, e.g. unused gradients, are dropped).
local function results(fn, inputs)
  local r = table.pack(fn(table.unpack(inputs)))
  if r.n == 1 and type(r[1]) == "table" and getmetatable(r[1]) == nil then
    r = r[1]
    r.n = #r
  end
  local list = {}
  for i = 1, r.n do
    if r[i] ~= nil then
      list[#list + 1] = r[i]
    end
  end
  return list
end

-- Weights in [-1, -0.25] and [0.25, 1], the same for every call with the same shapes (a small
-- linear congruential sequence, so the checks depend on no global random state).
local function weights(outs)
  local state = 12345
  local w = {}
  for k, o in ipairs(outs) do
    local n = o:numel()
    local vals = {}
    for i = 1, n do
      state = (state * 1103515245 + 12345) % 2147483648
      local u = state / 2147483648
      vals[i] = (u < 0.5 and -1 or 1) * (0.25 + 1.5 * math.abs(u - 0.5))
    end
    w[k] = tide.tensor(vals, { dtype = "float64" }):reshape(o.shape)
  end
  return w
end

-- L = sum_k sum(out_k * W_k), a float64 scalar (0 when fn gave no output).
local function weighted_sum(outs, w)
  local total = tide.zeros({}, { dtype = "float64" })
  for k, o in ipairs(outs) do
    total = total + (o:double() * w[k]):sum()
  end
  return total
end

local function check_input(i, x)
  if x.dtype ~= "float64" or x.device ~= "cpu" or not x:is_contiguous() then
    error(("gradcheck: input %d requires grad, so it must be a contiguous float64 CPU "
      .. "tensor, got [%s] %s on %s%s"):format(i, table.concat(x.shape, ", "), x.dtype,
      x.device, x:is_contiguous() and "" or " (strided)"), 3)
  end
end

local function parse_options(opts, name)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "eps" and k ~= "atol" and k ~= "rtol" and k ~= "grad_outputs" then
      error(("%s: unknown option '%s' (eps, atol, rtol%s)"):format(name, tostring(k),
        name == "gradgradcheck" and ", grad_outputs" or ""), 3)
    end
  end
  return opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
end

-- The analytic dL/dx_i of every input that requires grad (zeros where none reaches it).
local function analytic(fn, inputs, checked, w)
  local outs = results(fn, inputs)
  local L = weighted_sum(outs, w)
  local wrt = {}
  for k, i in ipairs(checked) do
    wrt[k] = inputs[i]
  end
  local gs = L.requires_grad and table.pack(M.grad(L, wrt, { allow_unused = true })) or {}
  local out = {}
  for k, i in ipairs(checked) do
    out[k] = gs[k] or tide.zeros(inputs[i].shape, { dtype = "float64" })
  end
  return out
end

-- The central difference of L at element e of input x (x moved in place, then restored).
local function numeric_at(fn, inputs, w, flat, e, eps)
  local x0 = flat[e]:item()
  tide.no_grad(function() flat[e] = x0 + eps end)
  local plus = weighted_sum(results(fn, inputs), w):item()
  tide.no_grad(function() flat[e] = x0 - eps end)
  local minus = weighted_sum(results(fn, inputs), w):item()
  tide.no_grad(function() flat[e] = x0 end)
  return (plus - minus) / (2 * eps)
end

-- gradcheck(fn, inputs [, {eps = 1e-6, atol = 1e-5, rtol = 1e-3}]): true, or an error naming the
-- input, the element and both values. fn runs with grad mode on (gradgradcheck's fn takes a
-- gradient inside); the inputs keep their values.
function M.gradcheck(fn, inputs, opts)
  local eps, atol, rtol = parse_options(opts, "gradcheck")
  local checked = {}
  for i, x in ipairs(inputs) do
    if tide.is_tensor(x) and x.requires_grad then
      check_input(i, x)
      checked[#checked + 1] = i
    end
  end
  if #checked == 0 then
    error("gradcheck: no input requires grad", 2)
  end
  local w = weights(results(fn, inputs))
  local got = analytic(fn, inputs, checked, w)
  for k, i in ipairs(checked) do
    local x = inputs[i]
    local flat = x:detach():reshape(-1)
    local g = got[k]:reshape(-1)
    for e = 1, x:numel() do
      local num = numeric_at(fn, inputs, w, flat, e, eps)
      local ana = g[e]:item()
      if math.abs(ana - num) > atol + rtol * math.abs(num) or ana ~= ana then
        error(("gradcheck: input %d element %d: autograd %.10g, finite differences %.10g "
          .. "(atol %g, rtol %g)"):format(i, e, ana, num, atol, rtol), 2)
      end
    end
  end
  return true
end

-- gradgradcheck(fn, inputs [, {eps, atol, rtol, grad_outputs}]): gradcheck of the function
-- (inputs..., v) -> grad(fn(inputs), inputs, {grad_outputs = v, create_graph = true}), so the
-- second derivatives (and the gradient's dependence on v) are checked against finite
-- differences of the gradient. v: grad_outputs, or fixed weights of fn's outputs' shapes.
function M.gradgradcheck(fn, inputs, opts)
  opts = opts or {}
  local eps, atol, rtol = parse_options(opts, "gradgradcheck")
  local n = #inputs
  local wrt = {}
  for i, x in ipairs(inputs) do
    if tide.is_tensor(x) and x.requires_grad then
      check_input(i, x)
      wrt[#wrt + 1] = i
    end
  end
  if #wrt == 0 then
    error("gradgradcheck: no input requires grad", 2)
  end
  local outs = results(fn, inputs)
  local vs = opts.grad_outputs or weights(outs)
  local all = { table.unpack(inputs, 1, n) }
  for k, o in ipairs(outs) do
    local v = vs[k]:double():clone()
    v.requires_grad = o.requires_grad -- an output outside the graph has no gradient to check
    all[n + k] = v
  end
  local function grad_of_fn(...)
    local args = { ... }
    local os = results(fn, { table.unpack(args, 1, n) })
    local roots, gouts = {}, {}
    for k, o in ipairs(os) do
      if o.requires_grad then
        roots[#roots + 1] = o
        gouts[#gouts + 1] = args[n + k]
      end
    end
    local xs = {}
    for k, i in ipairs(wrt) do
      xs[k] = args[i]
    end
    if #roots == 0 then
      return {}
    end
    local gs = table.pack(M.grad(roots, xs, { grad_outputs = gouts, create_graph = true,
      allow_unused = true }))
    local list = {}
    for k = 1, #xs do
      if gs[k] then
        list[#list + 1] = gs[k]
      end
    end
    return list
  end
  return M.gradcheck(grad_of_fn, all, { eps = eps, atol = atol, rtol = rtol })
end

return M
