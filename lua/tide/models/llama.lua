-- tide.models.llama — the Llama architecture (Llama 2, llama2.c's TinyStories models): RMSNorm,
-- rotary position embeddings over adjacent pairs, grouped-query attention with a KV cache, a
-- SwiGLU MLP, a classifier tied to the embedding or not. See lua/tide/models/README.md.
--
--   local llama = require "tide.models.llama"
--   local model = llama.load("stories15M.bin")            -- llama2.c's format, or
--   local model = llama.load("model.safetensors")         -- Hugging Face names (+ config.json)
--   local logits = model(idx)                    -- idx int64 [B, T], tokens 1..vocab_size
--   local out = model:generate({2}, 100, {temperature = 0.8, top_p = 0.9, seed = 1,
--                                         on_token = function(id) ... end})
--
-- Token ids are tide's, 1-based: llama2.c's and Hugging Face's id i is tide's i + 1 (BOS, id 1
-- there, is 2 here). Weights may be float32, float16 or bfloat16; activations, the KV cache and
-- the logits are float32 (a half weight is widened inside the product that reads it).
-- The checkpoint readers are in llama_load.lua (llama.load, llama.load_llama2c, llama.load_hf).
local tide = require "tide"
local nn = require "tide.nn"
local sampling = require "tide.models.sampling"
local fused = require "tide.models.llama_fused"

local F = nn.functional
local llama = {}

local DEFAULTS = { dim = 288, hidden_dim = 768, n_layers = 6, n_heads = 6, n_kv_heads = 6,
                   vocab_size = 32000, seq_len = 256, norm_eps = 1e-5, rope_theta = 10000,
                   tied = false, dtype = "float32" }
local DTYPES = { float32 = true, float16 = true, bfloat16 = true }

local function shape_str(x)
  return "[" .. table.concat(x:size(), ", ") .. "]"
end

local function check_int_fields(c)
  for _, k in ipairs({ "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                       "seq_len" }) do
    if math.type(c[k]) ~= "integer" or c[k] < 1 then
      error(("Llama: %s must be a positive integer, got %s"):format(k, tostring(c[k])), 0)
    end
  end
  if c.dim % c.n_heads ~= 0 or (c.dim // c.n_heads) % 2 ~= 0 then
    error(("Llama: dim (%d) must be n_heads (%d) times an even head size"):format(c.dim,
      c.n_heads), 0)
  end
  if c.n_heads % c.n_kv_heads ~= 0 then
    error(("Llama: n_heads (%d) must be a multiple of n_kv_heads (%d)"):format(c.n_heads,
      c.n_kv_heads), 0)
  end
end

-- A validated copy of the config table, every missing field from DEFAULTS.
function llama.check_config(cfg)
  if type(cfg) ~= "table" then
    error("Llama: expected a config table like {dim = 288, n_layers = 6, ...}, got a "
      .. type(cfg), 0)
  end
  local c = {}
  for k, v in pairs(cfg) do
    if DEFAULTS[k] == nil then
      error(("Llama: unknown config field '%s'"):format(tostring(k)), 0)
    end
    c[k] = v
  end
  for k, v in pairs(DEFAULTS) do
    if c[k] == nil then c[k] = v end
  end
  check_int_fields(c)
  for _, k in ipairs({ "norm_eps", "rope_theta" }) do
    if type(c[k]) ~= "number" or not (c[k] > 0) then
      error(("Llama: %s must be a number > 0, got %s"):format(k, tostring(c[k])), 0)
    end
  end
  if type(c.tied) ~= "boolean" then
    error("Llama: tied must be a boolean, got " .. tostring(c.tied), 0)
  end
  if not DTYPES[c.dtype] then
    error("Llama: dtype must be float32, float16 or bfloat16, got " .. tostring(c.dtype), 0)
  end
  return c
end

-- x [..., in] (float32) times a weight [out, in]: tide.linear reads a float16/bfloat16 weight
-- as it is, widening it in registers (ops/linear_half.c); a quantized weight (fmt
-- "q8_0"/"q4_0", uint8 blocks) goes to tide.qlinear.
local function project(x, w, fmt)
  if fmt then
    return tide.qlinear(x, w, fmt)
  end
  return tide.linear(x, w)
end

-- x times module m's weight name, quantized (tide.quantize(model, fmt)) or not.
local function proj(m, x, name)
  return project(x, m[name], m._qformats and m._qformats[name] and m._qformats[name].format)
end

local function rmsnorm(x, w, eps)
  return F.rms_norm(x, { x:size(x:dim()) }, w, eps)
end

-- A parameter holding w (a tensor in the model's dtype), or a fresh one ~ N(0, std).
local function weight(dtype, w, std, ...)
  if w == nil then
    w = tide.randn({ ... }, { dtype = "float32" }) * std
    w = w:to(dtype)
  end
  return nn.Parameter(w)
end

-- ---- rotary position embeddings -----------------------------------------------------------------

-- cos and sin of pos * theta^(-2i/head_size) for pos 0..seq_len-1 and i 0..head_size/2-1, as
-- float32 [seq_len, head_size/2] (angles in float64, Lua numbers: one rounding each).
local function rope_tables(seq_len, head_size, theta)
  local cos, sin = {}, {}
  for p = 0, seq_len - 1 do
    local c, s = {}, {}
    for i = 0, head_size // 2 - 1 do
      local a = p * theta ^ (-2 * i / head_size)
      c[i + 1], s[i + 1] = math.cos(a), math.sin(a)
    end
    cos[p + 1], sin[p + 1] = c, s
  end
  return tide.tensor(cos), tide.tensor(sin)
end

-- The rotary rows cos, sin [T, D/2] as rope takes them, [1, T, 1, D/2] (once per forward).
local function rope_view(cos, sin)
  local T, half = cos:size(1), cos:size(2)
  return cos:view(1, T, 1, half), sin:view(1, T, 1, half)
end

-- x [B, T, n, D] (heads not yet transposed) with its positions' cos and sin [1, T, 1, D/2]:
-- each adjacent pair (2i, 2i+1) of a head turned by its angle, (a, b) -> (a cos - b sin,
-- a sin + b cos). Queries and keys go through it together (one set of ops per layer).
local function rope(x, cos, sin)
  local B, T, n, D = x:size(1), x:size(2), x:size(3), x:size(4)
  local pairs_ = x:reshape(B, T, n, D // 2, 2)
  local a, b = pairs_:select(5, 1), pairs_:select(5, 2)
  return tide.stack({ a * cos - b * sin, a * sin + b * cos }, 5):reshape(B, T, n, D)
end

-- ---- attention ----------------------------------------------------------------------------------

local Attention = nn.Module:extend("LlamaAttention")
llama.Attention = Attention

function Attention:__init(c, w)
  nn.Module.__init(self)
  w = w or {}
  self.n_heads, self.n_kv_heads, self.head_size = c.n_heads, c.n_kv_heads, c.dim // c.n_heads
  local kv_dim = c.n_kv_heads * self.head_size
  local std = 1 / math.sqrt(c.dim)
  self:register_parameter("wq", weight(c.dtype, w.wq, std, c.dim, c.dim))
  self:register_parameter("wk", weight(c.dtype, w.wk, std, kv_dim, c.dim))
  self:register_parameter("wv", weight(c.dtype, w.wv, std, kv_dim, c.dim))
  self:register_parameter("wo", weight(c.dtype, w.wo, std, c.dim, c.dim))
  self:_fuse()
end

-- Makes wq, wk and wv views of one weight (llama_fused.lua), read by one product.
function Attention:_fuse()
  fused.fuse(self, "wqkv", { "wq", "wk", "wv" })
end

-- x [B, T, C] -> q and k [B, T, H + KVH, D] side by side, and v [B, T, KVH * D].
function Attention:_project_qkv(x)
  local B, T, D = x:size(1), x:size(2), self.head_size
  local H, KVH = self.n_heads, self.n_kv_heads
  local w, fmt = fused.get(self, "wqkv")
  if w then
    local qkv = project(x, w, fmt)
    return qkv:narrow(3, 1, (H + KVH) * D):reshape(B, T, H + KVH, D),
           qkv:narrow(3, (H + KVH) * D + 1, KVH * D)
  end
  local qk = tide.cat({ proj(self, x, "wq"), proj(self, x, "wk") }, 3)
  return qk:view(B, T, H + KVH, D), proj(self, x, "wv")
end

-- x [B, T, C] with cos, sin [1, T, 1, D/2] -> q [B, H, T, D], k and v [B, KVH, T, D], q and k
-- rotated.
function Attention:_qkv(x, cos, sin)
  local B, T, D = x:size(1), x:size(2), self.head_size
  local H, KVH = self.n_heads, self.n_kv_heads
  local qk, v = self:_project_qkv(x)
  qk = rope(qk, cos, sin)
  return qk:narrow(3, 1, H):transpose(2, 3), qk:narrow(3, H + 1, KVH):transpose(2, 3),
         v:reshape(B, T, KVH, D):transpose(2, 3)
end

-- Grouped-query attention without copying keys: query head h reads kv head (h-1)//g + 1 (g =
-- H / KVH), so q [B, H, T, D] is viewed [B, KVH, g*T, D] (rows: the g heads' T queries) and
-- attends to k, v [B, KVH, S, D] under allowed, bool [1, 1, g*T, S] or broadcastable (true:
-- key seen; nil: every key).
function Attention:_attend(q, k, v, allowed)
  local B, H, T, D = q:size(1), q:size(2), q:size(3), q:size(4)
  local KVH = self.n_kv_heads
  local qg = q:reshape(B, KVH, (H // KVH) * T, D)
  local y = F.scaled_dot_product_attention(qg, k, v, { attn_mask = allowed })
  return y:reshape(B, H, T, D)
end

-- The mask for T queries at positions len+1 .. len+T against S keys, repeated for the g heads
-- of a group: key j is seen by query t when j <= len + t.
local function causal_mask(g, T, len, S, device)
  local on = { device = device }
  local rows = tide.arange(len + 1, len + T + 1, on):view(1, T):expand(g, T):reshape(g * T, 1)
  return tide.arange(1, S + 1, on):view(1, S):le(rows):view(1, 1, g * T, S)
end

-- x [B, T, C] at positions len+1 .. len+T. With a layer cache {k, v = [B, KVH, seq_len, D]},
-- the new keys and values are written there and the queries attend to all len + T of them.
function Attention:forward(x, cos, sin, layer_cache, len)
  local B, T = x:size(1), x:size(2)
  local q, k, v = self:_qkv(x, cos, sin)
  len = len or 0
  if layer_cache then
    tide.no_grad(function()
      layer_cache.k:narrow(3, len + 1, T):copy_(k)
      layer_cache.v:narrow(3, len + 1, T):copy_(v)
    end)
    k = layer_cache.k:narrow(3, 1, len + T)
    v = layer_cache.v:narrow(3, 1, len + T)
  end
  local g = self.n_heads // self.n_kv_heads
  local y = self:_attend(q, k, v, causal_mask(g, T, len, k:size(3), x.device))
  return proj(self, y:transpose(2, 3):reshape(B, T, self.n_heads * self.head_size), "wo")
end

-- One position (x [B, 1, C]) at len + 1 through views of its layer's cache (Llama:
-- _decode_views): views[at] and views[at + 1] are the slots [B, KVH, 1, D] its key and value
-- go to, views[at + 2] and views[at + 3] the keys and values 1..len+1 it attends to (the used
-- part: every key is at or before the query, so no mask). Under tide.capture the views are
-- arguments, the used part's length a dynamic dim: one plan serves every length.
function Attention:step_at(x, cos, sin, views, at)
  local B = x:size(1)
  local q, k, v = self:_qkv(x, cos, sin)
  views[at]:copy_(k)
  views[at + 1]:copy_(v)
  local y = self:_attend(q, views[at + 2], views[at + 3])
  return proj(self, y:transpose(2, 3):reshape(B, 1, self.n_heads * self.head_size), "wo")
end

-- ---- feed-forward and block ---------------------------------------------------------------------

local FeedForward = nn.Module:extend("LlamaFeedForward")
llama.FeedForward = FeedForward

function FeedForward:__init(c, w)
  nn.Module.__init(self)
  w = w or {}
  self:register_parameter("w1", weight(c.dtype, w.w1, 1 / math.sqrt(c.dim), c.hidden_dim, c.dim))
  self:register_parameter("w2", weight(c.dtype, w.w2, 1 / math.sqrt(c.hidden_dim), c.dim,
                                       c.hidden_dim))
  self:register_parameter("w3", weight(c.dtype, w.w3, 1 / math.sqrt(c.dim), c.hidden_dim, c.dim))
  self:_fuse()
end

-- Makes w1 and w3 views of one weight (llama_fused.lua), read by one product.
function FeedForward:_fuse()
  fused.fuse(self, "w13", { "w1", "w3" })
end

-- SwiGLU: w2(silu(w1 x) * w3 x)
function FeedForward:forward(x)
  local w, fmt = fused.get(self, "w13")
  if w then
    local h = project(x, w, fmt)
    local n = h:size(3) // 2
    return proj(self, tide.silu(h:narrow(3, 1, n)) * h:narrow(3, n + 1, n), "w2")
  end
  return proj(self, tide.silu(proj(self, x, "w1")) * proj(self, x, "w3"), "w2")
end

local Block = nn.Module:extend("LlamaBlock")
llama.Block = Block

local function norm_weight(c, w)
  return nn.Parameter(w or tide.ones(c.dim, { dtype = c.dtype }))
end

function Block:__init(c, w)
  nn.Module.__init(self)
  w = w or {}
  self.eps = c.norm_eps
  self:register_parameter("attention_norm", norm_weight(c, w.attention_norm))
  self:add_module("attention", Attention(c, w))
  self:register_parameter("ffn_norm", norm_weight(c, w.ffn_norm))
  self:add_module("feed_forward", FeedForward(c, w))
end

function Block:forward(x, cos, sin, layer_cache, len)
  x = x + self.attention(rmsnorm(x, self.attention_norm, self.eps), cos, sin, layer_cache, len)
  return x + self.feed_forward(rmsnorm(x, self.ffn_norm, self.eps))
end

function Block:step_at(x, cos, sin, views, at)
  x = x + self.attention:step_at(rmsnorm(x, self.attention_norm, self.eps), cos, sin, views, at)
  return x + self.feed_forward(rmsnorm(x, self.ffn_norm, self.eps))
end

-- ---- the model ----------------------------------------------------------------------------------

-- llama.Llama(config [, weights]) -> a model. config: the fields of DEFAULTS (dim, hidden_dim,
-- n_layers, n_heads, n_kv_heads, vocab_size, seq_len, norm_eps, rope_theta, tied, dtype).
-- weights (what the loaders pass): {tok_embeddings, norm, output (absent when tied), layers =
-- {{attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3}, ...}}, tensors [out, in] in dtype;
-- without it the weights are random (N(0, 1/fan_in), unit norms).
local Llama = nn.Module:extend("Llama")
llama.Llama = Llama

function Llama:__init(cfg, w)
  nn.Module.__init(self)
  local c = llama.check_config(cfg)
  self.config = c
  w = w or { layers = {} }
  self:register_parameter("tok_embeddings", weight(c.dtype, w.tok_embeddings, 1, c.vocab_size,
                                                   c.dim))
  local blocks = {}
  for i = 1, c.n_layers do
    blocks[i] = Block(c, w.layers[i])
  end
  self:add_module("layers", nn.ModuleList(blocks))
  self:register_parameter("norm", norm_weight(c, w.norm))
  if not c.tied then
    self:register_parameter("output", weight(c.dtype, w.output, 1 / math.sqrt(c.dim),
                                             c.vocab_size, c.dim))
  end
  local cos, sin = rope_tables(c.seq_len, c.dim // c.n_heads, c.rope_theta)
  self._rope = { cos = cos, sin = sin }
end

-- The classifier's weight [vocab, dim]: output, or the embedding when tied (uint8 blocks
-- after tide.quantize(model, fmt); self.quant_format says which).
function Llama:classifier()
  return self.config.tied and self.tok_embeddings or self.output
end

-- tide.quantize(model, fmt) (tide/quant.lua): the projections, the MLP and the classifier
-- (the embedding table too when tied, which the lookup then reads) as fmt blocks; a weight
-- whose input size is not a multiple of 32 stays as it is. Returns the names quantized.
function Llama:quantize_weights(fmt)
  local quant = require "tide.quant"
  local done = {}
  local function q(m, name, path)
    if quant.quantize_weight(m, name, fmt) then done[#done + 1] = path end
  end
  for i, block in ipairs(self.layers:children()) do
    for _, n in ipairs({ "wq", "wk", "wv", "wo" }) do
      q(block.attention, n, ("layers.%d.attention.%s"):format(i, n))
    end
    for _, n in ipairs({ "w1", "w2", "w3" }) do
      q(block.feed_forward, n, ("layers.%d.feed_forward.%s"):format(i, n))
    end
  end
  q(self, self.config.tied and "tok_embeddings" or "output",
    self.config.tied and "tok_embeddings" or "output")
  self.quant_format = fmt
  self:_fuse_weights()
  return done
end

-- Fuses every block's wq, wk, wv and w1, w3 again (llama_fused.lua) after weights were
-- replaced (quantized, converted, installed by a loader).
function Llama:_fuse_weights()
  for _, block in ipairs(self.layers:children()) do
    block.attention:_fuse()
    block.feed_forward:_fuse()
  end
end

-- As nn.Module:to, then the weights fused again (the conversion made new tensors).
function Llama:to(arg)
  nn.Module.to(self, arg)
  self:_fuse_weights()
  return self
end

local function check_idx(self, idx, what, start)
  if not tide.is_tensor(idx) or idx:dim() ~= 2 or idx.dtype ~= "int64" then
    error(("Llama: %s must be an int64 tensor [B, T] of token ids 1..%d, got %s"):format(what,
      self.config.vocab_size, tide.is_tensor(idx) and (idx.dtype .. " " .. shape_str(idx))
      or type(idx)), 0)
  end
  if start + idx:size(2) > self.config.seq_len then
    error(("Llama: %s has %d positions after %d already seen, more than seq_len %d"):format(
      what, idx:size(2), start, self.config.seq_len), 0)
  end
end

-- Token embeddings as float32 [B, T, C]; a bad id is an error naming the range.
local function lookup(self, idx)
  local f = self._qformats and self._qformats.tok_embeddings
  if not f then
    return tide.embedding(idx, self.tok_embeddings)
  end
  -- a quantized table: the ids' rows of blocks, then dequantized
  local rows = tide.index_select(self.tok_embeddings, 1, idx:reshape(-1))
  return tide.dequantize(rows, f.format, f.K):view(idx:size(1), idx:size(2), f.K)
end

local function embed(self, idx)
  local ok, x = pcall(lookup, self, idx)
  if not ok then
    error(("Llama: token ids must be in 1..%d (%s)"):format(self.config.vocab_size, x), 0)
  end
  return x.dtype == "float32" and x or x:to("float32")
end

-- The rotary tables' rows for positions start+1 .. start+T (tensors [T, D/2]).
function Llama:_rope_at(start, T, device)
  local r = self._rope
  if r.cos.device ~= device then
    r.cos, r.sin = r.cos:to(device), r.sin:to(device)
  end
  return r.cos:narrow(1, start + 1, T), r.sin:narrow(1, start + 1, T)
end

-- The final norm and the classifier: x [B, T, C] -> float32 logits [B, T, vocab_size].
function llama._head(self, x)
  return proj(self, rmsnorm(x, self.norm, self.config.norm_eps),
              self.config.tied and "tok_embeddings" or "output")
end
llama._embed, llama._check_idx, llama._rope_view = embed, check_idx, rope_view -- llama_decode

-- idx [B, T] at positions start+1 .. start+T through the blocks (with a cache: appended to it).
function Llama:_run(idx, cache, start)
  local x = embed(self, idx)
  local cos, sin = rope_view(self:_rope_at(start, idx:size(2), x.device))
  for i, block in ipairs(self.layers:children()) do
    x = block(x, cos, sin, cache and cache[i], start)
  end
  return llama._head(self, x)
end

-- model(idx) -> logits [B, T, vocab_size] (float32) for idx int64 [B, T] of tokens 1..vocab.
function Llama:forward(idx)
  check_idx(self, idx, "idx", 0)
  return self:_run(idx, nil, 0)
end

require("tide.models.llama_decode")(llama)
require("tide.models.llama_load")(llama)
return llama
