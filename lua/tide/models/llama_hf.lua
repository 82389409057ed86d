-- tide.models.llama_hf — llama.load_hf: a Llama from safetensors with Hugging Face's names
-- (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight,
-- lm_head.weight), the config from a config.json beside the file. Called by llama_load.lua.
local tide = require "tide"

-- ---- a small JSON reader (config.json: objects, arrays, strings, numbers, literals) -----------

local function json_decode(s, path)
  local pos = 1
  local function fail(msg)
    error(("llama.load_hf: %s: %s at byte %d"):format(path, msg, pos), 0)
  end
  local function skip() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local value
  local function str()
    local out, i = {}, pos + 1
    while true do
      local c = s:sub(i, i)
      if c == "" then fail("unterminated string") end
      if c == '"' then pos = i + 1; return table.concat(out) end
      if c == "\\" then
        local e = s:sub(i + 1, i + 1)
        local map = { n = "\n", t = "\t", r = "\r", b = "\b", f = "\f" }
        if e == "u" then
          out[#out + 1] = utf8.char(tonumber(s:sub(i + 2, i + 5), 16) or fail("bad \\u escape"))
          i = i + 6
        else
          out[#out + 1] = map[e] or e
          i = i + 2
        end
      else
        out[#out + 1] = c
        i = i + 1
      end
    end
  end
  local function list(close, item)
    local t = {}
    pos = pos + 1
    skip()
    if s:sub(pos, pos) == close then pos = pos + 1; return t end
    while true do
      item(t)
      skip()
      local c = s:sub(pos, pos)
      pos = pos + 1
      if c == close then return t end
      if c ~= "," then fail("expected ',' or '" .. close .. "'") end
    end
  end
  function value()
    skip()
    local c = s:sub(pos, pos)
    if c == "{" then
      return list("}", function(t)
        skip()
        if s:sub(pos, pos) ~= '"' then fail("expected a key") end
        local k = str()
        skip()
        if s:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value()
      end)
    elseif c == "[" then
      return list("]", function(t) t[#t + 1] = value() end)
    elseif c == '"' then
      return str()
    end
    for lit, v in pairs({ ["true"] = true, ["false"] = false, null = json_decode }) do
      if s:sub(pos, pos + #lit - 1) == lit then
        pos = pos + #lit
        return v ~= json_decode and v or nil
      end
    end
    local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
    if not num or num == "" or not tonumber(num) then fail("unexpected character") end
    pos = pos + #num
    return math.tointeger(tonumber(num)) or tonumber(num)
  end
  local v = value()
  skip()
  if pos <= #s then fail("trailing characters") end
  return v
end

-- ---- config ------------------------------------------------------------------------------------

-- config.json beside path, decoded, or nil when there is none.
local function read_config_json(path)
  local dir = path:match("^(.*)/[^/]*$") or "."
  local name = dir .. "/config.json"
  local f = io.open(name, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return json_decode(text, name)
end

local function count_layers(sd)
  local n = 0
  for name in pairs(sd) do
    local i = name:match("^model%.layers%.(%d+)%.")
    if i then n = math.max(n, tonumber(i) + 1) end
  end
  return n
end

-- Quantized tensors (llama_save.lua's layout): {name = {format, rows, K}} from the metadata.
local function quantized_of(path, meta)
  local q = {}
  for k, v in pairs(meta or {}) do
    local name = k:match("^tide%.quantized%.(.+)$")
    if name then
      local fmt, rows, K = v:match("^(q[48]_0),%[(%d+),(%d+)%]$")
      if not fmt then
        error(("llama.load_hf: %s: metadata '%s' = '%s' is not 'q8_0,[rows,K]' or "
          .. "'q4_0,[rows,K]'"):format(path, k, v), 0)
      end
      q[name] = { format = fmt, rows = tonumber(rows), K = tonumber(K) }
    end
  end
  return q
end

-- The Llama config: from the HF config (hidden_size, ...), the options, else the shapes (the
-- logical shapes of quantized tensors) and tide's own metadata (llama.save).
local function make_config(path, sd, hf, opts, quantized, meta)
  local emb = sd["model.embed_tokens.weight"]
  if not emb or emb:dim() ~= 2 then
    error(("llama.load_hf: %s: no model.embed_tokens.weight [vocab, dim] (not a Hugging Face "
      .. "Llama checkpoint?)"):format(path), 0)
  end
  local qe = quantized["model.embed_tokens.weight"]
  local gate = sd["model.layers.0.mlp.gate_proj.weight"]
  local c = { vocab_size = emb:size(1), dim = qe and qe.K or emb:size(2),
              n_layers = count_layers(sd), hidden_dim = gate and gate:size(1) or 0 }
  local own = {}
  for k, v in pairs(meta or {}) do
    local f = k:match("^tide%.llama%.(.+)$")
    if f then own[f] = math.tointeger(tonumber(v)) or tonumber(v) end
  end
  hf = { num_attention_heads = hf.num_attention_heads or own.n_heads,
         num_key_value_heads = hf.num_key_value_heads or own.n_kv_heads,
         max_position_embeddings = hf.max_position_embeddings or own.seq_len,
         rms_norm_eps = hf.rms_norm_eps or own.norm_eps, rope_theta = hf.rope_theta or own.rope_theta }
  c.n_heads = opts.n_heads or hf.num_attention_heads
  if not c.n_heads then
    error(("llama.load_hf: %s: no config.json beside it gives num_attention_heads: pass "
      .. "{n_heads = N}"):format(path), 0)
  end
  local k = sd["model.layers.0.self_attn.k_proj.weight"]
  c.n_kv_heads = opts.n_kv_heads or hf.num_key_value_heads
    or (k and k:size(1) // (c.dim // c.n_heads)) or c.n_heads
  c.seq_len = opts.seq_len or hf.max_position_embeddings or 2048
  c.norm_eps = hf.rms_norm_eps or 1e-5
  c.rope_theta = hf.rope_theta or 10000
  c.tied = sd["lm_head.weight"] == nil
  local norm = sd["model.norm.weight"]
  c.dtype = opts.dtype or (qe and norm and norm.dtype) or emb.dtype
  if not (c.dtype == "float32" or c.dtype == "float16" or c.dtype == "bfloat16") then
    error(("llama.load_hf: %s: weights are %s; expected float32, float16 or bfloat16")
      :format(path, c.dtype), 0)
  end
  return c
end

-- ---- weights -----------------------------------------------------------------------------------

-- HF stores q_proj and k_proj with each head's rows ordered for its rotate-half RoPE (pairs
-- (j, j + D/2)); the adjacent-pair rotation wants (2i, 2i+1): view [heads, 2, D/2, dim], swap
-- the middle dims, reshape back.
local function unpermute(w, heads)
  local out, dim = w:size(1), w:size(2)
  return w:view(heads, 2, out // heads // 2, dim):transpose(2, 3):reshape(out, dim)
end

-- A quantized tensor checked against its metadata and the shape the model wants: the U8 blocks.
local function take_quantized(path, t, name, q, rows, cols)
  local bytes = cols and cols % 32 == 0 and cols // 32 * (q.format == "q8_0" and 34 or 18)
  if q.rows ~= rows or q.K ~= cols or t.dtype ~= "uint8" or t:dim() ~= 2 or t:size(1) ~= rows
      or t:size(2) ~= bytes then
    error(("llama.load_hf: %s: quantized tensor '%s' is %s [%s] (%s [%d, %d] in the metadata), "
      .. "expected %s blocks of [%d, %s]"):format(path, name, t.dtype, table.concat(t:size(), ", "),
      q.format, q.rows, q.K, q.format, rows, tostring(cols)), 0)
  end
  return t
end

-- sd[name] checked to be [rows, cols] and converted to dtype; used marks it consumed. A
-- quantized one (quantized[name]) comes back as its uint8 blocks.
local function take(path, sd, used, name, rows, cols, dtype, quantized)
  local t = sd[name]
  if t == nil then
    error(("llama.load_hf: %s: missing tensor '%s'"):format(path, name), 0)
  end
  if quantized and quantized[name] then
    used[name] = true
    return take_quantized(path, t, name, quantized[name], rows, cols)
  end
  local ok = t:dim() == (cols and 2 or 1) and t:size(1) == rows and (not cols or t:size(2) == cols)
  if not ok then
    error(("llama.load_hf: %s: tensor '%s' is [%s], expected [%s]"):format(path, name,
      table.concat(t:size(), ", "), cols and (rows .. ", " .. cols) or tostring(rows)), 0)
  end
  used[name] = true
  return t.dtype == dtype and t or t:to(dtype)
end

local function layer_weights(path, sd, used, c, i, quantized)
  local p = ("model.layers.%d."):format(i - 1)
  local D, H, hs = c.dim, c.hidden_dim, c.dim // c.n_heads
  local kv = c.n_kv_heads * hs
  local function get(name, rows, cols)
    return take(path, sd, used, p .. name, rows, cols, c.dtype, quantized)
  end
  return {
    attention_norm = get("input_layernorm.weight", D),
    wq = unpermute(get("self_attn.q_proj.weight", D, D), c.n_heads),
    wk = unpermute(get("self_attn.k_proj.weight", kv, D), c.n_kv_heads),
    wv = get("self_attn.v_proj.weight", kv, D), wo = get("self_attn.o_proj.weight", D, D),
    ffn_norm = get("post_attention_layernorm.weight", D),
    w1 = get("mlp.gate_proj.weight", H, D), w2 = get("mlp.down_proj.weight", D, H),
    w3 = get("mlp.up_proj.weight", H, D),
  }
end

-- llama.Llama(c, w) with quantized weights (uint8 in w) installed after construction (a float
-- placeholder stands in for each meanwhile).
local function quantized_model(llama, c, w, quantized)
  if next(quantized) == nil then return llama.Llama(c, w) end
  local quant, names = require "tide.quant", require("tide.models.llama_save")(llama)
  local later, placeholder = {}, tide.zeros(1, { dtype = c.dtype })
  local function hold(tbl, key, path, module_of)
    local t = tbl[key]
    if t and t.dtype == "uint8" then
      later[#later + 1] = { module_of, key, t, quantized[path] }
      tbl[key] = placeholder
    end
  end
  hold(w, "tok_embeddings", "model.embed_tokens.weight", function(m) return m end)
  hold(w, "output", "lm_head.weight", function(m) return m end)
  for i, lw in ipairs(w.layers) do
    for _, e in ipairs(names.layer_names(c, i)) do
      hold(lw, e[2], e[3], function(m) return m.layers[i][e[1]] end)
    end
  end
  local m = llama.Llama(c, w)
  for _, l in ipairs(later) do
    quant.set_quantized(l[1](m), l[2], l[3], l[4].format, l[4].K)
    m.quant_format = l[4].format
  end
  m:_fuse_weights()
  return m
end

return function(llama, util)
  -- llama.load_hf(path [, {dtype, config, n_heads, n_kv_heads, seq_len}]) -> a Llama from
  -- safetensors with Hugging Face's names. The config comes from opts.config (a decoded
  -- config.json table), else config.json beside the file, else the shapes plus n_heads (and
  -- n_kv_heads, seq_len: default the k_proj rows / head size and 2048). No lm_head.weight: the
  -- classifier is tied to the embedding. dtype: the weights' dtype (default the file's).
  function llama.load_hf(path, opts)
    local what = "llama.load_hf"
    opts = util.check_opts(opts, what, { dtype = true, config = true, n_heads = true,
                                         n_kv_heads = true, seq_len = true })
    util.file_size(what, path)
    local sd, meta = tide.load(path)
    local quantized = quantized_of(path, meta)
    local hf = opts.config or read_config_json(path) or {}
    local c = make_config(path, sd, hf, opts, quantized, meta)
    local ok, err = pcall(llama.check_config, c)
    if not ok then
      error(("%s: %s: %s"):format(what, path, err), 2)
    end
    local used = {}
    local w = { layers = {},
                tok_embeddings = take(path, sd, used, "model.embed_tokens.weight", c.vocab_size,
                                      c.dim, c.dtype, quantized),
                norm = take(path, sd, used, "model.norm.weight", c.dim, nil, c.dtype) }
    if not c.tied then
      w.output = take(path, sd, used, "lm_head.weight", c.vocab_size, c.dim, c.dtype, quantized)
    end
    for i = 1, c.n_layers do
      w.layers[i] = layer_weights(path, sd, used, c, i, quantized)
    end
    for name in pairs(sd) do
      if not used[name] and not name:match("rotary_emb%.inv_freq$") then
        error(("%s: %s: unexpected tensor '%s' (not a Llama's)"):format(what, path, name), 2)
      end
    end
    return quantized_model(llama, c, w, quantized)
  end
end
