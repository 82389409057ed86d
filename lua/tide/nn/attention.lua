-- tide.nn's attention layers (nn.MultiheadAttention), kept apart from nn.lua. tide.nn installs
-- them when it loads:  require("tide.nn.attention").install(nn, helpers)  where helpers holds
-- nn.lua's option checkers (check_opts, check_int, dtype_of).
local tide = require "tide"

local attention = {}

-- The body below is left unindented: it reads as the file's top level, with nn.lua's locals.
function attention.install(nn, helpers)
local Module, Linear, init = nn.Module, nn.Linear, nn.init
local check_opts, check_int, dtype_of = helpers.check_opts, helpers.check_int, helpers.dtype_of

-- nn.MultiheadAttention(embed_dim, num_heads [, {dropout=0, bias=true, batch_first=false,
-- dtype=}]) as PyTorch's (kdim = vdim = embed_dim): parameters in_proj_weight [3E, E] (q, k, v
-- stacked), in_proj_bias [3E], out_proj (a Linear). Composed of tide ops (linear, matmul,
-- softmax, masked_fill), so autograd and tide.jit see it.
local MHA = Module:extend("MultiheadAttention")
nn.MultiheadAttention = MHA
function MHA:__init(embed_dim, num_heads, opts)
  Module.__init(self)
  opts = check_opts(opts, "MultiheadAttention", { dropout = true, bias = true,
                                                  batch_first = true, dtype = true })
  local E = check_int(embed_dim, "MultiheadAttention", "embed_dim")
  local H = check_int(num_heads, "MultiheadAttention", "num_heads")
  if E % H ~= 0 then
    error(("MultiheadAttention: embed_dim (%d) must be divisible by num_heads (%d)"):format(
      E, H), 2)
  end
  local p = opts.dropout or 0
  if type(p) ~= "number" or p < 0 or p >= 1 then
    error("MultiheadAttention: dropout must be in [0, 1), got " .. tostring(p), 2)
  end
  self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
  self.dropout, self.batch_first = p, opts.batch_first == true
  local bias = opts.bias ~= false
  local w = tide.empty(3 * E, E, dtype_of(opts))
  self:register_parameter("in_proj_weight", nn.Parameter(init.xavier_uniform_(w)))
  if bias then
    self:register_parameter("in_proj_bias", nn.Parameter(tide.zeros(3 * E, dtype_of(opts))))
  end
  self:add_module("out_proj", Linear(E, E, { bias = bias, dtype = opts.dtype }))
  if bias then
    init.zeros_(self.out_proj.bias)
  end
end

local function shape_str(x)
  return "[" .. table.concat(x:size(), ", ") .. "]"
end

-- query/key/value to [N, L, E] (batch first); also says whether the input was unbatched.
function MHA:_batch_first(x, what, unbatched)
  if not tide.is_tensor(x) then
    error(("MultiheadAttention: %s must be a tensor, got %s"):format(what, type(x)), 0)
  end
  local want = unbatched and 2 or 3
  if x:dim() ~= want or x:size(x:dim()) ~= self.embed_dim then
    error(("MultiheadAttention: %s must be %s with last size embed_dim = %d, got %s"):format(
      what, unbatched and "[L, E] like the query" or (self.batch_first and "[N, L, E]"
      or "[L, N, E]"), self.embed_dim, shape_str(x)), 0)
  end
  if unbatched then
    return x:unsqueeze(1)
  end
  return self.batch_first and x or x:transpose(1, 2)
end

-- [N, L, E] -> [N, H, L, head_dim] after the i-th (q, k, v) input projection.
function MHA:_project(x, i)
  local E = self.embed_dim
  local w = self.in_proj_weight:narrow(1, (i - 1) * E + 1, E)
  local b = self.in_proj_bias and self.in_proj_bias:narrow(1, (i - 1) * E + 1, E)
  local y = tide.linear(x, w, b)
  return y:reshape(x:size(1), x:size(2), self.num_heads, self.head_dim):transpose(2, 3)
end

-- Adds a float mask or fills -inf where a bool mask is true (PyTorch: true = not allowed).
local function apply_mask(scores, mask)
  if mask.dtype == "bool" then
    return scores:masked_fill(mask, -math.huge)
  end
  return scores + mask
