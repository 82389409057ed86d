-- tide.models.gpt — a GPT (decoder-only transformer) as nanoGPT and GPT-2 build it: learned
-- token and position embeddings, pre-norm blocks (LayerNorm, causal self-attention, LayerNorm,
-- MLP with exact GELU), a final LayerNorm and an untied head. See lua/tide/models/README.md.
--
--   local gpt = require "tide.models.gpt"
--   local model = gpt.GPT{vocab_size = 256, block_size = 256, n_layer = 6, n_head = 6,
--                         n_embd = 384, dropout = 0, bias = true}
--   local logits = model(idx)                    -- idx int64 [B, T], tokens 1..vocab_size
--   local loss = model:loss(idx, targets)        -- mean cross-entropy
--   local out = model:generate(prompt, 100, {temperature = 0.8, top_k = 40, seed = 1,
--                                            on_token = function(id) io.write(...) end})
--
-- Parameter names are nanoGPT's: wte, wpe, h.<i>.{ln_1, attn.c_attn, attn.c_proj, ln_2,
-- mlp.c_fc, mlp.c_proj}, ln_f, lm_head. The blocks live in a ModuleList, so tide's own
-- state_dict() counts them from 1 (h.1.ln_1.weight) and state_dict({to = "pytorch"}) and
-- load_state_dict(sd, {from = "pytorch"}) from 0, as PyTorch does (h.0.ln_1.weight).
local tide = require "tide"
local nn = require "tide.nn"
local optim = require "tide.optim"
local sampling = require "tide.models.sampling"
local decode_jit = require "tide.models.decode_jit"

local F = nn.functional
local gpt = {}

local DEFAULTS = { vocab_size = 256, block_size = 256, n_layer = 6, n_head = 6, n_embd = 384,
                   dropout = 0, bias = true, attention = "auto" }

local function shape_str(x)
  return "[" .. table.concat(x:size(), ", ") .. "]"
end

-- The fused attention op when tide has one (and the config allows it), else nil.
local function fused_attention(config)
  if config.attention == "composite" then
    return nil
  end
  local f = F.scaled_dot_product_attention or tide.scaled_dot_product_attention
  if f == nil and config.attention == "fused" then
    error("GPT: attention = \"fused\" but tide has no scaled_dot_product_attention", 0)
  end
  return f
end

-- A validated copy of the config table, every missing field from DEFAULTS.
local function check_config(cfg)
  if cfg ~= nil and type(cfg) ~= "table" then
    error("GPT: expected a config table like {n_layer = 6, n_head = 6, n_embd = 384}, got a "
      .. type(cfg), 0)
  end
  local c = {}
  for k, v in pairs(cfg or {}) do
    if DEFAULTS[k] == nil then
      error(("GPT: unknown config field '%s'"):format(tostring(k)), 0)
    end
    c[k] = v
  end
  for k, v in pairs(DEFAULTS) do
    if c[k] == nil then c[k] = v end
  end
  for _, k in ipairs({ "vocab_size", "block_size", "n_layer", "n_head", "n_embd" }) do
    if math.type(c[k]) ~= "integer" or c[k] < 1 then
      error(("GPT: %s must be a positive integer, got %s"):format(k, tostring(c[k])), 0)
    end
  end
  if c.n_embd % c.n_head ~= 0 then
    error(("GPT: n_embd (%d) must be divisible by n_head (%d)"):format(c.n_embd, c.n_head), 0)
  end
  if type(c.dropout) ~= "number" or c.dropout < 0 or c.dropout >= 1 then
    error("GPT: dropout must be a number in [0, 1), got " .. tostring(c.dropout), 0)
  end
  if type(c.bias) ~= "boolean" then
    error("GPT: bias must be a boolean, got " .. tostring(c.bias), 0)
  end
  if c.attention ~= "auto" and c.attention ~= "composite" and c.attention ~= "fused" then
    error("GPT: attention must be \"auto\", \"composite\" or \"fused\", got "
      .. tostring(c.attention), 0)
  end
  fused_attention(c)
  return c
end

local function dropout(self, x)
  if self.training and self.p > 0 then
    return tide.dropout(x, self.p, true)
  end
  return x
end

