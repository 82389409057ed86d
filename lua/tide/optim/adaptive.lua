-- tide.optim's per-coordinate adaptive optimizers with PyTorch 1.13's update formulas and
-- defaults: RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam. tide.optim installs them when it
-- loads:  require("tide.optim.adaptive").install(optim, make_class)
--
-- Each update is tide ops on the parameter and its state tensors under no_grad (new value, then
-- copy_), as SGD's and Adam's. The step count is a Lua number in the state (these formulas
-- branch on it or raise constants to its power), so state_dict() holds it as a number.
local tide = require "tide"

local adaptive = {}

-- Checks opts against the defaults (unknown keys and negative values are errors) and fills them.
local function options(name, defaults, o, nonneg)
  local d = {}
  for k, v in pairs(defaults) do d[k] = v end
  for k, v in pairs(o) do
    if defaults[k] == nil then error(name .. ": unknown option '" .. tostring(k) .. "'", 4) end
    d[k] = v
  end
  for _, k in ipairs(nonneg) do
    if type(d[k]) ~= "number" or d[k] < 0 then
      error(("%s: %s must be a number >= 0, got %s"):format(name, k, tostring(d[k])), 4)
    end
  end
  return d
end

local function check_betas(name, betas)
  if type(betas) ~= "table" or type(betas[1]) ~= "number" or type(betas[2]) ~= "number"
     or not (betas[1] >= 0 and betas[1] < 1 and betas[2] >= 0 and betas[2] < 1) then
    error(name .. ": betas must be a pair {beta1, beta2} in [0, 1)", 4)
  end
end

-- grad with maximize and (coupled) weight decay applied.
local function effective_grad(p, grad, g)
  if g.maximize then grad = -grad end
  if g.weight_decay ~= 0 then grad = grad + p * g.weight_decay end
  return grad
end

function adaptive.install(optim, make_class)

-- optim.RMSprop(params, {lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
-- centered=false, maximize=false})
optim.RMSprop = make_class("RMSprop", function(o)
  local d = options("RMSprop", { lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0,
                                 momentum = 0, centered = false, maximize = false }, o,
                    { "alpha", "eps", "weight_decay", "momentum" })
  return d
end, function(p, grad, st, g)
  grad = effective_grad(p, grad, g)
  if st.step == nil then
    st.step, st.square_avg = 0, tide.zeros_like(p)
    if g.momentum > 0 then st.momentum_buffer = tide.zeros_like(p) end
    if g.centered then st.grad_avg = tide.zeros_like(p) end
  end
  st.step = st.step + 1
  local sq = st.square_avg
  sq:copy_(sq * g.alpha + grad * grad * (1 - g.alpha))
  local avg
  if g.centered then
    local ga = st.grad_avg
    ga:copy_(ga + (grad - ga) * (1 - g.alpha)) -- grad_avg.lerp_(grad, 1 - alpha)
    avg = tide.sqrt(sq - ga * ga) + g.eps
  else
    avg = tide.sqrt(sq) + g.eps
  end
  if g.momentum > 0 then
    local buf = st.momentum_buffer
    buf:copy_(buf * g.momentum + grad / avg)
    p:copy_(p - buf * g.lr)
  else
    p:copy_(p - grad / avg * g.lr)
  end
end)

-- optim.Adagrad(params, {lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
-- eps=1e-10, maximize=false})
optim.Adagrad = make_class("Adagrad", function(o)
  return options("Adagrad", { lr = 1e-2, lr_decay = 0, weight_decay = 0,
                              initial_accumulator_value = 0, eps = 1e-10, maximize = false }, o,
                 { "lr_decay", "weight_decay", "initial_accumulator_value", "eps" })
end, function(p, grad, st, g)
  grad = effective_grad(p, grad, g)
  if st.step == nil then
    st.step, st.sum = 0, tide.full_like(p, g.initial_accumulator_value)
  end
  st.step = st.step + 1
  local clr = g.lr / (1 + (st.step - 1) * g.lr_decay)
  st.sum:copy_(st.sum + grad * grad)
  p:copy_(p - grad / (tide.sqrt(st.sum) + g.eps) * clr)
end)

