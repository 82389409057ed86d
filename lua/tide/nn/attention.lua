-- tide.nn's attention layers (nn.MultiheadAttention, nn.TransformerEncoderLayer,
-- nn.TransformerEncoder), kept apart from nn.lua. tide.nn installs
-- them when it loads:  require("tide.nn.attention").install(nn, helpers)  where helpers holds
-- nn.lua's option checkers (check_opts, check_int, dtype_of).
local tide = require "tide"

local attention = {}

-- The body below is left unindented: it reads as the file's top level, with nn.lua's locals.
function attention.install(nn, helpers)
local Module, Linear, init = nn.Module, nn.Linear, nn.init
local F = require "tide.nn.functional"
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

-- attn_mask checked to be [L, S] or [N * H, L, S], the latter as [N, H, L, S].
local function attn_mask_4d(m, N, H, L, S)
  if not tide.is_tensor(m) or not ((m:dim() == 2 and m:size(1) == L and m:size(2) == S) or
      (m:dim() == 3 and m:size(1) == N * H and m:size(2) == L and m:size(3) == S)) then
    error(("MultiheadAttention: attn_mask must be [L, S] = [%d, %d] or [N * num_heads, L, S] = "
      .. "[%d, %d, %d], got %s"):format(L, S, N * H, L, S,
      tide.is_tensor(m) and shape_str(m) or type(m)), 0)
  end
  return m:dim() == 3 and m:reshape(N, H, L, S) or m
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
    scores = apply_mask(scores, attn_mask_4d(m, N, H, L, S))
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

-- The heads' outputs [N, L, E] through out_proj, in the caller's layout.
function MHA:_output(out, unbatched)
  out = self.out_proj(out)
  if unbatched then
    return out:squeeze(1)
  end
  return self.batch_first and out or out:transpose(1, 2)
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
  if opts.need_weights == false and opts.key_padding_mask == nil
      and not (self.training and self.dropout > 0) then
    -- Nothing needs the probabilities: the fused kernel, which never stores the L x S scores.
    -- Its bool mask means "takes part", the opposite of this module's.
    local m = opts.attn_mask
    if m ~= nil then
      m = attn_mask_4d(m, N, self.num_heads, L, k:size(3))
      m = m.dtype == "bool" and m:logical_not() or m
    end
    local fused = F.scaled_dot_product_attention(q, k, v, { attn_mask = m,
                                                            is_causal = m == nil and opts.is_causal == true })
    return self:_output(fused:transpose(2, 3):reshape(N, L, self.embed_dim), unbatched), nil
  end
  local scores = tide.matmul(q, k:transpose(3, 4)) * (1 / math.sqrt(self.head_dim))
  local w = tide.softmax(self:_masks(scores, opts, unbatched), 4)
  if self.training and self.dropout > 0 then
    w = tide.dropout(w, self.dropout, true)
  end
  local out = self:_output(tide.matmul(w, v):transpose(2, 3):reshape(N, L, self.embed_dim),
                           unbatched)
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

-- ---- transformer encoder -----------------------------------------------------------------------

local function check_activation(a)
  if a == nil or a == "relu" then
    return "relu", tide.relu
  elseif a == "gelu" then
    return "gelu", tide.gelu
  elseif type(a) == "function" or (type(a) == "table" and getmetatable(a) and
                                   getmetatable(a).__call) then
    return "custom", a
  end
  error(("TransformerEncoderLayer: activation must be \"relu\", \"gelu\" or a function, got %s")
    :format(type(a) == "string" and ("\"" .. a .. "\"") or type(a)), 3)
end

-- nn.TransformerEncoderLayer(d_model, nhead [, {dim_feedforward=2048, dropout=0.1,
-- activation="relu", layer_norm_eps=1e-5, batch_first=false, norm_first=false, bias=true,
-- dtype=}]) as PyTorch's: children self_attn (MultiheadAttention), linear1, dropout, linear2,
-- norm1, norm2, dropout1, dropout2, so the state-dict keys are PyTorch's. Post-norm:
-- x = norm1(x + sa(x)); x = norm2(x + ff(x)); pre-norm (norm_first): x = x + sa(norm1(x));
-- x = x + ff(norm2(x)), with ff(x) = linear2(dropout(activation(linear1(x)))).
local TEL = Module:extend("TransformerEncoderLayer")
nn.TransformerEncoderLayer = TEL
local TEL_OPTS = { dim_feedforward = true, dropout = true, activation = true,
                   layer_norm_eps = true, batch_first = true, norm_first = true, bias = true,
                   dtype = true }
