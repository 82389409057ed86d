-- tide.nn.functional — torch.nn.functional's names and argument order, options in a trailing
-- table. Class targets are 1-based (1..C) and dims are 1-based, as everywhere in tide's Lua API.
--
--   local F = require "tide.nn.functional"
--   F.linear(x, w, b)                     F.conv2d(x, w, b, {stride=1, padding=0, dilation=1, groups=1})
--   F.max_pool2d(x, k, {stride=, padding=})  F.avg_pool2d(x, k, {stride=, padding=, count_include_pad=})
--   F.cross_entropy(logits, target [, {reduction="mean", label_smoothing=0, ignore_index=}])
--   F.softmax(x, dim)  F.log_softmax(x, dim)  F.dropout(x, p, training)  F.layer_norm(x, shape, w, b, eps)
--   F.rms_norm(x, shape, w, eps)
--   F.scaled_dot_product_attention(q, k, v, {attn_mask=, is_causal=, dropout_p=, scale=})
local tide = require "tide"

local F = {}

local function opt(t, name, fn)
  if t ~= nil and type(t) ~= "table" then
    error(("%s: options must be a table, got %s"):format(fn, type(t)), 3)
  end
  return t and t[name]
end

local function check_keys(t, fn, allowed)
  if t == nil then
    return
  end
  for k in pairs(t) do
    if not allowed[k] then
      error(("%s: unknown option '%s'"):format(fn, tostring(k)), 3)
    end
  end
end

function F.linear(x, weight, bias)
  return tide.linear(x, weight, bias)
end

local conv_keys = { stride = true, padding = true, dilation = true, groups = true }
function F.conv2d(x, weight, bias, opts)
  if type(opts) ~= "table" then
    if opts ~= nil then
      error("conv2d: options must be a table {stride=, padding=, dilation=, groups=}", 2)
    end
    return tide.conv2d(x, weight, bias)
  end
  check_keys(opts, "conv2d", conv_keys)
  return tide.conv2d(x, weight, bias, opts)
end

local pool_keys = { stride = true, padding = true, return_indices = true, ceil_mode = true,
                    count_include_pad = true, dilation = true }
local function pool_opts(opts, fn)
  if type(opts) == "number" or type(opts) == "table" and opts[1] ~= nil then
    return { stride = opts } -- F.max_pool2d(x, 2, 2) or a {sh, sw} pair
  end
  check_keys(opts, fn, pool_keys)
  if opts and opts.ceil_mode then
    error(fn .. ": ceil_mode = true is not supported", 3)
  end
  if opts and opts.dilation and opts.dilation ~= 1 then
    error(fn .. ": dilation other than 1 is not supported", 3)
  end
  if opts and (opts.ceil_mode ~= nil or opts.dilation ~= nil) then
    local o = {}
    for k, v in pairs(opts) do
      if k ~= "ceil_mode" and k ~= "dilation" then o[k] = v end
    end
    return o
  end
  return opts
end

-- F.max_pool2d(x, kernel_size [, {stride=kernel_size, padding=0, return_indices=false}]):
-- with return_indices, also the 1-based positions of the maxima in each H*W plane.
function F.max_pool2d(x, kernel_size, opts)
  local o = pool_opts(opts, "max_pool2d")
  if o then
    if o.return_indices then
      return tide.max_pool2d(x, kernel_size, { stride = o.stride, padding = o.padding,
                                               return_indices = true })
    end
    return tide.max_pool2d(x, kernel_size, { stride = o.stride, padding = o.padding })
  end
  return tide.max_pool2d(x, kernel_size)
end

function F.avg_pool2d(x, kernel_size, opts)
  local o = pool_opts(opts, "avg_pool2d")
  if o then
    if o.return_indices ~= nil then
      error("avg_pool2d: unknown option 'return_indices'", 2)
    end
    return tide.avg_pool2d(x, kernel_size, o)
  end
  return tide.avg_pool2d(x, kernel_size)
end

function F.adaptive_avg_pool2d(x, output_size)
  return tide.adaptive_avg_pool2d(x, output_size)
end

function F.relu(x)
  return tide.relu(x)
end

