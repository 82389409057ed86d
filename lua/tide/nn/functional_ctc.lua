-- F.ctc_loss as a composite of tide ops (installed into tide.nn.functional by functional_loss).
--
-- The forward (alpha) recursion of Graves et al. in log space, vectorized over the batch and the
-- extended label sequence (blank, l1, blank, l2, ..., blank; length 2S + 1): one gather picks
-- each step's log-probabilities, then each time step is a three-way logsumexp of shifted alphas.
-- Unreachable states hold -1e30 instead of -inf, so every logsumexp and its gradient stay finite
-- (exp(-1e30 - m) is exactly 0, so reachable paths get PyTorch's values); a final value below
-- -1e29 means no alignment exists and becomes an infinite loss (or 0 with zero_infinity). The
-- gradient is autograd's through these ops.
local tide = require "tide"

local M = {}

local NEG = -1e30

local function as_list(v, n, fn, what)
  if tide.is_tensor(v) then v = v:reshape(-1):totable() end
  if type(v) ~= "table" or #v ~= n then
    error(("ctc_loss: %s must hold one length per batch entry (%d)"):format(what, n), 3)
  end
  for i = 1, n do
    if math.type(v[i]) ~= "integer" and not (type(v[i]) == "number" and v[i] == math.floor(v[i]))
    then
      error(("ctc_loss: %s must hold integers, got %s"):format(what, tostring(v[i])), 3)
    end
    v[i] = math.tointeger(v[i])
  end
  return v
end

-- Per batch entry, the 1-based extended labels (blank between and around the targets), padded
-- with blanks to the longest; and for each state whether it may skip from two states back.
local function extended(targets, tl, n, blank)
  local rows, skip, maxs = {}, {}, 0
  for b = 1, n do maxs = math.max(maxs, tl[b]) end
  local tt = targets:totable()
  local flat = targets:dim() == 1
  local pos = 0
  for b = 1, n do
    local labels = {}
    for s = 1, tl[b] do
      labels[s] = flat and tt[pos + s] or tt[b][s]
    end
    pos = pos + tl[b]
    local ext, sk = {}, {}
    for s = 1, 2 * maxs + 1 do
      local l = (s % 2 == 0 and s / 2 <= tl[b]) and labels[s // 2] or blank
      ext[s] = math.tointeger(l)
      sk[s] = s % 2 == 0 and s >= 3 and ext[s] ~= ext[s - 2]
    end
    rows[b], skip[b] = ext, sk
  end
  return rows, skip, 2 * maxs + 1
end

local function check_args(lp, targets, il, tl, blank)
  if not tide.is_tensor(lp) or lp:dim() ~= 3 then
    error("ctc_loss: log_probs must be a [T, N, C] tensor", 3)
  end
  local T, N, C = lp:size(1), lp:size(2), lp:size(3)
  if not tide.is_tensor(targets) or (targets:dim() ~= 1 and targets:dim() ~= 2) then
    error("ctc_loss: targets must be a [N, S] or a 1-D (concatenated) integer tensor", 3)
  end
  if blank < 1 or blank > C then
    error(("ctc_loss: blank %d is outside the classes 1..%d"):format(blank, C), 3)
  end
  for b = 1, N do
    if il[b] < 0 or il[b] > T then
      error(("ctc_loss: input length %d of entry %d is outside 0..%d"):format(il[b], b, T), 3)
    end
    if tl[b] < 0 or (targets:dim() == 2 and tl[b] > targets:size(2)) then
      error(("ctc_loss: target length %d of entry %d does not fit the targets"):format(tl[b], b), 3)
    end
  end
  return T, N, C
end

-- log(exp(a) + exp(b) + exp(c)) of finite tensors
local function logsumexp3(a, b, c)
  local m = tide.maximum(tide.maximum(a, b), c):detach()
  return tide.log(tide.exp(a - m) + tide.exp(b - m) + tide.exp(c - m)) + m
end

-- Shifts alpha [N, L] right by k states along dim 2, filling with NEG.
local function shifted(alpha, k)
  local n, l = alpha:size(1), alpha:size(2)
  local fill = tide.full({ n, k }, NEG, { dtype = alpha.dtype, device = alpha.device })
  return tide.cat({ fill, alpha:narrow(2, 1, l - k) }, 2)
end

-- The log-likelihood of each entry's targets, [N].
local function log_likelihood(lp, ext, skip, L, il, tl)
  local T, N = lp:size(1), lp:size(2)
  local dev, dt = lp.device, lp.dtype
  local idx = tide.tensor(ext, { dtype = "int64", device = dev })               -- [N, L]
  local emit = lp:gather(3, idx:unsqueeze(1):expand(T, N, L))                    -- [T, N, L]
  local can_skip = tide.tensor(skip, { device = dev })
  local init = {}
  for b = 1, N do
    init[b] = {}
    for s = 1, L do init[b][s] = (s <= 2) and 0 or NEG end
  end
  local alpha = tide.tensor(init, { dtype = dt, device = dev }) + emit:select(1, 1)
  local neg = tide.full({ N, L }, NEG, { dtype = dt, device = dev })
  for t = 2, T do
    local s2 = tide.where(can_skip, shifted(alpha, 2), neg)
    local nxt = logsumexp3(alpha, shifted(alpha, 1), s2) + emit:select(1, t)
    local live = {}
    for b = 1, N do live[b] = { t <= il[b] } end
    alpha = tide.where(tide.tensor(live, { device = dev }), nxt, alpha)
  end
  local last, prev = {}, {}
  for b = 1, N do
    last[b] = { 2 * tl[b] + 1 }
    prev[b] = { math.max(2 * tl[b], 1) }
  end
  local a1 = alpha:gather(2, tide.tensor(last, { dtype = "int64", device = dev }))
  local a2 = alpha:gather(2, tide.tensor(prev, { dtype = "int64", device = dev }))
  local zero_len = {}
  for b = 1, N do zero_len[b] = { tl[b] == 0 } end
  a2 = tide.where(tide.tensor(zero_len, { device = dev }), a2 * 0 + NEG, a2)
  local m = tide.maximum(a1, a2):detach()
  local ll = (tide.log(tide.exp(a1 - m) + tide.exp(a2 - m)) + m):reshape(N)
  local empty = {}
  for b = 1, N do empty[b] = il[b] == 0 and (tl[b] == 0 and 0 or NEG) or nil end
  if next(empty) then -- no time steps: likelihood 1 for an empty target, else 0
    local e, has = {}, {}
    for b = 1, N do e[b], has[b] = empty[b] or 0, empty[b] ~= nil end
    ll = tide.where(tide.tensor(has, { device = dev }), tide.tensor(e, { dtype = dt, device = dev }),
                    ll)
  end
  return ll
end

-- F.ctc_loss(log_probs [T, N, C], targets [N, S] or concatenated 1-D (1-based classes),
-- input_lengths, target_lengths [, {blank=1, reduction="mean", zero_infinity=false}]):
-- lengths as tensors or tables. "mean" divides each loss by its target length, then averages.
function M.ctc_loss(log_probs, targets, input_lengths, target_lengths, opts)
  local o = M.options(opts, "ctc_loss", { blank = true, zero_infinity = true })
  local blank = o.blank or 1
  if not tide.is_tensor(log_probs) or log_probs:dim() ~= 3 then
    error("ctc_loss: log_probs must be a [T, N, C] tensor", 2)
  end
  local N = log_probs:size(2)
  local il = as_list(input_lengths, N, "ctc_loss", "input_lengths")
  local tl = as_list(target_lengths, N, "ctc_loss", "target_lengths")
  check_args(log_probs, targets, il, tl, blank)
  local ext, skip, L = extended(targets, tl, N, blank)
  local loss = -log_likelihood(log_probs, ext, skip, L, il, tl)
  local impossible = loss:gt(-NEG / 10)
  local inf = o.zero_infinity and 0 or math.huge
  loss = tide.where(impossible, loss * 0 + inf, loss)
  local r = o.reduction or "mean"
  if r == "mean" then
    local div = {}
    for b = 1, N do div[b] = math.max(tl[b], 1) end
    return (loss / tide.tensor(div, { dtype = loss.dtype, device = loss.device })):mean()
  elseif r == "sum" then
    return loss:sum()
  elseif r == "none" then
    return loss
  end
  error(("ctc_loss: reduction must be \"mean\", \"sum\" or \"none\", got %q"):format(tostring(r)), 2)
end

function M.install(L, helpers)
  M.options = helpers.options
  L.ctc_loss = M.ctc_loss
end

return M