-- optim.Adadelta(params, {lr=1, rho=0.9, eps=1e-6, weight_decay=0, maximize=false})
optim.Adadelta = make_class("Adadelta", function(o)
  local d = options("Adadelta", { lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0,
                                  maximize = false }, o, { "rho", "eps", "weight_decay" })
  if d.rho > 1 then error("Adadelta: rho must be in [0, 1], got " .. d.rho, 3) end
  return d
end, function(p, grad, st, g)
  grad = effective_grad(p, grad, g)
  if st.step == nil then
    st.step, st.square_avg, st.acc_delta = 0, tide.zeros_like(p), tide.zeros_like(p)
  end
  st.step = st.step + 1
  local sq, acc = st.square_avg, st.acc_delta
  sq:copy_(sq * g.rho + grad * grad * (1 - g.rho))
  local delta = tide.sqrt(acc + g.eps) / tide.sqrt(sq + g.eps) * grad
  acc:copy_(acc * g.rho + delta * delta * (1 - g.rho))
  p:copy_(p - delta * g.lr)
end)

-- optim.Adamax(params, {lr=2e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0, maximize=false})
optim.Adamax = make_class("Adamax", function(o)
  local d = options("Adamax", { lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8,
                                weight_decay = 0, maximize = false }, o, { "eps", "weight_decay" })
  check_betas("Adamax", d.betas)
  return d
end, function(p, grad, st, g)
  grad = effective_grad(p, grad, g)
  local b1, b2 = g.betas[1], g.betas[2]
  if st.step == nil then
    st.step, st.exp_avg, st.exp_inf = 0, tide.zeros_like(p), tide.zeros_like(p)
  end
  st.step = st.step + 1
  local m, u = st.exp_avg, st.exp_inf
  m:copy_(m + (grad - m) * (1 - b1))
  u:copy_(tide.maximum(u * b2, tide.abs(grad) + g.eps))
  p:copy_(p - m / u * (g.lr / (1 - b1 ^ st.step)))
end)

-- optim.NAdam(params, {lr=2e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0,
-- momentum_decay=4e-3})
optim.NAdam = make_class("NAdam", function(o)
  local d = options("NAdam", { lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
                               momentum_decay = 4e-3, maximize = false }, o,
                    { "eps", "weight_decay", "momentum_decay" })
  check_betas("NAdam", d.betas)
  return d
end, function(p, grad, st, g)
  grad = effective_grad(p, grad, g)
  local b1, b2 = g.betas[1], g.betas[2]
  if st.step == nil then
    st.step, st.mu_product = 0, 1.0
    st.exp_avg, st.exp_avg_sq = tide.zeros_like(p), tide.zeros_like(p)
  end
  st.step = st.step + 1
  local t = st.step
  local mu = b1 * (1 - 0.5 * 0.96 ^ (t * g.momentum_decay))
  local mu_next = b1 * (1 - 0.5 * 0.96 ^ ((t + 1) * g.momentum_decay))
  st.mu_product = st.mu_product * mu
  local mu_product_next = st.mu_product * mu_next
  local m, v = st.exp_avg, st.exp_avg_sq
  m:copy_(m + (grad - m) * (1 - b1))
  v:copy_(v * b2 + grad * grad * (1 - b2))
  local denom = tide.sqrt(v / (1 - b2 ^ t)) + g.eps
  p:copy_(p - grad / denom * (g.lr * (1 - mu) / (1 - st.mu_product))
            - m / denom * (g.lr * mu_next / (1 - mu_product_next)))
end)

-- optim.RAdam(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0})
optim.RAdam = make_class("RAdam", function(o)
  local d = options("RAdam", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
                               maximize = false }, o, { "eps", "weight_decay" })
  check_betas("RAdam", d.betas)
  return d
end, function(p, grad, st, g)
  grad = effective_grad(p, grad, g)
  local b1, b2 = g.betas[1], g.betas[2]
  if st.step == nil then
    st.step, st.exp_avg, st.exp_avg_sq = 0, tide.zeros_like(p), tide.zeros_like(p)
  end
  st.step = st.step + 1
  local t = st.step
  local m, v = st.exp_avg, st.exp_avg_sq
  m:copy_(m + (grad - m) * (1 - b1))
  v:copy_(v * b2 + grad * grad * (1 - b2))
  local bc1, bc2 = 1 - b1 ^ t, 1 - b2 ^ t
  local rho_inf = 2 / (1 - b2) - 1
  local rho_t = rho_inf - 2 * t * b2 ^ t / bc2
  if rho_t > 5 then -- the variance is tractable: rectified adaptive step
    local rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                           / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
    p:copy_(p - m / (tide.sqrt(v) + g.eps) * (g.lr / bc1 * math.sqrt(bc2) * rect))
  else -- early steps: plain momentum SGD on the bias-corrected average
    p:copy_(p - m * (g.lr / bc1))
  end
end)

end

return adaptive