function TEL:__init(d_model, nhead, opts)
  Module.__init(self)
  opts = check_opts(opts, "TransformerEncoderLayer", TEL_OPTS)
  local E = check_int(d_model, "TransformerEncoderLayer", "d_model")
  local H = check_int(nhead, "TransformerEncoderLayer", "nhead")
  local F = check_int(opts.dim_feedforward or 2048, "TransformerEncoderLayer", "dim_feedforward")
  if E % H ~= 0 then
    error(("TransformerEncoderLayer: d_model (%d) must be divisible by nhead (%d)"):format(E, H),
      2)
  end
  local p = opts.dropout or 0.1
  local eps = opts.layer_norm_eps or 1e-5
  if type(eps) ~= "number" or eps <= 0 then
    error("TransformerEncoderLayer: layer_norm_eps must be a positive number, got " ..
      tostring(eps), 2)
  end
  self._config = { d_model = E, nhead = H, opts = opts }
  self.activation_name, self.activation = check_activation(opts.activation)
  self.norm_first, self.batch_first = opts.norm_first == true, opts.batch_first == true
  local bias = opts.bias ~= false
  local lin = { bias = bias, dtype = opts.dtype }
  self:add_module("self_attn", nn.MultiheadAttention(E, H, { dropout = p, bias = bias,
    batch_first = self.batch_first, dtype = opts.dtype }))
  self:add_module("linear1", Linear(E, F, lin))
  self:add_module("dropout", nn.Dropout(p))
  self:add_module("linear2", Linear(F, E, lin))
  local ln = { eps = eps, bias = bias, dtype = opts.dtype }
  self:add_module("norm1", nn.LayerNorm(E, ln))
  self:add_module("norm2", nn.LayerNorm(E, ln))
  self:add_module("dropout1", nn.Dropout(p))
  self:add_module("dropout2", nn.Dropout(p))
end

function TEL:_sa_block(x, opts)
  local y = self.self_attn(x, x, x, { attn_mask = opts.src_mask,
    key_padding_mask = opts.src_key_padding_mask, is_causal = opts.is_causal,
    need_weights = false })
  return self.dropout1(y)
end

function TEL:_ff_block(x)
  return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

-- layer(src [, {src_mask=, src_key_padding_mask=, is_causal=false}]): src [S, N, E] ([N, S, E]
-- with batch_first, [S, E] unbatched); the masks as MultiheadAttention's attn_mask and
-- key_padding_mask. is_causal without src_mask masks the future positions.
function TEL:forward(src, opts)
  opts = check_opts(opts, "TransformerEncoderLayer", { src_mask = true,
                                                       src_key_padding_mask = true,
                                                       is_causal = true })
  local E = self._config.d_model
  if not tide.is_tensor(src) or (src:dim() ~= 2 and src:dim() ~= 3) or src:size(-1) ~= E then
    error(("TransformerEncoderLayer: src must be %s (or [S, E] unbatched) with E = d_model = %d, "
      .. "got %s"):format(self.batch_first and "[N, S, E]" or "[S, N, E]", E,
      tide.is_tensor(src) and shape_str(src) or type(src)), 0)
  end
  local x = src
  if self.norm_first then
    x = x + self:_sa_block(self.norm1(x), opts)
    return x + self:_ff_block(self.norm2(x))
  end
  x = self.norm1(x + self:_sa_block(x, opts))
  return self.norm2(x + self:_ff_block(x))
end

-- A layer of the same configuration holding copies of this one's parameters (what PyTorch's
-- copy.deepcopy gives TransformerEncoder).
function TEL:_clone()
  local c = TEL(self._config.d_model, self._config.nhead, self._config.opts)
  c.activation_name, c.activation = self.activation_name, self.activation
  tide.no_grad(function() c:load_state_dict(self:state_dict()) end)
  c:train(self.training)
  return c
end

function TEL:extra_repr()
  return ("d_model=%d, nhead=%d, activation=%s, norm_first=%s, batch_first=%s"):format(
    self._config.d_model, self._config.nhead, self.activation_name, tostring(self.norm_first),
    tostring(self.batch_first))
end

-- nn.TransformerEncoder(encoder_layer, num_layers [, {norm=}]): layers (a ModuleList of
-- num_layers copies of encoder_layer, equal at the start, as PyTorch's deepcopy) then norm.
local TE = Module:extend("TransformerEncoder")
nn.TransformerEncoder = TE
function TE:__init(encoder_layer, num_layers, opts)
  Module.__init(self)
  opts = check_opts(opts, "TransformerEncoder", { norm = true })
  if getmetatable(encoder_layer) ~= TEL then
    error("TransformerEncoder: encoder_layer must be an nn.TransformerEncoderLayer, got " ..
      tostring(encoder_layer), 2)
  end
  self.num_layers = check_int(num_layers, "TransformerEncoder", "num_layers")
  local layers = {}
  for i = 1, self.num_layers do
    layers[i] = encoder_layer:_clone()
  end
  self:add_module("layers", nn.ModuleList(layers))
  if opts.norm ~= nil then
    self:add_module("norm", opts.norm)
  end
end

-- encoder(src [, {mask=, src_key_padding_mask=, is_causal=}]) as PyTorch's (mask is each
-- layer's src_mask).
function TE:forward(src, opts)
  opts = check_opts(opts, "TransformerEncoder", { mask = true, src_key_padding_mask = true,
                                                  is_causal = true })
  local x = src
  local layer_opts = { src_mask = opts.mask, src_key_padding_mask = opts.src_key_padding_mask,
                       is_causal = opts.is_causal }
  for i = 1, self.num_layers do
    x = self.layers[i](x, layer_opts)
  end
  if self.norm ~= nil then
    x = self.norm(x)
  end
  return x
end
end

return attention
