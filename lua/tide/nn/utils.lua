-- tide.nn.utils — helpers on a model's parameters, with torch.nn.utils' names.
--
--   local total = nn.utils.clip_grad_norm_(model:parameters(), 1.0)   -- after loss:backward()
--
-- Everything is tide ops under no_grad (no value is read back unless error_if_nonfinite asks),
-- so a traced training step (tide.jit) records the clipping as ordinary ops.
local tide = require "tide"

local utils = {}

local function grads_of(params, fname)
  if tide.is_tensor(params) then
    params = { params }
  end
  if type(params) ~= "table" then
    error(("%s: expected a tensor or a list of tensors, got %s"):format(fname, type(params)), 3)
  end
  local grads = {}
  for i, p in ipairs(params) do
    if not tide.is_tensor(p) then
      error(("%s: parameter %d is a %s, not a tensor"):format(fname, i, type(p)), 3)
    end
    if p.grad ~= nil then
      grads[#grads + 1] = p.grad
    end
  end
  return grads
end

-- norm_type: a positive number, or math.huge / "inf" for the largest absolute value.
local function check_norm_type(norm_type, fname)
  if norm_type == "inf" then
    return math.huge
  end
  if type(norm_type) ~= "number" or not (norm_type > 0) then
    error(("%s: norm_type must be a positive number or \"inf\", got %s"):format(
      fname, tostring(norm_type)), 3)
  end
  return norm_type
end

-- The p-norm of all gradients together, as a 0-dim tensor of the first gradient's dtype. It
-- equals PyTorch's norm of the per-gradient norms: (sum_i ||g_i||_p^p)^(1/p).
local function total_norm(grads, p)
  local dtype = grads[1].dtype
  local total
  for _, g in ipairs(grads) do
    local part
    if p == math.huge then
      part = tide.max(tide.abs(g))
    elseif p == 2 then
      -- sums along the last dim first: the product and those sums are one pass under the jit
      -- (a row group), where one sum over a whole matrix would read back a stored g * g
      local sq = g * g
      part = tide.sum(g:dim() > 1 and sq:sum(g:dim()) or sq)
    elseif p == 1 then
      part = tide.sum(tide.abs(g))
    else
      part = tide.sum(tide.abs(g) ^ p)
    end
    part = part:to(dtype)
    if total == nil then
      total = part
    elseif p == math.huge then
      total = tide.maximum(total, part)
    else
      total = total + part
    end
  end
  if p == 2 then
    return tide.sqrt(total)
  elseif p ~= 1 and p ~= math.huge then
    return total ^ (1 / p)
  end
  return total
end

-- nn.utils.clip_grad_norm_(params, max_norm [, {norm_type=2, error_if_nonfinite=false}]):
-- scales every gradient in place by min(1, max_norm / (total + 1e-6)) and returns the total norm
-- (a 0-dim tensor) from before the scaling, as torch.nn.utils.clip_grad_norm_.
function utils.clip_grad_norm_(params, max_norm, opts)
  local fname = "clip_grad_norm_"
  if opts ~= nil and type(opts) ~= "table" then
    error(fname .. ": options must be a table, got " .. type(opts), 2)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "norm_type" and k ~= "error_if_nonfinite" and k ~= "foreach" then
      error(("%s: unknown option '%s'"):format(fname, tostring(k)), 2)
    end
  end
  if type(max_norm) ~= "number" or max_norm ~= max_norm then
    error(fname .. ": max_norm must be a number, got " .. tostring(max_norm), 2)
  end
  local p = check_norm_type(opts.norm_type or 2, fname)
  local grads = grads_of(params, fname)
  if #grads == 0 then
    return tide.zeros({})
  end
  local total = tide.no_grad(function() return total_norm(grads, p) end)
  if opts.error_if_nonfinite then
    local v = total:item()
    if v ~= v or v == math.huge then
      error(("%s: the total norm of order %s of the gradients is non-finite (%s), so it cannot "
        .. "be clipped; pass error_if_nonfinite = false to clip anyway"):format(
        fname, tostring(opts.norm_type or 2), tostring(v)), 2)
    end
  end
  tide.no_grad(function()
    local coef = tide.clamp(max_norm / (total + 1e-6), nil, 1.0)
    for _, g in ipairs(grads) do
      g:copy_(g * coef:to(g.dtype))
    end
  end)
  return total
end

return utils
