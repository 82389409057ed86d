-- tide.nn.functional's normalizations, distances, resizing, padding, pixel shuffles, grid_sample,
-- adaptive_max_pool2d, dropout2d and bilinear. group_norm, instance_norm, interpolate, the pad
-- modes and the pixel shuffles are C composites (ops/nn_group_norm.c, nn_resize.c, nn_pad.c,
-- also tide.*); the rest are composites of tide ops here. Dims are 1-based.
local tide = require "tide"

local S = {}

local function shape_str(t)
  return "[" .. table.concat(t:size(), ", ") .. "]"
end

local function check_tensor(v, fn, what)
  if not tide.is_tensor(v) then
    error(("%s: %s must be a tensor, got %s"):format(fn, what, type(v)), 3)
  end
end

-- The p-norm of x along dim (keepdim): p = 1, 2, math.huge or any p > 0.
local function pnorm(x, p, dim, fn)
  if type(p) ~= "number" or p <= 0 then
    error(("%s: p must be a positive number, got %s"):format(fn, tostring(p)), 3)
  end
  if p == 2 then return tide.sqrt((x * x):sum(dim, true)) end
  local a = tide.abs(x)
  if p == 1 then return a:sum(dim, true) end
  if p == math.huge then return (a:max(dim, true)) end
  return tide.pow(tide.pow(a, p):sum(dim, true), 1 / p)
end

-- F.normalize(x [, {p=2, dim=2, eps=1e-12}]): x / max(||x||_p along dim, eps)
function S.normalize(x, opts)
  opts = opts or {}
  check_tensor(x, "normalize", "input")
  local dim = opts.dim or 2
  if x:dim() == 1 and opts.dim == nil then dim = 1 end
  local n = pnorm(x, opts.p or 2, dim, "normalize")
  return x / tide.clamp(n, opts.eps or 1e-12)
end