-- ---- attention ---------------------------------------------------------------------------------

-- Causal self-attention: c_attn projects x [B, T, C] to q, k, v (stacked in that order along
-- the last dim, as nanoGPT), each split into n_head heads of head_dim; c_proj mixes the heads.
local CausalSelfAttention = nn.Module:extend("CausalSelfAttention")
gpt.CausalSelfAttention = CausalSelfAttention

function CausalSelfAttention:__init(c)
  nn.Module.__init(self)
  self.n_head, self.n_embd, self.head_dim = c.n_head, c.n_embd, c.n_embd // c.n_head
  self.p = c.dropout
  self.sdpa = fused_attention(c)
  self:add_module("c_attn", nn.Linear(c.n_embd, 3 * c.n_embd, { bias = c.bias }))
  self:add_module("c_proj", nn.Linear(c.n_embd, c.n_embd, { bias = c.bias }))
end

-- [B, T, 3C] -> q, k, v, each [B, H, T, D].
function CausalSelfAttention:_heads(x)
  local B, T, C = x:size(1), x:size(2), self.n_embd
  local qkv = self.c_attn(x)
  local out = {}
  for i = 1, 3 do
    out[i] = qkv:narrow(3, (i - 1) * C + 1, C):reshape(B, T, self.n_head, self.head_dim)
      :transpose(2, 3)
  end
  return out[1], out[2], out[3]
end

-- softmax(q k^T / sqrt(D)) v for queries at key positions offset+1 .. offset+Tq, keys 1 .. S:
-- query i sees keys j <= offset + i. Composed of tide ops (matmul, masked_fill, softmax), or
-- the fused op when tide has it and the mask is plain causal or empty.
function CausalSelfAttention:_attend(q, k, v, offset)
  local Tq, S = q:size(3), k:size(3)
  local p = self.training and self.p or 0
  if self.sdpa and (offset == 0 or Tq == 1) then
    return self.sdpa(q, k, v, { is_causal = offset == 0 and Tq > 1, dropout_p = p })
  end
  local scores = tide.matmul(q, k:transpose(3, 4)) * (1 / math.sqrt(self.head_dim))
  if Tq > 1 then
    local on = { device = q.device }
    local rows = tide.arange(offset + 1, offset + Tq + 1, on):view(Tq, 1)
    scores = scores:masked_fill(tide.arange(1, S + 1, on):view(1, S):gt(rows), -math.huge)
  end
  local w = tide.softmax(scores, 4)
  if p > 0 then
    w = tide.dropout(w, p, true)
  end
  return tide.matmul(w, v)
end

-- One new position (x [B, 1, C]) at len + 1 through views of its layer's cache (GPT:
-- _decode_views): the new key and value go to the slots views[at] and views[at + 1], and the
-- query attends to the whole cache, views[at + 2] and views[at + 3], with the keys past len + 1
-- masked out: seen, bool [1, 1, 1, block], is true for keys 1..len + 1 (the rest get -inf, exp
-- gives exactly 0). So no size depends on the length: under tide.capture the views are
-- arguments, and one plan serves every length.
function CausalSelfAttention:step_at(x, views, at, seen)
  local B, C = x:size(1), self.n_embd
  local q, k, v = self:_heads(x)
  local kk, vv = views[at + 2], views[at + 3]
  views[at]:copy_(k)
  views[at + 1]:copy_(v)
  local y
  if self.sdpa then
    y = self.sdpa(q, kk, vv, { attn_mask = seen })
  else
    local scores = tide.matmul(q, kk:transpose(3, 4)) * (1 / math.sqrt(self.head_dim))
    y = tide.matmul(tide.softmax(scores:masked_fill(tide.logical_not(seen), -math.huge), 4), vv)
  end
  return self.c_proj(y:transpose(2, 3):reshape(B, 1, C))
end

