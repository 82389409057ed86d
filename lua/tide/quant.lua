-- tide.quant — quantized weights for modules (docs/quantization.md). tide.quantize(module, fmt)
-- lands here: every nn.Linear child becomes an nn.QuantizedLinear, and a module with a
-- quantize_weights(fmt) method (tide.models.llama's) quantizes its own weights. A weight whose
-- input size K is not a multiple of 32 cannot be cut into blocks: it stays as it is.
local tide = require "tide"
local nn = require "tide.nn"

local quant = {}
local FORMATS = { q8_0 = true, q4_0 = true }

local function check_format(fmt, what)
  if not FORMATS[fmt] then
    error(("%s: format must be \"q8_0\" or \"q4_0\", got %s"):format(what, tostring(fmt)), 3)
  end
end

-- nn.QuantizedLinear(linear, fmt): y = x @ dequantize(weight)^T + bias, with the weight a uint8
-- buffer of fmt blocks and the bias (if any) kept float32. Not trainable in the weight.
local QuantizedLinear = nn.Module:extend("QuantizedLinear")
nn.QuantizedLinear = QuantizedLinear
function QuantizedLinear:__init(linear, fmt)
  nn.Module.__init(self)
  check_format(fmt, "QuantizedLinear")
  self.in_features, self.out_features, self.format = linear.in_features, linear.out_features, fmt
  self:register_buffer("weight", tide.no_grad(function()
    return tide.quantize(linear.weight, fmt)
  end))
  if linear.bias then
    self:register_parameter("bias", nn.Parameter(linear.bias:detach():to("float32")))
  end
end
function QuantizedLinear:forward(x)
  local y = tide.qlinear(x, self.weight, self.format)
  return self.bias and y + self.bias or y
end
function QuantizedLinear:extra_repr()
  return ("in_features=%d, out_features=%d, format=%s, bias=%s"):format(self.in_features,
    self.out_features, self.format, tostring(self.bias ~= nil))
end

-- Makes q (uint8 blocks of fmt, K values a row) module m's weight name, in place of the
-- parameter of that name, and records m._qformats[name] = {format = fmt, K = K}.
function quant.set_quantized(m, name, q, fmt, K)
  for i, n in ipairs(m._param_names) do
    if n == name then table.remove(m._param_names, i) break end
  end
  m[name] = nil
  m:register_buffer(name, q)
  m._qformats = m._qformats or {}
  m._qformats[name] = { format = fmt, K = K }
end

-- Replaces parameter name of module m by its fmt blocks (a uint8 buffer of the same name), and
-- records the format and K in m._qformats[name] = {format, K}. False when K % 32 ~= 0.
function quant.quantize_weight(m, name, fmt)
  check_format(fmt, "quantize")
  local w = m[name]
  local f = m._qformats and m._qformats[name]
  if f then -- quantized already: only to the same format
    if f.format ~= fmt then
      error(("quantize: %s is %s already; quantize the float model to %s instead"):format(name,
        f.format, fmt), 3)
    end
    return true
  end
  local K = w:size(2)
  if K % 32 ~= 0 then return false end
  quant.set_quantized(m, name, tide.no_grad(function() return tide.quantize(w, fmt) end), fmt, K)
  return true
end

-- The format of module m's weight name ("q8_0", "q4_0") and its K, or nil.
function quant.format_of(m, name)
  local f = m._qformats and m._qformats[name]
  if f then return f.format, f.K end
end

-- tide.quantize(module, fmt): the module (a new QuantizedLinear for a bare nn.Linear).
function quant.quantize_module(model, fmt)
  check_format(fmt, "quantize")
  if getmetatable(model) == nn.Linear then
    return model.in_features % 32 == 0 and QuantizedLinear(model, fmt) or model
  end
  local function walk(m)
    if type(m.quantize_weights) == "function" then
      m:quantize_weights(fmt)
      return
    end
    for name, child in m:named_children() do
      if getmetatable(child) == nn.Linear then
        if child.in_features % 32 == 0 then
          m:add_module(name, QuantizedLinear(child, fmt))
        end
      else
        walk(child)
      end
    end
  end
  walk(model)
  return model
end

return quant
