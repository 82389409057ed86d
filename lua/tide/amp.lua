-- tide.amp — loss scaling for float16 mixed precision, as torch.amp.GradScaler.
--
--   local scaler = tide.amp.GradScaler()
--   local loss = tide.autocast("float16", function() return F.cross_entropy(model(x), y) end)
--   scaler:scale(loss):backward()
--   scaler:step(opt)        -- unscales the grads; skips the step if any is inf or NaN
--   scaler:update()         -- backs the scale off after a skipped step, grows it after
--                           -- growth_interval good ones
--
-- float16 gradients of small losses underflow to 0; scaling the loss before backward keeps them
-- in range, and the grads are divided by the scale again before the optimizer sees them. The
-- scale is kept as a float32 value (as PyTorch's scale tensor), and the grads are multiplied by
-- 1/scale rounded to float32, as PyTorch does.
local tide = require "tide"

local amp = {}

local GradScaler = { __name = "GradScaler" }
GradScaler.__index = GradScaler
amp.GradScaler = GradScaler

-- x rounded to float32 (the dtype of PyTorch's scale and inverse scale).
local function f32(x)
  return (string.unpack("f", string.pack("f", x)))
end

local DEFAULTS = { init_scale = 65536.0, growth_factor = 2.0, backoff_factor = 0.5,
                   growth_interval = 2000, enabled = true }

local function check_opts(opts)
  if type(opts) ~= "table" then
    error(("GradScaler: expected an options table, got %s"):format(type(opts)), 3)
  end
  for k in pairs(opts) do
    if DEFAULTS[k] == nil then
      error(("GradScaler: unknown option %s (init_scale, growth_factor, backoff_factor, " ..
        "growth_interval, enabled)"):format(tostring(k)), 3)
    end
  end
  local o = {}
  for k, v in pairs(DEFAULTS) do
    if opts[k] ~= nil then o[k] = opts[k] else o[k] = v end
  end
  if type(o.enabled) ~= "boolean" then error("GradScaler: enabled must be a boolean", 3) end
  if type(o.init_scale) ~= "number" or not (o.init_scale > 0) then
    error(("GradScaler: init_scale must be a positive number, got %s"):format(tostring(o.init_scale)), 3)
  end
  if type(o.growth_factor) ~= "number" or not (o.growth_factor > 1) then
    error(("GradScaler: growth_factor must be > 1, got %s"):format(tostring(o.growth_factor)), 3)
  end
  if type(o.backoff_factor) ~= "number" or not (o.backoff_factor > 0 and o.backoff_factor < 1) then
    error(("GradScaler: backoff_factor must be in (0, 1), got %s"):format(tostring(o.backoff_factor)), 3)
  end
  if math.type(o.growth_interval) ~= "integer" or o.growth_interval < 1 then
    error(("GradScaler: growth_interval must be a positive integer, got %s"):format(tostring(o.growth_interval)), 3)
  end
  return o
end

setmetatable(GradScaler, {
  __call = function(cls, opts)
    local o = check_opts(opts or {})
    return setmetatable({
      _enabled = o.enabled, _scale = f32(o.init_scale), _growth_factor = o.growth_factor,
      _backoff_factor = o.backoff_factor, _growth_interval = o.growth_interval,
      _growth_tracker = 0,
      _per_opt = setmetatable({}, { __mode = "k" }), -- optimizer -> {unscaled=, stepped=, found_inf=}
    }, cls)
  end,
})

function GradScaler:is_enabled() return self._enabled end

-- The current scale (1 when disabled).
function GradScaler:get_scale()
  return self._enabled and self._scale or 1.0
end

-- outputs (a tensor or a list of tensors) times the scale; unchanged when disabled.
function GradScaler:scale(outputs)
  if not self._enabled then return outputs end
  if type(outputs) == "table" then
    local out = {}
    for i, t in ipairs(outputs) do out[i] = t * self._scale end
    return out
  end
  return outputs * self._scale
end

local function state_of(self, optimizer)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    error("GradScaler: expected an optimizer (a table with param_groups)", 3)
  end
  local st = self._per_opt[optimizer]
  if not st then
    st = { unscaled = false, stepped = false, found_inf = false }
    self._per_opt[optimizer] = st
  end
  return st
end

-- Whether t has an inf or NaN: 0 * t sums to 0 when every element is finite, NaN otherwise.
local function has_nonfinite(t)
  return (t * 0):sum():item() ~= 0
end

-- Divides every gradient of optimizer's parameters by the scale (in place) and records whether
-- any was inf or NaN. Once per optimizer between updates, as PyTorch.
function GradScaler:unscale_(optimizer)
  if not self._enabled then return end
  local st = state_of(self, optimizer)
  if st.unscaled then
    error("unscale_: already called on this optimizer since the last update()", 2)
  end
  if st.stepped then
    error("unscale_: called after step(); call update() first", 2)
  end
  local inv = f32(1.0 / self._scale)
  local found = false
  tide.no_grad(function()
    for _, g in ipairs(optimizer.param_groups) do
      for _, p in ipairs(g.params) do
        local grad = p.grad
        if grad ~= nil then
          if grad.dtype == "float16" then
            error("unscale_: the gradients are float16; keep the parameters float32 (autocast " ..
              "casts them per op) so that unscaling does not underflow", 0)
          end
          found = found or has_nonfinite(grad)
          grad:copy_(grad * inv)
        end
      end
    end
  end)
  st.unscaled, st.found_inf = true, found
end

-- optimizer:step(...) unless a gradient was inf or NaN (then the step is skipped and nil
-- returned); unscales first when unscale_ was not called.
function GradScaler:step(optimizer, ...)
  if not self._enabled then return optimizer:step(...) end
  local st = state_of(self, optimizer)
  if st.stepped then
    error("step: already called on this optimizer since the last update()", 2)
  end
  if not st.unscaled then self:unscale_(optimizer) end
  local result
  if not st.found_inf then result = optimizer:step(...) end
  st.stepped = true
  return result
end

-- The scale for the next iteration: times backoff_factor if any optimizer saw inf/NaN grads
-- since the last update, else times growth_factor after growth_interval such steps in a row.
-- new_scale (a number) sets it instead.
function GradScaler:update(new_scale)
  if not self._enabled then return end
  if new_scale ~= nil then
    if type(new_scale) ~= "number" or not (new_scale > 0) then
      error(("update: new_scale must be a positive number, got %s"):format(tostring(new_scale)), 2)
    end
    self._scale = f32(new_scale)
  else
    local found, any = false, false
    for _, st in pairs(self._per_opt) do
      any = true
      found = found or st.found_inf
    end
    if not any then
      error("update: no inf checks were recorded; call step(optimizer) or unscale_(optimizer) " ..
        "before update()", 2)
    end
    if found then
      self._scale = f32(self._scale * self._backoff_factor)
      self._growth_tracker = 0
    else
      self._growth_tracker = self._growth_tracker + 1
      if self._growth_tracker == self._growth_interval then
        self._scale = f32(self._scale * self._growth_factor)
        self._growth_tracker = 0
      end
    end
  end
  self._per_opt = setmetatable({}, { __mode = "k" })
end

function GradScaler:state_dict()
  if not self._enabled then return {} end
  return { scale = self._scale, growth_factor = self._growth_factor,
           backoff_factor = self._backoff_factor, growth_interval = self._growth_interval,
           _growth_tracker = self._growth_tracker }
end

function GradScaler:load_state_dict(sd)
  if not self._enabled then return end
  if type(sd) ~= "table" or type(sd.scale) ~= "number" then
    error("load_state_dict: expected a GradScaler state_dict (with scale)", 2)
  end
  self._scale = f32(sd.scale)
  self._growth_factor = sd.growth_factor or self._growth_factor
  self._backoff_factor = sd.backoff_factor or self._backoff_factor
  self._growth_interval = sd.growth_interval or self._growth_interval
  self._growth_tracker = sd._growth_tracker or 0
end

GradScaler.__tostring = function(self)
  return ("GradScaler(scale=%g, enabled=%s)"):format(self:get_scale(), tostring(self._enabled))
end

return amp
