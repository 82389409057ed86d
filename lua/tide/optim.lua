-- tide.optim — SGD, Adam, AdamW with PyTorch's update formulas (RMSprop, Adagrad, Adadelta,
-- Adamax, NAdam, RAdam and LBFGS in tide/optim/), and the LR schedulers StepLR,
-- CosineAnnealingLR, LambdaLR and LinearLR (also as tide.optim.lr_scheduler.*).
--
--   local opt = optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
--   opt:zero_grad(); loss:backward(); opt:step()
--   opt.lr = 0.01                       -- sets every group's lr (schedulers do this)
--
-- Parameters are a list of tensors, or a list of groups {params = {...}, lr = ...} whose
-- missing options come from the defaults table. step() updates each parameter in place with
-- tide ops under no_grad (new value computed, then written with copy_), so a traced step sees
-- ordinary ops. State (momentum buffers, Adam moments) lives in opt.state[p] keyed by the
-- parameter tensor; state_dict() lists it by 1-based parameter position as PyTorch does by
-- 0-based position.
local tide = require "tide"

local optim = {}

local Optimizer = {}
optim.Optimizer = Optimizer

-- opt.lr reads the first group's lr; assigning it sets every group's.
local function make_class(name, defaults_fn, step_fn)
  local cls = { __name = name }
  cls.__index = function(self, k)
    if k == "lr" then
      return self.param_groups[1].lr
    end
    return cls[k] or Optimizer[k]
  end
  cls.__newindex = function(self, k, v)
    if k == "lr" then
      for _, g in ipairs(self.param_groups) do
        g.lr = v
      end
    else
      rawset(self, k, v)
    end
  end
  cls.__tostring = function(self)
    local parts = {}
    for i, g in ipairs(self.param_groups) do
      local keys = {}
      for k in pairs(g) do
        if k ~= "params" then keys[#keys + 1] = k end
      end
      table.sort(keys)
      local kv = {}
      for _, k in ipairs(keys) do
        kv[#kv + 1] = ("    %s: %s"):format(k, tostring(g[k]))
      end
      parts[#parts + 1] = ("Parameter Group %d\n%s"):format(i, table.concat(kv, "\n"))
    end
    return name .. " (\n" .. table.concat(parts, "\n") .. "\n)"
  end
  cls._defaults = defaults_fn
  cls._update = step_fn
  return setmetatable(cls, {
    __call = function(c, params, opts)
      local self = setmetatable({}, c)
      Optimizer._init(self, name, params, c._defaults(opts or {}))
      return self
    end,
  })
end

function Optimizer._init(self, name, params, defaults)
  if type(params) ~= "table" then
    error(name .. ": expected a list of parameters (model:parameters()) or of parameter groups", 3)
  end
  if tide.is_tensor(params) then
    params = { params }
  end
  rawset(self, "defaults", defaults)
  rawset(self, "state", {})
  rawset(self, "param_groups", {})
  local groups = params
  if #params > 0 and not tide.is_tensor(params[1]) then
    if type(params[1]) ~= "table" or params[1].params == nil then
      error(name .. ": parameter " .. 1 .. " is not a tensor", 3)
    end
  else
    groups = { { params = params } }
  end
  if #groups == 0 or #groups[1].params == 0 then
    error(name .. ": got an empty parameter list", 3)
  end
  local seen = {}
  for gi, g in ipairs(groups) do
    local group = {}
    for k, v in pairs(g) do
      if k ~= "params" and defaults[k] == nil then
        error(("%s: unknown option '%s' in parameter group %d"):format(name, tostring(k), gi), 3)
      end
      group[k] = v
    end
    for k, v in pairs(defaults) do
      if group[k] == nil then group[k] = v end
    end
    local ps = {}
    for i, p in ipairs(g.params) do
      if not tide.is_tensor(p) then
        error(("%s: parameter %d of group %d is a %s, not a tensor"):format(name, i, gi, type(p)), 3)
      end
      if not p:is_floating_point() then
        error(("%s: parameter %d is %s; only floating-point tensors can be optimized"):format(
          name, i, p.dtype), 3)
      end
      if seen[p] then
        error(("%s: parameter %d appears more than once"):format(name, i), 3)
      end
      seen[p] = true
      ps[i] = p
    end
    group.params = ps
    self.param_groups[gi] = group
  end
  self:_check_group_values()
end

function Optimizer:_check_group_values()
  for _, g in ipairs(self.param_groups) do
    if type(g.lr) ~= "number" or g.lr < 0 then
      error(("%s: lr must be a non-negative number, got %s"):format(self.__name, tostring(g.lr)), 4)
    end
  end
end

-- Clears the gradients (set_to_none, PyTorch's default; false: zeros them).
function Optimizer:zero_grad(set_to_none)
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      if set_to_none == false then
        local grad = p.grad
        if grad then
          tide.no_grad(function() grad:zero_() end)
          p.grad = grad
        end
      else
        p.grad = nil
      end
    end
  end
end

-- One update of every parameter that has a gradient. closure (optional) recomputes the loss
-- and is called with grad enabled; its result is returned.
function Optimizer:step(closure)
  local loss
  if closure then
    loss = tide.enable_grad(closure)
  end
  tide.no_grad(function()
    for _, g in ipairs(self.param_groups) do
      for _, p in ipairs(g.params) do
        local grad = p.grad
        if grad ~= nil then
          local st = self.state[p]
          if st == nil then
            st = {}
            self.state[p] = st
          end
          self._update(p, grad, st, g)
        end
      end
    end
  end)
  return loss
end

-- {state = {[i] = {name = tensor or number}}, param_groups = {{lr = ..., params = {i...}}}}
-- with i the 1-based position of a parameter across all groups.
function Optimizer:state_dict()
  local state, groups, index = {}, {}, 0
  for gi, g in ipairs(self.param_groups) do
    local pg = {}
    for k, v in pairs(g) do
      if k ~= "params" then pg[k] = v end
    end
    pg.params = {}
    for _, p in ipairs(g.params) do
      index = index + 1
      pg.params[#pg.params + 1] = index
      local st = self.state[p]
      if st and next(st) then
        local copy = {}
        for k, v in pairs(st) do copy[k] = v end
        state[index] = copy
      end
    end
    groups[gi] = pg
  end
  return { state = state, param_groups = groups }
end

-- Nested tables from dotted names ("state.1.step" -> t.state[1].step); strings that read as
-- numbers or booleans become those (tide.save keeps non-tensor values as metadata strings).
local function unflatten(flat, out)
  out = out or {}
  for key, v in pairs(flat) do
    if type(v) == "string" then
      if v == "true" then v = true
      elseif v == "false" then v = false
      else v = math.tointeger(tonumber(v)) or tonumber(v) or v end
    end
    local node = out
    local parts = {}
    for part in tostring(key):gmatch("[^.]+") do
      parts[#parts + 1] = math.tointeger(tonumber(part)) or part
    end
    for i = 1, #parts - 1 do
      local p = parts[i]
      if type(node[p]) ~= "table" then node[p] = {} end
      node = node[p]
    end
    node[parts[#parts]] = v
  end
  return out
end
optim.unflatten = unflatten

-- Loads what state_dict() gave, or the flat tables tide.load(path) returns for a file written
-- by tide.save(path, opt:state_dict()): opt:load_state_dict(tensors, metadata).
function Optimizer:load_state_dict(sd, metadata)
  if type(sd) ~= "table" then
    error("load_state_dict: expected a table, got " .. type(sd), 2)
  end
  if sd.param_groups == nil then
    local nested = unflatten(sd)
    if metadata then unflatten(metadata, nested) end
    sd = nested
  end
  local groups = sd.param_groups
  if type(groups) ~= "table" or #groups ~= #self.param_groups then
    error(("load_state_dict: the state has %s parameter groups, the optimizer %d"):format(
      type(groups) == "table" and tostring(#groups) or "no", #self.param_groups), 2)
  end
  local params = {}
  for gi, g in ipairs(self.param_groups) do
    local n = groups[gi].params and #groups[gi].params or 0
    if n ~= #g.params then
      error(("load_state_dict: group %d has %d parameters in the state, %d in the optimizer")
        :format(gi, n, #g.params), 2)
    end
    for _, p in ipairs(g.params) do params[#params + 1] = p end
  end
  for gi, g in ipairs(self.param_groups) do
    for k, v in pairs(groups[gi]) do
      if k ~= "params" then g[k] = v end
    end
  end
  local state = {}
  for i, st in pairs(sd.state or {}) do
    local p = params[math.tointeger(i) or -1]
    if p == nil then
      error("load_state_dict: state for parameter " .. tostring(i) .. " which does not exist", 2)
    end
    local copy = {}
    for k, v in pairs(st) do
      if tide.is_tensor(v) and v:dim() == 0 then
        v = v:to(p.device):clone() -- a count (Adam's step): keeps its dtype, on p's device
      elseif tide.is_tensor(v) then
        if v:numel() ~= p:numel() then
          error(("load_state_dict: state '%s' of parameter %d has %d elements, the parameter %d")
            :format(k, i, v:numel(), p:numel()), 2)
        end
        v = v:to({ dtype = p.dtype, device = p.device }):reshape(p:size()):clone()
      end
      copy[k] = v
    end
    state[p] = copy
  end
  rawset(self, "state", state)
end

-- ---- SGD ---------------------------------------------------------------------------------------

-- optim.SGD(params, {lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=false,
-- maximize=false})
optim.SGD = make_class("SGD", function(o)
  local d = { lr = o.lr or 1e-3, momentum = o.momentum or 0, dampening = o.dampening or 0,
              weight_decay = o.weight_decay or 0, nesterov = o.nesterov or false,
              maximize = o.maximize or false }
  for k in pairs(o) do
    if d[k] == nil then error("SGD: unknown option '" .. tostring(k) .. "'", 3) end
  end
  if d.nesterov and (d.momentum <= 0 or d.dampening ~= 0) then
    error("SGD: nesterov momentum requires a momentum and zero dampening", 3)
  end
  if d.momentum < 0 then error("SGD: momentum must be >= 0, got " .. d.momentum, 3) end
  if d.weight_decay < 0 then error("SGD: weight_decay must be >= 0, got " .. d.weight_decay, 3) end
  return d
end, function(p, grad, st, g)
  if g.maximize then grad = -grad end
  if g.weight_decay ~= 0 then
    grad = grad + p * g.weight_decay
  end
  if g.momentum ~= 0 then
    local buf = st.momentum_buffer
    if buf == nil then
      buf = grad:clone()
      st.momentum_buffer = buf
    else
      if g.dampening == 0 then
        buf:copy_(buf * g.momentum + grad)
      else
        buf:copy_(buf * g.momentum + grad * (1 - g.dampening))
      end
    end
    if g.nesterov then
      grad = grad + buf * g.momentum
    else
      grad = buf
    end
  end
  p:copy_(p - grad * g.lr)
end)

-- ---- Adam / AdamW -----------------------------------------------------------------------------

local function adam_defaults(name, wd_default)
  return function(o)
    local betas = o.betas or { 0.9, 0.999 }
    local d = { lr = o.lr or 1e-3, betas = betas, eps = o.eps or 1e-8,
                weight_decay = o.weight_decay or wd_default, amsgrad = o.amsgrad or false,
                maximize = o.maximize or false }
    for k in pairs(o) do
      if d[k] == nil then error(name .. ": unknown option '" .. tostring(k) .. "'", 3) end
    end
    if type(betas) ~= "table" or not (betas[1] >= 0 and betas[1] < 1 and betas[2] >= 0 and
                                       betas[2] < 1) then
      error(name .. ": betas must be a pair {beta1, beta2} in [0, 1)", 3)
    end
    if d.eps < 0 then error(name .. ": eps must be >= 0", 3) end
    return d
  end
end

local function adam_update(decoupled)
  return function(p, grad, st, g)
    if g.maximize then grad = -grad end
    local beta1, beta2 = g.betas[1], g.betas[2]
    if st.step == nil then
      -- the step count is a 0-dim float64 tensor counted in place (as PyTorch's), so the bias
      -- corrections below are tensor ops a traced step recomputes rather than constants; it
      -- lives on p's device, so a traced step on a GPU has no CPU op in it (a graph break)
      st.step = tide.zeros({}, { dtype = "float64", device = p.device })
      st.exp_avg = tide.zeros_like(p)
      st.exp_avg_sq = tide.zeros_like(p)
      if g.amsgrad then st.max_exp_avg_sq = tide.zeros_like(p) end
    elseif type(st.step) == "number" then
      st.step = tide.tensor(st.step + 0.0, { dtype = "float64", device = p.device })
    end
    local step = st.step
    step:copy_(step + 1)
    if g.weight_decay ~= 0 then
      if decoupled then
        p:copy_(p * (1 - g.lr * g.weight_decay))
      else
        grad = grad + p * g.weight_decay
      end
    end
    local m, v = st.exp_avg, st.exp_avg_sq
    m:copy_(m + (grad - m) * (1 - beta1)) -- exp_avg.lerp_(grad, 1 - beta1)
    v:copy_(v * beta2 + grad * grad * (1 - beta2))
    local bc1 = 1 - beta1 ^ step -- 0-dim float64 tensors: they do not widen p's dtype
    local bc2 = 1 - beta2 ^ step
    local step_size = g.lr / bc1
    local vs = v
    if g.amsgrad then
      st.max_exp_avg_sq:copy_(tide.maximum(st.max_exp_avg_sq, v))
      vs = st.max_exp_avg_sq
    end
    local denom = tide.sqrt(vs) / tide.sqrt(bc2) + g.eps
    p:copy_(p - m / denom * step_size)
  end
end

-- optim.Adam(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=0, amsgrad=false})
optim.Adam = make_class("Adam", adam_defaults("Adam", 0), adam_update(false))
-- optim.AdamW(params, {lr=1e-3, betas={0.9, 0.999}, eps=1e-8, weight_decay=1e-2, amsgrad=false})
optim.AdamW = make_class("AdamW", adam_defaults("AdamW", 1e-2), adam_update(true))

-- RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam: lua/tide/optim/adaptive.lua; LBFGS:
-- lua/tide/optim/lbfgs.lua
require("tide.optim.adaptive").install(optim, make_class)
require("tide.optim.lbfgs").install(optim, make_class)

-- ---- LR schedulers ----------------------------------------------------------------------------

local lr_scheduler = {}
optim.lr_scheduler = lr_scheduler

local Scheduler = {}
Scheduler.__index = Scheduler

local function make_scheduler(name, init, lr_at)
  local cls = setmetatable({ __name = name }, { __index = Scheduler })
  cls.__index = cls
  cls._lr_at = lr_at
  setmetatable(cls, {
    __index = Scheduler,
    __call = function(c, optimizer, ...)
      if type(optimizer) ~= "table" or optimizer.param_groups == nil then
        error(name .. ": expected an optimizer", 2)
      end
      local self = setmetatable({ optimizer = optimizer, last_epoch = 0, base_lrs = {} }, c)
      for i, g in ipairs(optimizer.param_groups) do
        g.initial_lr = g.initial_lr or g.lr
        self.base_lrs[i] = g.initial_lr
      end
      init(self, ...)
      self:_apply()
      return self
    end,
  })
  lr_scheduler[name] = cls
  optim[name] = cls
  return cls
end

function Scheduler:_apply()
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    g.lr = self:_lr_at(self.base_lrs[i], self.last_epoch, i)
    self._last_lr[i] = g.lr
  end
end

-- Call once per epoch, after the optimizer's steps.
function Scheduler:step()
  self.last_epoch = self.last_epoch + 1
  self:_apply()
end

function Scheduler:get_last_lr()
  local out = {}
  for i, v in ipairs(self._last_lr) do out[i] = v end
  return out
end

function Scheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and k:sub(1, 1) ~= "_" then sd[k] = v end
  end
  return sd
end

function Scheduler:load_state_dict(sd)
  if sd.base_lrs == nil and sd.last_epoch ~= nil then
    sd = unflatten(sd)
  end
  for k, v in pairs(sd) do
    if k ~= "optimizer" then self[k] = v end
  end
  self:_apply()
end

-- StepLR(optimizer, step_size [, {gamma=0.1}]): lr = base_lr * gamma^floor(epoch / step_size)
make_scheduler("StepLR", function(self, step_size, opts)
  if math.type(step_size) ~= "integer" or step_size < 1 then
    error("StepLR: step_size must be a positive integer, got " .. tostring(step_size), 3)
  end
  self.step_size = step_size
  self.gamma = (opts or {}).gamma or 0.1
end, function(self, base, epoch)
  return base * self.gamma ^ (epoch // self.step_size)
end)

-- CosineAnnealingLR(optimizer, T_max [, {eta_min=0}]):
-- lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
make_scheduler("CosineAnnealingLR", function(self, T_max, opts)
  if type(T_max) ~= "number" or T_max <= 0 then
    error("CosineAnnealingLR: T_max must be a positive number, got " .. tostring(T_max), 3)
  end
  self.T_max = T_max
  self.eta_min = (opts or {}).eta_min or 0
end, function(self, base, epoch)
  return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2
end)


-- LambdaLR(optimizer, lr_lambda): lr = base_lr * lr_lambda(epoch); lr_lambda is a function or a
-- list of functions, one per parameter group. The functions are not part of state_dict().
make_scheduler("LambdaLR", function(self, lr_lambda)
  local n = #self.optimizer.param_groups
  local fns = lr_lambda
  if type(lr_lambda) == "function" then
    fns = {}
    for i = 1, n do fns[i] = lr_lambda end
  elseif type(lr_lambda) ~= "table" or #lr_lambda ~= n then
    error(("LambdaLR: lr_lambda must be a function or a list of %d functions (one per parameter "
      .. "group), got %s"):format(n, type(lr_lambda) == "table" and #lr_lambda .. " entries"
      or type(lr_lambda)), 3)
  end
  for i = 1, n do
    if type(fns[i]) ~= "function" then
      error(("LambdaLR: lr_lambda %d is a %s, not a function"):format(i, type(fns[i])), 3)
    end
  end
  self._lr_lambdas = fns
end, function(self, base, epoch, group)
  local f = self._lr_lambdas[group](epoch)
  if type(f) ~= "number" then
    error(("LambdaLR: lr_lambda returned a %s for epoch %d, expected a number"):format(
      type(f), epoch), 4)
  end
  return base * f
end)

-- LinearLR(optimizer [, {start_factor=1/3, end_factor=1, total_iters=5}]):
-- lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters)
make_scheduler("LinearLR", function(self, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("LinearLR: options must be a table, got " .. type(opts), 3)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "start_factor" and k ~= "end_factor" and k ~= "total_iters" then
      error("LinearLR: unknown option '" .. tostring(k) .. "'", 3)
    end
  end
  local s, e, n = opts.start_factor or 1 / 3, opts.end_factor or 1.0, opts.total_iters or 5
  if type(s) ~= "number" or s <= 0 or s > 1 then
    error("LinearLR: start_factor must be in (0, 1], got " .. tostring(s), 3)
  end
  if type(e) ~= "number" or e < 0 or e > 1 then
    error("LinearLR: end_factor must be in [0, 1], got " .. tostring(e), 3)
  end
  if math.type(n) ~= "integer" or n < 1 then
    error("LinearLR: total_iters must be a positive integer, got " .. tostring(n), 3)
  end
  self.start_factor, self.end_factor, self.total_iters = s, e, n
end, function(self, base, epoch)
  local t = math.min(epoch, self.total_iters) / self.total_iters
  return base * (self.start_factor + (self.end_factor - self.start_factor) * t)
end)

return optim
