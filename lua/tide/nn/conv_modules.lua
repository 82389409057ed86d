-- tide.nn's modules for the convolution family beyond Conv2d (the functions are in
-- tide/nn/conv.lua): nn.Conv1d, nn.Conv3d, nn.ConvTranspose1d/2d/3d, nn.MaxPool1d/3d,
-- nn.AvgPool1d/3d, nn.AdaptiveAvgPool1d/3d, nn.Unfold, nn.Fold, with PyTorch's argument names
-- (positional or one trailing options table) and parameter initialization.
local tide = require "tide"

local M = {}

local function fmt(v)
  if type(v) == "table" then return "(" .. table.concat(v, ", ") .. ")" end
  return tostring(v)
end

function M.install(nn, helpers)
  local Module, init, F = nn.Module, nn.init, nn.functional
  local check_opts, check_int, dtype_of = helpers.check_opts, helpers.check_int, helpers.dtype_of
  local tuple = require("tide.nn.conv").tuple

  -- ConvNd / ConvTransposeNd: weight [O, C/groups, k...] or [C, O/groups, k...], uniform
  -- initialization as PyTorch (kaiming_uniform_ with a = sqrt(5); bias within 1/sqrt(fan_in)).
  local function conv_class(nd, transposed)
    local name = (transposed and "ConvTranspose" or "Conv") .. nd .. "d"
    local fn = transposed and F["conv_transpose" .. nd .. "d"] or F["conv" .. nd .. "d"]
    local C = Module:extend(name)
    nn[name] = C
    function C:__init(in_channels, out_channels, kernel_size, opts)
      Module.__init(self)
      opts = check_opts(opts, name, { stride = true, padding = true, dilation = true,
                                      groups = true, bias = true, dtype = true,
                                      padding_mode = true, output_padding = true })
      if opts.padding_mode and opts.padding_mode ~= "zeros" then
        error(name .. ": only padding_mode \"zeros\" is supported", 2)
      end
      if opts.output_padding and not transposed then
        error(name .. ": unknown option 'output_padding'", 2)
      end
      self.in_channels = check_int(in_channels, name, "in_channels")
      self.out_channels = check_int(out_channels, name, "out_channels")
      self.groups = check_int(opts.groups or 1, name, "groups")
      if self.in_channels % self.groups ~= 0 or self.out_channels % self.groups ~= 0 then
        error(("%s: in_channels (%d) and out_channels (%d) must be divisible by groups (%d)")
          :format(name, self.in_channels, self.out_channels, self.groups), 2)
      end
      self.kernel_size = tuple(kernel_size, nd, name, "kernel_size")
      self.stride, self.padding = opts.stride or 1, opts.padding or 0
      self.dilation, self.output_padding = opts.dilation or 1, opts.output_padding or 0
      local shape = transposed and { self.in_channels, self.out_channels // self.groups }
                    or { self.out_channels, self.in_channels // self.groups }
      local fan_in = shape[2]
      for i = 1, nd do
        shape[2 + i] = check_int(self.kernel_size[i], name, "kernel_size")
        fan_in = fan_in * shape[2 + i]
      end
      shape[#shape + 1] = dtype_of(opts)
      local w = tide.empty(table.unpack(shape))
      init.kaiming_uniform_(w, { a = math.sqrt(5) })
      self:register_parameter("weight", nn.Parameter(w))
      if opts.bias ~= false then
        local bound = 1 / math.sqrt(fan_in)
        self:register_parameter("bias", nn.Parameter(init.uniform_(
          tide.empty(self.out_channels, dtype_of(opts)), -bound, bound)))
      end
    end
    function C:forward(x)
      if transposed then
        return fn(x, self.weight, self.bias, { stride = self.stride, padding = self.padding,
                                               output_padding = self.output_padding,
                                               groups = self.groups, dilation = self.dilation })
      end
      return fn(x, self.weight, self.bias, { stride = self.stride, padding = self.padding,
                                             dilation = self.dilation, groups = self.groups })
    end
    function C:extra_repr()
      local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels,
                                                             fmt(self.kernel_size), fmt(self.stride))
      if self.padding ~= 0 then s = s .. ", padding=" .. fmt(self.padding) end
      if transposed and self.output_padding ~= 0 then
        s = s .. ", output_padding=" .. fmt(self.output_padding)
      end
      if self.dilation ~= 1 then s = s .. ", dilation=" .. fmt(self.dilation) end
      if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
      if self.bias == nil then s = s .. ", bias=false" end
      return s
    end
  end

  -- Pools keep their options and hand them to the function.
  local function pool_class(name, fn, keys, positional)
    local P = Module:extend(name)
    nn[name] = P
    function P:__init(first, ...)
      Module.__init(self)
      local opts = ...
      if select("#", ...) > 1 or type(opts) == "number" or type(opts) == "table" and opts[1] then
        opts = {}
        for i = 1, select("#", ...) do opts[positional[i]] = (select(i, ...)) end
      end
      self.options = check_opts(opts, name, keys)
      self.first = first
    end
    function P:forward(x)
      return fn(x, self.first, self.options)
    end
    function P:extra_repr()
      local parts = { fmt(self.first) }
      for _, k in ipairs(positional) do
        if self.options[k] ~= nil then parts[#parts + 1] = k .. "=" .. fmt(self.options[k]) end
      end
      return table.concat(parts, ", ")
    end
    return P
  end

  for nd = 1, 3 do
    conv_class(nd, true)
    if nd ~= 2 then
      conv_class(nd, false)
      local mp = { "stride", "padding", "dilation", "ceil_mode", "return_indices" }
      local ap = { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" }
      local set = function(list) local t = {} for _, k in ipairs(list) do t[k] = true end return t end
      pool_class("MaxPool" .. nd .. "d", F["max_pool" .. nd .. "d"], set(mp), mp)
      pool_class("AvgPool" .. nd .. "d", F["avg_pool" .. nd .. "d"], set(ap), ap)
      local A = Module:extend("AdaptiveAvgPool" .. nd .. "d")
      nn["AdaptiveAvgPool" .. nd .. "d"] = A
      local afn = F["adaptive_avg_pool" .. nd .. "d"]
      function A:__init(output_size) Module.__init(self); self.output_size = output_size end
      function A:forward(x) return afn(x, self.output_size) end
      function A:extra_repr() return "output_size=" .. fmt(self.output_size) end
    end
  end
  local keys = { "dilation", "padding", "stride" }
  local U = pool_class("Unfold", F.unfold, { dilation = true, padding = true, stride = true }, keys)
  U.extra_repr = function(self) return "kernel_size=" .. fmt(self.first) end
  -- nn.Fold(output_size, kernel_size [, dilation, padding, stride | {...}])
  local Fo = Module:extend("Fold")
  nn.Fold = Fo
  function Fo:__init(output_size, kernel_size, ...)
    Module.__init(self)
    local opts = ...
    if select("#", ...) > 1 or type(opts) == "number" or type(opts) == "table" and opts[1] then
      opts = {}
      for i = 1, select("#", ...) do opts[keys[i]] = (select(i, ...)) end
    end
    self.options = check_opts(opts, "Fold", { dilation = true, padding = true, stride = true })
    self.output_size, self.kernel_size = output_size, kernel_size
  end
  function Fo:forward(x) return F.fold(x, self.output_size, self.kernel_size, self.options) end
  function Fo:extra_repr()
    return "output_size=" .. fmt(self.output_size) .. ", kernel_size=" .. fmt(self.kernel_size)
  end
end

return M
