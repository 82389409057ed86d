-- tide.nn.functional's losses beyond the C ones (cross_entropy, nll_loss, mse_loss,
-- binary_cross_entropy_with_logits): composites of tide ops, so autograd, the jit and every
-- device see ordinary primitives. PyTorch's formulas, names and argument order; the options
-- (reduction="mean"|"sum"|"none" and each loss's own) come as a trailing table, or the
-- reduction as a string. Class indices and the CTC blank are 1-based, as everywhere in Lua.
local tide = require "tide"

local L = {}

-- The options table of loss fn (a string is the reduction), checked against its keys.
local function options(opts, fn, allowed)
  if opts == nil then return {} end
  if type(opts) == "string" then return { reduction = opts } end
  if type(opts) ~= "table" then
    error(("%s: options must be a table or a reduction name, got %s"):format(fn, type(opts)), 3)
  end
  for k in pairs(opts) do
    if k ~= "reduction" and not allowed[k] then
      error(("%s: unknown option '%s'"):format(fn, tostring(k)), 3)
    end
  end
  return opts
end

local function reduce(x, reduction, fn)
  reduction = reduction or "mean"
  if reduction == "mean" then return x:mean() end
  if reduction == "sum" then return x:sum() end
  if reduction == "none" then return x end
  error(("%s: reduction must be \"mean\", \"sum\" or \"none\", got %q"):format(fn,
    tostring(reduction)), 3)
end

local function check_tensor(v, fn, what)
  if not tide.is_tensor(v) then
    error(("%s: %s must be a tensor, got %s"):format(fn, what, type(v)), 3)
  end
end

-- input and target of the same shape (PyTorch warns and broadcasts; tide asks for equal shapes)
local function same_shape(a, b, fn, an, bn)
  check_tensor(a, fn, an)
  check_tensor(b, fn, bn)
  local sa, sb = a:size(), b:size()
  local ok = #sa == #sb
  for i = 1, #sa do ok = ok and sa[i] == sb[i] end
  if not ok then
    error(("%s: %s has shape [%s] but %s has shape [%s]"):format(fn, an, table.concat(sa, ", "),
      bn, table.concat(sb, ", ")), 3)
  end
end

-- F.smooth_l1_loss(input, target [, {reduction=, beta=1}])
function L.smooth_l1_loss(input, target, opts)
  local o = options(opts, "smooth_l1_loss", { beta = true })
  same_shape(input, target, "smooth_l1_loss", "input", "target")
  local beta = o.beta or 1.0
  local d = tide.abs(input - target)
  if beta == 0 then return reduce(d, o.reduction, "smooth_l1_loss") end
  local l = tide.where(d:lt(beta), d * d * (0.5 / beta), d - 0.5 * beta)
  return reduce(l, o.reduction, "smooth_l1_loss")
end

-- F.huber_loss(input, target [, {reduction=, delta=1}])
function L.huber_loss(input, target, opts)
  local o = options(opts, "huber_loss", { delta = true })
  same_shape(input, target, "huber_loss", "input", "target")
  local delta = o.delta or 1.0
  local d = tide.abs(input - target)
  local l = tide.where(d:lt(delta), d * d * 0.5, (d - 0.5 * delta) * delta)
  return reduce(l, o.reduction, "huber_loss")
end

-- F.binary_cross_entropy(input, target [, {weight=, reduction=}]): input holds probabilities;
-- each log is clamped at -100, as PyTorch, so 0 and 1 give finite losses.
function L.binary_cross_entropy(input, target, opts)
  local o = options(opts, "binary_cross_entropy", { weight = true })
  same_shape(input, target, "binary_cross_entropy", "input", "target")
  local lx = tide.clamp(tide.log(input), -100)
  local l1x = tide.clamp(tide.log(1 - input), -100)
  local l = -(target * lx + (1 - target) * l1x)
  if o.weight ~= nil then l = l * o.weight end
  return reduce(l, o.reduction, "binary_cross_entropy")
end

-- F.kl_div(input, target [, {reduction="mean"|"batchmean"|"sum"|"none", log_target=false}]):
-- input holds log-probabilities; target probabilities (log-probabilities with log_target).
function L.kl_div(input, target, opts)
  local o = options(opts, "kl_div", { log_target = true })
  same_shape(input, target, "kl_div", "input", "target")
  local l
  if o.log_target then
    l = tide.exp(target) * (target - input)
  else -- xlogy: a zero target contributes 0 (not 0 * -inf)
    local pos = target:gt(0)
    local safe = tide.where(pos, target, target * 0 + 1)
    l = tide.where(pos, target * (tide.log(safe) - input), target * 0)
  end
  if o.reduction == "batchmean" then
    return l:sum() / (input:dim() > 0 and input:size(1) or 1)
  end
  return reduce(l, o.reduction, "kl_div")
end

-- F.margin_ranking_loss(x1, x2, y [, {margin=0, reduction=}]): max(0, -y (x1 - x2) + margin)
function L.margin_ranking_loss(x1, x2, y, opts)
  local o = options(opts, "margin_ranking_loss", { margin = true })
  same_shape(x1, x2, "margin_ranking_loss", "input1", "input2")
  same_shape(x1, y, "margin_ranking_loss", "input1", "target")
  local l = tide.clamp(-y * (x1 - x2) + (o.margin or 0), 0)
  return reduce(l, o.reduction, "margin_ranking_loss")
end

-- F.hinge_embedding_loss(x, y [, {margin=1, reduction=}]): x where y = 1, max(0, margin - x)
-- where y = -1 (PyTorch's two masks, so other targets add both terms)
function L.hinge_embedding_loss(x, y, opts)
  local o = options(opts, "hinge_embedding_loss", { margin = true })
  same_shape(x, y, "hinge_embedding_loss", "input", "target")
  local zero = x * 0
  local m = tide.clamp((o.margin or 1.0) - x, 0)
  local l = tide.where(y:ne(1), m, zero) + tide.where(y:ne(-1), x, zero)
  return reduce(l, o.reduction, "hinge_embedding_loss")
end

-- log(1 + exp(v)) without overflow: max(v, 0) + log1p(exp(-|v|))
local function softplus(v)
  return tide.clamp(v, 0) + tide.log(tide.exp(-tide.abs(v)) + 1)
end

-- F.soft_margin_loss(x, y [, {reduction=}]): log(1 + exp(-y x))
function L.soft_margin_loss(x, y, opts)
  local o = options(opts, "soft_margin_loss", {})
  same_shape(x, y, "soft_margin_loss", "input", "target")
  return reduce(softplus(-y * x), o.reduction, "soft_margin_loss")
end

-- F.multi_margin_loss(x [N, C] or [C], y (1-based classes) [, {p=1, margin=1, weight=,
-- reduction=}]): sum over i ~= y of max(0, margin - x[y] + x[i])^p * weight[y], divided by C
function L.multi_margin_loss(x, y, opts)
  local o = options(opts, "multi_margin_loss", { p = true, margin = true, weight = true })
  check_tensor(x, "multi_margin_loss", "input")
  check_tensor(y, "multi_margin_loss", "target")
  local p = o.p or 1
  if p ~= 1 and p ~= 2 then
    error("multi_margin_loss: p must be 1 or 2, got " .. tostring(p), 2)
  end
  local one = x:dim() == 1
  local x2 = one and x:unsqueeze(1) or x
  local y2 = y:reshape(-1, 1)
  if x2:dim() ~= 2 or y2:size(1) ~= x2:size(1) then
    error(("multi_margin_loss: input must be [N, C] or [C] and target [N], got [%s] and [%s]")
      :format(table.concat(x:size(), ", "), table.concat(y:size(), ", ")), 2)
  end
  local c = x2:size(2)
  local xy = x2:gather(2, y2)
  local m = tide.clamp(-xy + x2 + (o.margin or 1.0), 0)
  if p == 2 then m = m * m end
  if o.weight ~= nil then m = m * o.weight:index_select(1, y2:reshape(-1)):unsqueeze(2) end
  local others = tide.one_hot(y2:reshape(-1), c):eq(0)
  local l = tide.where(others, m, m * 0):sum(2) / c
  if one then l = l:reshape({}) end
  return reduce(l, o.reduction, "multi_margin_loss")
end

-- The cosine of x1 and x2 along their last dim, as cosine_embedding_loss computes it
-- (EPSILON 1e-12 added to each squared magnitude)
local function embedding_cosine(x1, x2)
  local d = x1:dim()
  local prod = (x1 * x2):sum(d)
  local m1 = (x1 * x1):sum(d) + 1e-12
  local m2 = (x2 * x2):sum(d) + 1e-12
  return prod / tide.sqrt(m1 * m2)
end

-- F.cosine_embedding_loss(x1, x2, y [, {margin=0, reduction=}]): 1 - cos where y = 1,
-- max(0, cos - margin) where y = -1; x1, x2 [N, D] or [D]
function L.cosine_embedding_loss(x1, x2, y, opts)
  local o = options(opts, "cosine_embedding_loss", { margin = true })
  same_shape(x1, x2, "cosine_embedding_loss", "input1", "input2")
  check_tensor(y, "cosine_embedding_loss", "target")
  local cos = embedding_cosine(x1, x2)
  local zero = cos * 0
  local l = tide.where(y:eq(1), 1 - cos, zero) +
            tide.where(y:eq(-1), tide.clamp(cos - (o.margin or 0), 0), zero)
  return reduce(l, o.reduction, "cosine_embedding_loss")
end

-- F.triplet_margin_loss(anchor, positive, negative [, {margin=1, p=2, eps=1e-6, swap=false,
-- reduction=}]): max(0, margin + d(a, p) - d(a, n)) with pairwise_distance's d
function L.triplet_margin_loss(a, pos, neg, opts)
  local o = options(opts, "triplet_margin_loss", { margin = true, p = true, eps = true,
                                                   swap = true })
  same_shape(a, pos, "triplet_margin_loss", "anchor", "positive")
  same_shape(a, neg, "triplet_margin_loss", "anchor", "negative")
  local F = require "tide.nn.functional"
  local dopts = { p = o.p or 2, eps = o.eps or 1e-6 }
  local dp = F.pairwise_distance(a, pos, dopts)
  local dn = F.pairwise_distance(a, neg, dopts)
  if o.swap then dn = tide.minimum(dn, F.pairwise_distance(pos, neg, dopts)) end
  return reduce(tide.clamp(dp - dn + (o.margin or 1.0), 0), o.reduction, "triplet_margin_loss")
end

require("tide.nn.functional_ctc").install(L, { options = options, check_tensor = check_tensor })

return L