-- F.cosine_similarity(x1, x2 [, {dim=2, eps=1e-8}]): the sum along dim of x1/max(|x1|, eps)
-- times x2/max(|x2|, eps) (PyTorch 1.13's form); x1 and x2 broadcast
function S.cosine_similarity(x1, x2, opts)
  opts = opts or {}
  check_tensor(x1, "cosine_similarity", "x1")
  check_tensor(x2, "cosine_similarity", "x2")
  local dim = opts.dim or 2
  local eps = opts.eps or 1e-8
  local n1 = tide.clamp(pnorm(x1, 2, dim, "cosine_similarity"), eps)
  local n2 = tide.clamp(pnorm(x2, 2, dim, "cosine_similarity"), eps)
  return ((x1 / n1) * (x2 / n2)):sum(dim)
end

-- F.pairwise_distance(x1, x2 [, {p=2, eps=1e-6, keepdim=false}]): ||x1 - x2 + eps||_p over
-- the last dim
function S.pairwise_distance(x1, x2, opts)
  opts = opts or {}
  check_tensor(x1, "pairwise_distance", "x1")
  check_tensor(x2, "pairwise_distance", "x2")
  local d = x1 - x2 + (opts.eps or 1e-6)
  local n = pnorm(d, opts.p or 2, d:dim(), "pairwise_distance")
  if opts.keepdim then return n end
  return n:squeeze(d:dim())
end

-- F.group_norm(x, num_groups [, weight [, bias [, eps=1e-5]]])
function S.group_norm(x, num_groups, weight, bias, eps)
  return tide.group_norm(x, num_groups, weight, bias, eps or 1e-5)
end

-- F.instance_norm(x [, running_mean, running_var, weight, bias, use_input_stats=true,
-- momentum=0.1, eps=1e-5]): with running statistics, PyTorch's batch_norm over [1, N*C, ...]
-- (the statistics repeated per sample, updated with the samples' mean) or, without
-- use_input_stats, batch_norm in eval mode
function S.instance_norm(x, rm, rv, weight, bias, use_input_stats, momentum, eps)
  check_tensor(x, "instance_norm", "input")
  eps = eps or 1e-5
  if use_input_stats == nil then use_input_stats = true end
  if rm == nil and rv == nil then
    if not use_input_stats then
      error("instance_norm: use_input_stats = false needs running_mean and running_var", 2)
    end
    return tide.instance_norm(x, weight, bias, eps)
  end
  if not use_input_stats then
    return tide.batch_norm(x, rm, rv, weight, bias, false, momentum or 0.1, eps)
  end
  local n, c = x:size(1), x:size(2)
  local function rep(t) return t and t:view(1, c):expand(n, c):reshape(n * c) end
  local rm_rep, rv_rep = rep(rm):clone(), rep(rv):clone()
  local shape = x:size()
  local flat = x:reshape(1, n * c, -1)
  local y = tide.batch_norm(flat, rm_rep, rv_rep, rep(weight), rep(bias), true, momentum or 0.1,
                            eps)
  tide.no_grad(function()
    rm:copy_(rm_rep:view(n, c):mean(1))
    rv:copy_(rv_rep:view(n, c):mean(1))
  end)
  return y:reshape(shape)
end

local interp_keys = { size = true, scale_factor = true, mode = true, align_corners = true,
                      recompute_scale_factor = true, antialias = true }

-- F.interpolate(x, {size= | scale_factor=, mode="nearest", align_corners=false,
-- recompute_scale_factor=false}), or
-- F.interpolate(x, size [, scale_factor [, mode [, align_corners]]]) positionally. mode
-- "nearest", "nearest-exact", "linear" (3-D), "bilinear" (4-D), "trilinear" (5-D), or "area"
-- (4-D: adaptive_avg_pool2d, as PyTorch).
function S.interpolate(x, size, scale_factor, mode, align_corners)
  check_tensor(x, "interpolate", "input")
  local o
  if type(size) == "table" and (size.size ~= nil or size.scale_factor ~= nil or size.mode ~= nil
      or size.align_corners ~= nil) then
    o = size
  else
    o = { size = size, scale_factor = scale_factor, mode = mode, align_corners = align_corners }
  end
  for k in pairs(o) do
    if not interp_keys[k] then error(("interpolate: unknown option '%s'"):format(tostring(k)), 2) end
  end
  if o.antialias then error("interpolate: antialias is not supported", 2) end
  if o.recompute_scale_factor and o.scale_factor ~= nil then -- the size from the scale, then as a size
    local s, sf = {}, o.scale_factor
    for d = 3, x:dim() do
      s[d - 2] = math.floor(x:size(d) * (type(sf) == "table" and sf[d - 2] or sf))
    end
    o = { size = s, mode = o.mode, align_corners = o.align_corners }
  end
  o = { size = o.size, scale_factor = o.scale_factor, mode = o.mode, align_corners = o.align_corners }
  if o.mode == "area" then
    if x:dim() ~= 4 or o.size == nil then
      error("interpolate: mode \"area\" needs a 4-D input and a size", 2)
    end
    return tide.adaptive_avg_pool2d(x, o.size)
  end
  return tide.interpolate(x, o)
end

-- F.upsample: the old name of interpolate
S.upsample = S.interpolate

-- F.pad(x, pads [, mode="constant" [, value=0]]); F.pad(x, pads, value) still works
function S.pad(x, pads, mode, value)
  if type(mode) == "number" or mode == nil then
    return tide.pad(x, pads, mode)
  end
  if mode == "constant" then return tide.pad(x, pads, value) end
  return tide.pad_mode(x, pads, mode)
end

function S.pixel_shuffle(x, r) return tide.pixel_shuffle(x, r) end
function S.pixel_unshuffle(x, r) return tide.pixel_unshuffle(x, r) end

-- F.dropout2d(x, p=0.5, training=true): zeroes whole channels of [N, C, H, W] (or [C, H, W])
-- with probability p, scaling the rest by 1/(1-p)
function S.dropout2d(x, p, training)
  check_tensor(x, "dropout2d", "input")
  if type(p) == "table" then p, training = p.p, p.training end
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p > 1 then
    error("dropout2d: p must be in [0, 1], got " .. tostring(p), 2)
  end
  if x:dim() ~= 3 and x:dim() ~= 4 then
    error("dropout2d: the input must be [N, C, H, W] or [C, H, W], got " .. shape_str(x), 2)
  end
  if training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  local shape = x:size()
  for d = #shape - 1, #shape do shape[d] = 1 end
  local keep = tide.bernoulli(tide.full(shape, 1 - p, { dtype = x.dtype, device = x.device }))
  return x * keep / (1 - p)
end

-- F.adaptive_max_pool2d(x, output_size [, return_indices=false]): the maximum of each of
-- PyTorch's bins (rows floor(i*H/oh) .. ceil((i+1)*H/oh) - 1, the same for columns); with
-- return_indices also each maximum's 1-based position in its H*W plane (the first on ties)
function S.adaptive_max_pool2d(x, output_size, return_indices)
  check_tensor(x, "adaptive_max_pool2d", "input")
  if type(return_indices) == "table" then return_indices = return_indices.return_indices end
  local oh, ow = output_size, output_size
  if type(output_size) == "table" then oh, ow = output_size[1], output_size[2] end
  if x:dim() ~= 4 and x:dim() ~= 3 then
    error("adaptive_max_pool2d: the input must be [N, C, H, W] or [C, H, W], got " .. shape_str(x), 2)
  end
  local x4 = x:dim() == 3 and x:unsqueeze(1) or x
  local n, c, h, w = table.unpack(x4:size())
  oh, ow = oh or h, ow or w
  if math.type(oh) ~= "integer" or math.type(ow) ~= "integer" or oh < 1 or ow < 1 or h < 1 or w < 1 then
    error(("adaptive_max_pool2d: output size %s x %s does not fit the input %s"):format(
      tostring(oh), tostring(ow), shape_str(x)), 2)
  end
  local vals, idxs = {}, {}
  for i = 0, oh - 1 do
    local hs, he = (i * h) // oh, -((-(i + 1) * h) // oh)
    for j = 0, ow - 1 do
      local ws, we = (j * w) // ow, -((-(j + 1) * w) // ow)
      local kw = we - ws
      local bin = x4:narrow(3, hs + 1, he - hs):narrow(4, ws + 1, kw):reshape(n, c, -1)
      local v, k = bin:max(3)
      vals[#vals + 1] = v
      if return_indices then
        local k0 = k - 1
        local row = tide.floor_divide(k0, kw)
        idxs[#idxs + 1] = (row + hs) * w + (k0 - row * kw) + ws + 1
      end
    end
  end
  local out = tide.stack(vals, 3):reshape(n, c, oh, ow)
  local ind = return_indices and tide.stack(idxs, 3):reshape(n, c, oh, ow)
  if x:dim() == 3 then
    out = out:squeeze(1)
    ind = ind and ind:squeeze(1)
  end
  if return_indices then return out, ind end
  return out
end

-- F.bilinear(x1, x2, weight [out, in1, in2] [, bias [out]]): x1^T W[o] x2 + b[o] over the last
-- dim; leading dims are a batch
function S.bilinear(x1, x2, weight, bias)
  check_tensor(x1, "bilinear", "input1")
  check_tensor(x2, "bilinear", "input2")
  check_tensor(weight, "bilinear", "weight")
  local o, i1, i2 = table.unpack(weight:size())
  if weight:dim() ~= 3 or x1:size(x1:dim()) ~= i1 or x2:size(x2:dim()) ~= i2 then
    error(("bilinear: input1 %s and input2 %s do not fit the weight %s [out, in1, in2]"):format(
      shape_str(x1), shape_str(x2), shape_str(weight)), 2)
  end
  local lead = x1:size()
  lead[#lead] = nil
  local a = x1:reshape(-1, i1)
  local b = x2:reshape(-1, i2)
  local t = tide.matmul(a, weight:permute(2, 1, 3):reshape(i1, o * i2)):view(-1, o, i2)
  local y = (t * b:unsqueeze(2)):sum(3)
  if bias ~= nil then y = y + bias end
  lead[#lead + 1] = o
  return y:reshape(lead)
end

-- F.grid_sample(input, grid [, {mode="bilinear"|"nearest"|"bicubic",
-- padding_mode="zeros"|"border"|"reflection", align_corners=false}]): ops/nn_grid_sample.c
S.grid_sample = tide.grid_sample

return S