-- The elementwise activations below are C composites (ops/nn_activation_more.c): expm1 and
-- log1p keep small values exact. Keyword options as PyTorch's, positionally or as a table.
function F.relu6(x)
  return tide.relu6(x)
end

function F.leaky_relu(x, negative_slope)
  return tide.leaky_relu(x, negative_slope)
end

function F.elu(x, alpha)
  return tide.elu(x, alpha)
end

function F.selu(x) return tide.selu(x) end
function F.celu(x, alpha) return tide.celu(x, alpha) end
function F.mish(x) return tide.mish(x) end
function F.softsign(x) return tide.softsign(x) end
function F.hardtanh(x, min_val, max_val) return tide.hardtanh(x, min_val, max_val) end
function F.hardswish(x) return tide.hardswish(x) end
function F.hardsigmoid(x) return tide.hardsigmoid(x) end
function F.logsigmoid(x) return tide.logsigmoid(x) end
-- F.glu(x [, dim = -1]): the first half of dim times the sigmoid of the second (1-based dim)
function F.glu(x, dim) return tide.glu(x, dim) end

-- F.gelu(x [, {approximate = "none" | "tanh"}]) (a plain string works too)
function F.gelu(x, opts)
  local approximate = type(opts) == "string" and opts or opt(opts, "approximate", "gelu")
  if approximate ~= nil then
    return tide.gelu(x, approximate)
  end
  return tide.gelu(x)
end

function F.silu(x)
  return tide.silu(x)
end

function F.sigmoid(x)
  return tide.sigmoid(x)
end

function F.tanh(x)
  return tide.tanh(x)
end

function F.softplus(x, beta, threshold)
  -- log1p(exp(beta x)) / beta, x itself above the threshold, as PyTorch
  return tide.softplus(x, beta, threshold)
end

function F.softmax(x, dim)
  if dim == nil then
    error("softmax: dim is required (1-based; -1 is the last)", 2)
  end
  return tide.softmax(x, dim)
end

function F.log_softmax(x, dim)
  if dim == nil then
    error("log_softmax: dim is required (1-based; -1 is the last)", 2)
  end
  return tide.log_softmax(x, dim)
end