-- x [B, T, C] -> [B, T, C]. With a layer cache {k = [B, H, block, D], v = ...} and the number
-- of positions it already holds, the new keys and values are written after those and the
-- queries attend to all of them.
function CausalSelfAttention:forward(x, layer_cache, len)
  local B, T, C = x:size(1), x:size(2), self.n_embd
  local q, k, v = self:_heads(x)
  local offset = 0
  if layer_cache then
    offset = len
    tide.no_grad(function()
      layer_cache.k:narrow(3, len + 1, T):copy_(k)
      layer_cache.v:narrow(3, len + 1, T):copy_(v)
    end)
    k = layer_cache.k:narrow(3, 1, len + T)
    v = layer_cache.v:narrow(3, 1, len + T)
  end
  local y = self:_attend(q, k, v, offset):transpose(2, 3):reshape(B, T, C)
  return dropout(self, self.c_proj(y))
end

-- ---- MLP and block -----------------------------------------------------------------------------

local MLP = nn.Module:extend("MLP")
gpt.MLP = MLP

function MLP:__init(c)
  nn.Module.__init(self)
  self.p = c.dropout
  self:add_module("c_fc", nn.Linear(c.n_embd, 4 * c.n_embd, { bias = c.bias }))
  self:add_module("c_proj", nn.Linear(4 * c.n_embd, c.n_embd, { bias = c.bias }))
end

function MLP:forward(x)
  return dropout(self, self.c_proj(tide.gelu(self.c_fc(x))))
end

local Block = nn.Module:extend("Block")
gpt.Block = Block

function Block:__init(c)
  nn.Module.__init(self)
  self:add_module("ln_1", nn.LayerNorm(c.n_embd, { eps = 1e-5, bias = c.bias }))
  self:add_module("attn", CausalSelfAttention(c))
  self:add_module("ln_2", nn.LayerNorm(c.n_embd, { eps = 1e-5, bias = c.bias }))
  self:add_module("mlp", MLP(c))
end

function Block:forward(x, layer_cache, len)
  x = x + self.attn(self.ln_1(x), layer_cache, len)
  return x + self.mlp(self.ln_2(x))
end

-- Block:forward for one position through views of its layer's cache
-- (CausalSelfAttention:step_at).
function Block:step_at(x, views, at, seen)
  x = x + self.attn:step_at(self.ln_1(x), views, at, seen)
  return x + self.mlp(self.ln_2(x))
end

-- ---- GPT ---------------------------------------------------------------------------------------

-- gpt.GPT{...} makes a model (the class is callable, as nn.Linear); the config fields and
-- their defaults are DEFAULTS above; attention = "composite" keeps the matmul/mask/softmax
-- path even when tide has the fused scaled_dot_product_attention.
local GPT = nn.Module:extend("GPT")
gpt.GPT = GPT

-- nanoGPT's init: every Linear and Embedding weight ~ N(0, 0.02), biases 0, LayerNorms 1 and
-- 0, and the projections back into the residual stream (attn.c_proj, mlp.c_proj) ~ N(0,
-- 0.02 / sqrt(2 n_layer)) so the residual's variance does not grow with depth. tide's RNG
-- draws them: tide.manual_seed before gpt.GPT makes the init reproducible.
function GPT:_init_weights()
  local std_proj = 0.02 / math.sqrt(2 * self.config.n_layer)
  for name, p in self:named_parameters() do
    if name:match("c_proj%.weight$") then
      nn.init.normal_(p, 0, std_proj)
    elseif name:match("weight$") and p:dim() == 2 then
      nn.init.normal_(p, 0, 0.02)
    elseif name:match("bias$") then
      nn.init.zeros_(p)
    end
  end
end

function GPT:__init(cfg)
  nn.Module.__init(self)
  local c = check_config(cfg)
  self.config = c
  self:add_module("wte", nn.Embedding(c.vocab_size, c.n_embd))
  self:add_module("wpe", nn.Embedding(c.block_size, c.n_embd))
  local blocks = {}
  for i = 1, c.n_layer do
    blocks[i] = Block(c)
  end
  self:add_module("h", nn.ModuleList(blocks))
  self:add_module("ln_f", nn.LayerNorm(c.n_embd, { eps = 1e-5, bias = c.bias }))
  self:add_module("lm_head", nn.Linear(c.n_embd, c.vocab_size, { bias = false }))
  self.p = c.dropout
  self:_init_weights()
end