end

-- attn_mask [L, S] or [N * H, L, S]; key_padding_mask [N, S] ([S] unbatched); both bool (true:
-- masked) or float (added). is_causal without attn_mask masks the future positions.
function MHA:_masks(scores, opts, unbatched)
  local N, H, L, S = scores:size(1), scores:size(2), scores:size(3), scores:size(4)
  local m = opts.attn_mask
  if m == nil and opts.is_causal then
    local on = { device = scores.device }
    local rows = tide.arange(1, L + 1, on):view(L, 1)
    m = tide.arange(1, S + 1, on):view(1, S):gt(rows)
  end
  if m ~= nil then
    if not tide.is_tensor(m) or not ((m:dim() == 2 and m:size(1) == L and m:size(2) == S) or
        (m:dim() == 3 and m:size(1) == N * H and m:size(2) == L and m:size(3) == S)) then
      error(("MultiheadAttention: attn_mask must be [L, S] = [%d, %d] or [N * num_heads, L, S] = "
        .. "[%d, %d, %d], got %s"):format(L, S, N * H, L, S,
        tide.is_tensor(m) and shape_str(m) or type(m)), 0)
    end
    scores = apply_mask(scores, m:dim() == 3 and m:reshape(N, H, L, S) or m)
  end
  local kp = opts.key_padding_mask
  if kp ~= nil then
    if tide.is_tensor(kp) and unbatched and kp:dim() == 1 then kp = kp:unsqueeze(1) end
    if not tide.is_tensor(kp) or kp:dim() ~= 2 or kp:size(1) ~= N or kp:size(2) ~= S then
      error(("MultiheadAttention: key_padding_mask must be [N, S] = [%d, %d], got %s"):format(
        N, S, tide.is_tensor(kp) and shape_str(kp) or type(kp)), 0)
    end
    scores = apply_mask(scores, kp:view(N, 1, 1, S))
  end
  return scores
end

-- mha(query, key, value [, {attn_mask=, key_padding_mask=, need_weights=true, is_causal=false,
-- average_attn_weights=true}]) -> output, weights (nil unless need_weights)
function MHA:forward(query, key, value, opts)
  opts = check_opts(opts, "MultiheadAttention", { attn_mask = true, key_padding_mask = true,
                                                  need_weights = true, is_causal = true,
                                                  average_attn_weights = true })
  local unbatched = tide.is_tensor(query) and query:dim() == 2
  local q = self:_batch_first(query, "query", unbatched)
  local k = self:_batch_first(key, "key", unbatched)
  local v = self:_batch_first(value, "value", unbatched)
  if k:size(1) ~= q:size(1) or v:size(1) ~= q:size(1) or k:size(2) ~= v:size(2) then
    error(("MultiheadAttention: query %s, key %s and value %s disagree on the batch or key/value "
      .. "length"):format(shape_str(query), shape_str(key), shape_str(value)), 0)
  end
  local N, L = q:size(1), q:size(2)
  q, k, v = self:_project(q, 1), self:_project(k, 2), self:_project(v, 3)
  local scores = tide.matmul(q, k:transpose(3, 4)) * (1 / math.sqrt(self.head_dim))
  local w = tide.softmax(self:_masks(scores, opts, unbatched), 4)
  if self.training and self.dropout > 0 then
    w = tide.dropout(w, self.dropout, true)
  end
  local out = tide.matmul(w, v):transpose(2, 3):reshape(N, L, self.embed_dim)
  out = self.out_proj(out)
  if unbatched then
    out = out:squeeze(1)
  elseif not self.batch_first then
    out = out:transpose(1, 2)
  end
  if opts.need_weights == false then
    return out, nil
  end
  if opts.average_attn_weights ~= false then
    w = w:mean(2)
  end
  return out, unbatched and w:squeeze(1) or w
end
function MHA:extra_repr()
  return ("embed_dim=%d, num_heads=%d, dropout=%g, batch_first=%s"):format(
    self.embed_dim, self.num_heads, self.dropout, tostring(self.batch_first))
end

end

return attention
