-- tide.nn's elementwise activation modules beyond ReLU/Sigmoid/Tanh/SiLU/GELU/LeakyReLU (which
-- nn.lua defines): ELU, SELU, CELU, Softplus, Mish, Softsign, Hardtanh, ReLU6, Hardswish,
-- Hardsigmoid, LogSigmoid, GLU, with PyTorch's argument names (positional, or an options
-- table). Each forwards to tide.nn.functional. nn.lua installs them:
--   require("tide.nn.activation").install(nn, helpers)
local F = require "tide.nn.functional"

local activation = {}

function activation.install(nn, helpers)
  local Module, check_opts = nn.Module, helpers.check_opts

  -- A module class: args lists its parameters (name, default) in PyTorch's order; forward
  -- calls fn(x, params...). repr shows them as PyTorch's extra_repr does.
  local function define(name, fn, args)
    local A = Module:extend(name)
    local allowed = {}
    for _, a in ipairs(args) do allowed[a[1]] = true end
    function A:__init(...)
      Module.__init(self)
      local first = ...
      local opts = {}
      if type(first) == "table" then
        opts = check_opts(first, name, allowed)
      else
        local values = { ... }
        if #values > #args then
          error(("%s: expected at most %d arguments, got %d"):format(name, #args, #values), 2)
        end
        for i, a in ipairs(args) do opts[a[1]] = values[i] end
      end
      for _, a in ipairs(args) do
        local v = opts[a[1]]
        if v == nil then v = a[2] end
        if type(v) ~= "number" then
          error(("%s: %s must be a number, got %s"):format(name, a[1], type(v)), 2)
        end
        self[a[1]] = v
      end
    end
    function A:forward(x)
      local p = {}
      for i, a in ipairs(args) do p[i] = self[a[1]] end
      return fn(x, table.unpack(p, 1, #args))
    end
    if #args > 0 then
      function A:extra_repr()
        local parts = {}
        for _, a in ipairs(args) do parts[#parts + 1] = a[1] .. "=" .. tostring(self[a[1]]) end
        return table.concat(parts, ", ")
      end
    end
    nn[name] = A
  end

  define("ELU", F.elu, { { "alpha", 1.0 } })
  define("SELU", F.selu, {})
  define("CELU", F.celu, { { "alpha", 1.0 } })
  define("Softplus", F.softplus, { { "beta", 1.0 }, { "threshold", 20.0 } })
  define("Mish", F.mish, {})
  define("Softsign", F.softsign, {})
  define("Hardtanh", F.hardtanh, { { "min_val", -1.0 }, { "max_val", 1.0 } })
  define("ReLU6", F.relu6, {})
  define("Hardswish", F.hardswish, {})
  define("Hardsigmoid", F.hardsigmoid, {})
  define("LogSigmoid", F.logsigmoid, {})
  define("GLU", F.glu, { { "dim", -1 } })
end

return activation