local function check_idx(self, idx, what, start)
  if not tide.is_tensor(idx) or idx:dim() ~= 2 or idx.dtype ~= "int64" then
    error(("GPT: %s must be an int64 tensor [B, T] of token ids 1..%d, got %s"):format(what,
      self.config.vocab_size, tide.is_tensor(idx) and (idx.dtype .. " " .. shape_str(idx))
      or type(idx)), 0)
  end
  local T, block = idx:size(2), self.config.block_size
  if start + T > block then
    error(("GPT: %s has %d positions after %d already seen, more than block_size %d"):format(
      what, T, start, block), 0)
  end
end

-- Token plus position embeddings, the blocks, the final norm and the head. idx [B, T] holds
-- positions start+1 .. start+T (start > 0 only with a cache).
function GPT:_run(idx, cache, start)
  local T = idx:size(2)
  local pos = tide.arange(start + 1, start + T + 1, { device = idx.device })
  local ok, tok = pcall(self.wte, idx)
  if not ok then
    error(("GPT: token ids must be in 1..%d (%s)"):format(self.config.vocab_size, tok), 0)
  end
  local x = dropout(self, tok + self.wpe(pos))
  for i, block in ipairs(self.h:children()) do
    x = block(x, cache and cache[i], start)
  end
  return self.lm_head(self.ln_f(x))
end

-- model(idx) -> logits [B, T, vocab_size] for idx int64 [B, T] of tokens 1..vocab_size.
function GPT:forward(idx)
  check_idx(self, idx, "idx", 0)
  return self:_run(idx, nil, 0)
end

-- model:loss(idx, targets) -> mean cross-entropy over every position (a 0-dim tensor), logits.
function GPT:loss(idx, targets)
  local logits = self:forward(idx)
  if not tide.is_tensor(targets) or targets.dtype ~= "int64" or targets:dim() ~= 2
      or targets:size(1) ~= idx:size(1) or targets:size(2) ~= idx:size(2) then
    error(("GPT:loss: targets must be an int64 tensor %s like idx, got %s"):format(shape_str(idx),
      tide.is_tensor(targets) and (targets.dtype .. " " .. shape_str(targets)) or type(targets)),
      0)
  end
  local B, T, V = logits:size(1), logits:size(2), logits:size(3)
  local ok, loss = pcall(tide.cross_entropy, logits:reshape(B * T, V), targets:reshape(B * T))
  if not ok then
    error(("GPT:loss: targets must be token ids in 1..%d (%s)"):format(V, loss), 0)
  end
  return loss, logits
end

-- ---- decoding with a KV cache ------------------------------------------------------------------