-- F.scaled_dot_product_attention(q, k, v [, {attn_mask=, is_causal=false, dropout_p=0, scale=}]):
-- softmax(q k^T * scale + mask) v by one fused kernel that never stores the L x S scores.
-- q [..., L, E], k [..., S, E], v [..., S, Ev]; a bool attn_mask is true where a key takes part
-- (PyTorch's meaning here, unlike MultiheadAttention's), a float one is added.
local sdpa_keys = { attn_mask = true, is_causal = true, dropout_p = true, scale = true }
function F.scaled_dot_product_attention(q, k, v, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("scaled_dot_product_attention: options must be a table {attn_mask=, is_causal=, "
          .. "dropout_p=, scale=}, got " .. type(opts), 2)
  end
  check_keys(opts, "scaled_dot_product_attention", sdpa_keys)
  return tide.scaled_dot_product_attention(q, k, v, opts)
end

-- F.dropout(x, p=0.5, training=true) (torch's default training=True for the functional form)
function F.dropout(x, p, training)
  if type(p) == "table" then -- F.dropout(x, {p=, training=})
    p, training = p.p, p.training
  end
  if training == nil then
    training = true
  end
  return tide.dropout(x, p or 0.5, training)
end

-- F.layer_norm(x, normalized_shape [, weight [, bias [, eps=1e-5]]])
function F.layer_norm(x, normalized_shape, weight, bias, eps)
  return tide.layer_norm(x, normalized_shape, weight, bias, eps or 1e-5)
end

-- Machine epsilon of a floating dtype (torch.finfo(dtype).eps): RMSNorm's default eps.
local finfo_eps = { float32 = 2.0 ^ -23, float64 = 2.0 ^ -52, float16 = 2.0 ^ -10,
                    bfloat16 = 2.0 ^ -7 }
F.finfo_eps = finfo_eps

local function shape_str(t)
  return "[" .. table.concat(t, ", ") .. "]"
end

-- F.rms_norm(x, normalized_shape [, weight [, eps]]) as torch.nn.functional.rms_norm:
-- x / sqrt(mean(x^2 over the last #normalized_shape dims) + eps) * weight; eps defaults to the
-- machine epsilon of x's dtype. Composed of tide ops, so autograd and tracing see it.
function F.rms_norm(x, normalized_shape, weight, eps)
  if not tide.is_tensor(x) then
    error("rms_norm: expected a tensor input, got " .. type(x), 2)
  end
  if type(normalized_shape) ~= "table" then normalized_shape = { normalized_shape } end
  local size, k = x:size(), #normalized_shape
  local ok = k >= 1 and #size >= k
  for i = 1, k do
    ok = ok and size[#size - k + i] == normalized_shape[i]
  end
  if not ok then
    error(("rms_norm: normalized_shape %s does not match the last dims of the input %s")
      :format(shape_str(normalized_shape), shape_str(size)), 2)
  end
  eps = eps or finfo_eps[x.dtype]
  if eps == nil then
    error("rms_norm: the input is " .. x.dtype .. "; expected a floating-point tensor", 2)
  end
  local dims = {}
  for i = 1, k do dims[i] = #size - k + i end
  -- float16/bfloat16 compute in float32 and round once (as the C norms do, ops/autocast.h);
  -- under autocast the result stays float32, as PyTorch's autocast keeps norms in float32
  local half = x.dtype == "float16" or x.dtype == "bfloat16"
  local xf = half and x:float() or x
  local y = xf * tide.rsqrt(tide.mean(xf * xf, dims, true) + eps)
  if weight ~= nil then
    y = y * (half and weight:float() or weight)
  end
  if half and tide.get_autocast() == nil and (weight == nil or weight.dtype == x.dtype) then
    y = y:to(x.dtype)
  end
  return y
end

-- F.batch_norm(x, running_mean, running_var [, weight [, bias [, training=false [, momentum=0.1
-- [, eps=1e-5]]]]]) as torch.nn.functional.batch_norm
function F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
  return tide.batch_norm(x, running_mean, running_var, weight, bias, training or false,
                         momentum or 0.1, eps or 1e-5)
end

-- F.embedding(input, weight): input holds 1-based row indices
function F.embedding(input, weight)
  return tide.embedding(input, weight)
end

-- F.one_hot(indices [, num_classes]): 1-based classes
function F.one_hot(indices, num_classes)
  return tide.one_hot(indices, num_classes)
end

-- Losses: options are a reduction name or a table {reduction=, label_smoothing=, ignore_index=}
function F.cross_entropy(logits, target, opts)
  if opts == nil then
    return tide.cross_entropy(logits, target)
  end
  return tide.cross_entropy(logits, target, opts)
end

function F.nll_loss(log_probs, target, opts)
  if opts == nil then
    return tide.nll_loss(log_probs, target)
  end
  return tide.nll_loss(log_probs, target, opts)
end

function F.mse_loss(input, target, opts)
  if opts == nil then
    return tide.mse_loss(input, target)
  end
  return tide.mse_loss(input, target, opts)
end

function F.l1_loss(input, target, opts)
  local reduction = type(opts) == "string" and opts or opt(opts, "reduction", "l1_loss") or "mean"
  local d = tide.abs(input - target)
  if reduction == "mean" then
    return d:mean()
  elseif reduction == "sum" then
    return d:sum()
  elseif reduction == "none" then
    return d
  end
  error(("l1_loss: reduction must be \"mean\", \"sum\" or \"none\", got %q"):format(
    tostring(reduction)), 2)
end

function F.binary_cross_entropy_with_logits(logits, target, opts)
  if opts == nil then
    return tide.binary_cross_entropy_with_logits(logits, target)
  end
  return tide.binary_cross_entropy_with_logits(logits, target, opts)
end


function F.flatten(x, start_dim, end_dim)
  return x:flatten(start_dim or 1, end_dim or -1)
end

-- losses, normalizations, resizing, padding modes, grid_sample: lua/tide/nn/functional_*.lua
for _, part in ipairs({ "tide.nn.functional_loss", "tide.nn.functional_spatial" }) do
  for k, v in pairs(require(part)) do F[k] = v end
end

return F
