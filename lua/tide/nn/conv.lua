-- tide.nn's convolution family beyond conv2d, kept apart from nn.lua: F.conv1d/conv3d,
-- F.conv_transpose1d/2d/3d, F.max_pool1d/3d, F.avg_pool1d/3d, F.adaptive_avg_pool1d/3d,
-- F.unfold/fold (also as tide.conv1d, ...), and their modules (nn.Conv1d, nn.Conv3d,
-- nn.ConvTranspose1d/2d/3d, nn.MaxPool1d/3d, nn.AvgPool1d/3d, nn.AdaptiveAvgPool1d/3d,
-- nn.Unfold, nn.Fold). PyTorch's argument names and order; options either positional or as one
-- trailing table. The ops are C composites of the conv2d and pool2d primitives
-- (ops/conv_nd.c, pool_nd.c, fold.c, bound in lua/ltide_conv_nd.c as tide._conv_nd, ...).
local tide = require "tide"

local conv = {}

-- v (an integer or a table of nd integers) as a table of nd integers.
local function tuple(v, nd, op, what)
  if type(v) == "table" then
    if #v ~= nd then
      error(("%s: %s must be an integer or %d integers, got %d values"):format(op, what, nd, #v), 4)
    end
    return v
  end
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    error(("%s: %s must be an integer or %d integers, got %s"):format(op, what, nd, tostring(v)), 4)
  end
  local t = {}
  for i = 1, nd do t[i] = math.tointeger(v) end
  return t
end

-- The options of a call: one trailing table with named fields, or positional values named by
-- names (in PyTorch's order). Unknown keys are an error.
local function options(op, names, ...)
  local first = ...
  if select("#", ...) == 1 and type(first) == "table" and first[1] == nil then
    local allowed = {}
    for _, n in ipairs(names) do allowed[n] = true end
    for k in pairs(first) do
      if not allowed[k] then error(("%s: unknown option '%s'"):format(op, tostring(k)), 3) end
    end
    return first
  end
  local o, n = {}, select("#", ...)
  if n > #names then error(("%s: too many arguments"):format(op), 3) end
  for i = 1, n do o[names[i]] = (select(i, ...)) end
  return o
end

-- An unbatched input ([C, ...], nd + 1 dims) runs as a batch of one, as PyTorch.
local function batched(x, nd, fn)
  if tide.is_tensor(x) and x:dim() == nd + 1 then
    local r, i = fn(x:unsqueeze(1))
    return r:squeeze(1), i and i:squeeze(1)
  end
  return fn(x)
end

local function kernel_of(w, nd)
  local k = {}
  for i = 1, nd do k[i] = w.shape[2 + i] end
  return k
end

-- padding "valid", "same" (stride 1; an odd total goes one more to the end, as PyTorch) or
-- sizes: the symmetric padding, and x padded beforehand for the odd remainder.
local function conv_padding(op, x, w, nd, padding, stride, dilation)
  if padding == "valid" then return x, tuple(0, nd) end
  if padding ~= "same" then
    if type(padding) == "string" then
      error(("%s: padding must be a number, %d numbers, \"valid\" or \"same\", got \"%s\"")
        :format(op, nd, padding), 4)
    end
    return x, tuple(padding or 0, nd, op, "padding")
  end
  for i = 1, nd do
    if stride[i] ~= 1 then error(op .. ": padding \"same\" needs stride 1", 4) end
  end
  local k, sym, extra, odd = kernel_of(w, nd), {}, {}, false
  for i = 1, nd do
    local total = dilation[i] * (k[i] - 1)
    sym[i], extra[i] = total // 2, total % 2
    odd = odd or extra[i] == 1
  end
  if odd then -- tide.pad's pairs start from the last dim
    local pads = {}
    for i = nd, 1, -1 do pads[#pads + 1] = 0; pads[#pads + 1] = extra[i] end
    x = tide.pad(x, pads)
  end
  return x, sym
end

local function conv_fn(nd)
  local op = "conv" .. nd .. "d"
  local names = { "stride", "padding", "dilation", "groups" }
  return function(x, weight, bias, ...)
    local o = options(op, names, ...)
    local stride = tuple(o.stride or 1, nd, op, "stride")
    local dilation = tuple(o.dilation or 1, nd, op, "dilation")
    return batched(x, nd, function(xb)
      local xp, padding = conv_padding(op, xb, weight, nd, o.padding, stride, dilation)
      return tide._conv_nd(nd, xp, weight, bias, stride, padding, dilation, o.groups or 1)
    end)
  end
end

local function conv_transpose_fn(nd)
  local op = "conv_transpose" .. nd .. "d"
  local names = { "stride", "padding", "output_padding", "groups", "dilation" }
  return function(x, weight, bias, ...)
    local o = options(op, names, ...)
    return batched(x, nd, function(xb)
      return tide._conv_transpose_nd(nd, xb, weight, bias, tuple(o.stride or 1, nd, op, "stride"),
                                     tuple(o.padding or 0, nd, op, "padding"),
                                     tuple(o.output_padding or 0, nd, op, "output_padding"),
                                     o.groups or 1, tuple(o.dilation or 1, nd, op, "dilation"))
    end)
  end
end

local function max_pool_fn(nd)
  local op = "max_pool" .. nd .. "d"
  local names = { "stride", "padding", "dilation", "ceil_mode", "return_indices" }
  return function(x, kernel_size, ...)
    local o = options(op, names, ...)
    if o.dilation ~= nil and o.dilation ~= 1 then
      error(op .. ": dilation other than 1 is not supported", 2)
    end
    local k = tuple(kernel_size, nd, op, "kernel_size")
    return batched(x, nd, function(xb)
      return tide._pool_nd(nd, true, xb, k, o.stride and tuple(o.stride, nd, op, "stride") or k,
                           tuple(o.padding or 0, nd, op, "padding"), o.ceil_mode == true,
                           o.return_indices == true)
    end)
  end
end

local function avg_pool_fn(nd)
  local op = "avg_pool" .. nd .. "d"
  local names = { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" }
  return function(x, kernel_size, ...)
    local o = options(op, names, ...)
    if o.divisor_override ~= nil then error(op .. ": divisor_override is not supported", 2) end
    local k = tuple(kernel_size, nd, op, "kernel_size")
    return batched(x, nd, function(xb)
      return tide._pool_nd(nd, false, xb, k, o.stride and tuple(o.stride, nd, op, "stride") or k,
                           tuple(o.padding or 0, nd, op, "padding"), o.ceil_mode == true,
                           o.count_include_pad ~= false)
    end)
  end
end

local function adaptive_fn(nd)
  local op = "adaptive_avg_pool" .. nd .. "d"
  return function(x, output_size)
    local size = tuple(output_size, nd, op, "output_size")
    return batched(x, nd, function(xb) return tide._adaptive_avg_pool_nd(nd, xb, size) end)
  end
end

local function unfold(x, kernel_size, ...)
  local o = options("unfold", { "dilation", "padding", "stride" }, ...)
  local function p(v, what, d) return tuple(v or d, 2, "unfold", what) end
  return batched(x, 2, function(xb)
    return tide._unfold(xb, p(kernel_size, "kernel_size"), p(o.dilation, "dilation", 1),
                        p(o.padding, "padding", 0), p(o.stride, "stride", 1))
  end)
end

local function fold(x, output_size, kernel_size, ...)
  local o = options("fold", { "dilation", "padding", "stride" }, ...)
  local function p(v, what, d) return tuple(v or d, 2, "fold", what) end
  return batched(x, 1, function(xb)
    return tide._fold(xb, p(output_size, "output_size"), p(kernel_size, "kernel_size"),
                      p(o.dilation, "dilation", 1), p(o.padding, "padding", 0),
                      p(o.stride, "stride", 1))
  end)
end

-- The functional forms, by name; tide.nn installs them into F, and tide.X (as torch.conv1d)
-- are C forwarders to them until then (lua/ltide_conv_nd.c), replaced by them here.
conv.functions = {
  conv1d = conv_fn(1), conv3d = conv_fn(3),
  conv_transpose1d = conv_transpose_fn(1), conv_transpose2d = conv_transpose_fn(2),
  conv_transpose3d = conv_transpose_fn(3),
  max_pool1d = max_pool_fn(1), max_pool3d = max_pool_fn(3),
  avg_pool1d = avg_pool_fn(1), avg_pool3d = avg_pool_fn(3),
  adaptive_avg_pool1d = adaptive_fn(1), adaptive_avg_pool3d = adaptive_fn(3),
  unfold = unfold, fold = fold,
}

local function install_functional(F)
  for name, fn in pairs(conv.functions) do
    F[name] = fn
    if name ~= "unfold" and name ~= "fold" then rawset(tide, name, fn) end
  end
end

conv.install_functional = install_functional
conv.tuple = tuple
return conv