-- model:new_cache(batch) -> a cache for model:decode_step: per layer, the keys and values of
-- up to block_size positions ([batch, n_head, block_size, head_dim] each), and len, the number
-- of positions it holds.
function GPT:new_cache(batch)
  if math.type(batch) ~= "integer" or batch < 1 then
    error("GPT:new_cache: batch must be a positive integer, got " .. tostring(batch), 2)
  end
  local c = self.config
  local p = self.wte.weight
  local on = { dtype = p.dtype, device = p.device }
  local cache = { len = 0, batch = batch }
  for i = 1, c.n_layer do
    cache[i] = { k = tide.zeros(batch, c.n_head, c.block_size, c.n_embd // c.n_head, on),
                 v = tide.zeros(batch, c.n_head, c.block_size, c.n_embd // c.n_head, on) }
  end
  return cache
end

-- model:decode_step(idx, cache [, pos]) -> logits [B, vocab_size] of the last of idx's
-- positions. idx int64 [B, T] (T = 1 for one new token, longer for a prompt) continues the
-- sequence the cache holds: its keys and values are appended, cache.len grows by T. pos (the
-- 1-based position of idx's first token, default cache.len + 1) may be earlier, to rewind:
-- the positions from pos on are overwritten. No gradients are kept.
function GPT:decode_step(idx, cache, pos)
  if type(cache) ~= "table" or cache.len == nil then
    error("GPT:decode_step: expected a cache from model:new_cache(batch)", 2)
  end
  if pos ~= nil then
    if math.type(pos) ~= "integer" or pos < 1 or pos > cache.len + 1 then
      error(("GPT:decode_step: pos must be an integer in 1..%d (the cache holds %d positions), "
        .. "got %s"):format(cache.len + 1, cache.len, tostring(pos)), 2)
    end
    cache.len = pos - 1
  end
  check_idx(self, idx, "decode_step's idx", cache.len)
  if idx:size(1) ~= cache.batch then
    error(("GPT:decode_step: idx has batch %d, the cache %d"):format(idx:size(1), cache.batch), 2)
  end
  local logits
  tide.no_grad(function() logits = self:_run(idx, cache, cache.len) end)
  cache.len = cache.len + idx:size(2)
  return logits:select(2, logits:size(2))
end

-- The views of the cache that one position at len + 1 writes and reads, four per layer in
-- layer order (CausalSelfAttention:step_at: the key's and value's slots, the whole keys and
-- values), and the views with a dim that grows with the length: none.
function GPT:_decode_views(cache, len)
  return decode_jit.cache_views(cache, self.config.n_layer, len, false)
end

-- One position through the model, pos as an int64 [1] tensor, against the cache through its
-- views (_decode_views): the body of decode_step_jit, eager when called alone. Dropout is
-- left out (decoding is inference).
function GPT:_step_views(idx, pos, views)
  local x = self.wte(idx) + self.wpe(pos)
  local S = self.config.block_size
  local seen = tide.arange(1, S + 1, { device = idx.device }):le(pos):view(1, 1, 1, S)
  for i, block in ipairs(self.h:children()) do
    x = block:step_at(x, views, 4 * i - 3, seen)
  end
  return self.lm_head(self.ln_f(x)):select(2, 1)
end

-- The same step against a full-size cache holding len positions (pos = len + 1).
function GPT:_step_at(idx, cache, pos, len)
  return self:_step_views(idx, pos, (self:_decode_views(cache, len)))
end

-- model:decode_step_jit(idx, cache [, pos]) -> as model:decode_step, with a one-token idx
-- [B, 1] run under tide.jit (at most two compiles serve every length); a longer idx (a prompt)
-- runs eagerly through decode_step, and so do positions 1 and 2: the jit keeps view offsets
-- of 0 and 1 static (jit/README.md, symbolic dims), so they would cost a plan each.
function GPT:decode_step_jit(idx, cache, pos)
  if decode_jit.runs_eagerly(idx, cache, pos) then
    return self:decode_step(idx, cache, pos)
  end
  if type(cache) ~= "table" or cache.len == nil then
    error("GPT:decode_step_jit: expected a cache from model:new_cache(batch)", 2)
  end
  if pos ~= nil then
    if math.type(pos) ~= "integer" or pos < 1 or pos > cache.len + 1 then
      error(("GPT:decode_step_jit: pos must be an integer in 1..%d (the cache holds %d "
        .. "positions), got %s"):format(cache.len + 1, cache.len, tostring(pos)), 2)
    end
    cache.len = pos - 1
  end
  check_idx(self, idx, "decode_step_jit's idx", cache.len)
  if idx:size(1) ~= cache.batch then
    error(("GPT:decode_step_jit: idx has batch %d, the cache %d"):format(idx:size(1),
      cache.batch), 2)
  end
  return decode_jit.run(self, idx, cache)
end

-- model:decode_jit_stats() -> the jitted decoding step's tide.jit statistics (compiles, hits,
-- fallbacks, ...), or nil before its first use.
function GPT:decode_jit_stats()
  return decode_jit.stats(self)
end

-- ---- generation --------------------------------------------------------------------------------

gpt._sample = sampling.sample -- for the tests
local next_tokens = sampling.next_tokens

local GENERATE_OPTS = { temperature = true, top_k = true, seed = true, on_token = true,
                        jit = true }

-- A prompt (a list of ids, an int64 [T] or [B, T] tensor) as int64 [B, T].
local function prompt_tensor(self, prompt)
  if type(prompt) == "table" then
    prompt = tide.tensor(prompt, { dtype = "int64" })
  end
  if tide.is_tensor(prompt) and prompt:dim() == 1 then
    prompt = prompt:view(1, prompt:size(1))
  end
  if not tide.is_tensor(prompt) or prompt:dim() ~= 2 or prompt.dtype ~= "int64"
      or prompt:size(2) < 1 then
    error("GPT:generate: the prompt must be a non-empty list of token ids or an int64 tensor "
      .. "[T] or [B, T]", 3)
  end
  return prompt:to(self.wte.weight.device)
end

-- Fills a fresh cache with the last positions of seq [B, T] (at most keep of them) and
-- returns the logits of the last one.
local function prefill(self, seq, keep)
  local cache = self:new_cache(seq:size(1))
  local T = seq:size(2)
  local n = math.min(T, keep)
  return self:decode_step(seq:narrow(2, T - n + 1, n), cache), cache
end

-- model:generate(prompt, n [, {temperature = 1, top_k = nil, seed = nil, on_token = fn,
-- jit = true}]) -> int64 [B, T + n]: the prompt and n new tokens, decoded with a KV cache in
-- eval mode, each new token's step under tide.jit (decode_step_jit) unless jit = false.
-- on_token(id, row) is called for each new token as it is drawn (row: the batch row). seed
-- makes the draws reproducible without disturbing tide's global RNG (its state is restored).
-- When the context fills (block_size positions), the cache is rebuilt from the last half of
-- it, so generation goes on past block_size.
function GPT:generate(prompt, n, opts)
  if math.type(n) ~= "integer" or n < 0 then
    error("GPT:generate: the number of new tokens must be an integer >= 0, got " .. tostring(n),
      2)
  end
  local o = sampling.generate_opts(opts, self.config.vocab_size, "GPT:generate", GENERATE_OPTS)
  local seq = prompt_tensor(self, prompt)
  local block = self.config.block_size
  local was_training = self.training
  local saved_rng = o.seed and tide.get_rng_state()
  if o.seed then tide.manual_seed(o.seed) end
  self:eval()
  local step = o.jit and self.decode_step_jit or self.decode_step
  local ok, err = pcall(function()
    local logits, cache = prefill(self, seq, block)
    for _ = 1, n do
      local tok = tide.no_grad(function() return next_tokens(logits, o) end)
      seq = tide.cat({ seq, tok }, 2)
      if o.on_token then
        for b, id in ipairs(tok:view(-1):totable()) do o.on_token(id, b) end
      end
      if cache.len >= block then
        logits, cache = prefill(self, seq, math.max(1, block // 2))
      else
        logits = step(self, tok, cache)
      end
    end
  end)
  self:train(was_training)
  if saved_rng then tide.set_rng_state(saved_rng) end
  if not ok then error(err, 0) end
  return seq
end

-- ---- optimizer ---------------------------------------------------------------------------------

-- model:configure_optimizer{lr = 6e-4, weight_decay = 0.1, betas = {0.9, 0.95}, eps = 1e-8}
-- -> optim.AdamW with two parameter groups (nanoGPT's rule): weight decay on the 2-D weights
-- (the Linear and Embedding matrices), none on biases and LayerNorm weights.
function GPT:configure_optimizer(opts)
  opts = opts or {}
  if type(opts) ~= "table" then
    error("GPT:configure_optimizer: expected {lr =, weight_decay =, betas =}", 2)
  end
  for k in pairs(opts) do
    if k ~= "lr" and k ~= "weight_decay" and k ~= "betas" and k ~= "eps" then
      error(("GPT:configure_optimizer: unknown option '%s'"):format(tostring(k)), 2)
    end
  end
  local decay, no_decay = {}, {}
  for _, p in ipairs(self:parameters()) do
    local list = p:dim() >= 2 and decay or no_decay
    list[#list + 1] = p
  end
  local wd = opts.weight_decay or 0.1
  local groups = { { params = decay, weight_decay = wd } }
  if #no_decay > 0 then
    groups[2] = { params = no_decay, weight_decay = 0 }
  end
  return optim.AdamW(groups, { lr = opts.lr or 6e-4, betas = opts.betas or { 0.9, 0.95 },
                               eps = opts.eps or 1e-8, weight_decay = wd })
end

function GPT:extra_repr()
  local c = self.config
  return ("vocab_size=%d, block_size=%d, n_layer=%d, n_head=%d, n_embd=%d, dropout=%g, bias=%s")
    :format(c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd, c.dropout, tostring(c.bias))
end

return gpt
