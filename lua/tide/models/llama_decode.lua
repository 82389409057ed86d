-- tide.models.llama_decode — the decoding half of tide.models.llama: the KV cache, one step
-- eagerly or under tide.jit, and generation. llama.lua calls this module with its table once;
-- the methods land on llama.Llama. The patterns are gpt.lua's (models/README.md).
local tide = require "tide"
local sampling = require "tide.models.sampling"
local decode_jit = require "tide.models.decode_jit"

return function(llama)
  local Llama = llama.Llama

  -- model:new_cache(batch) -> per layer the keys and values of up to seq_len positions
  -- ([batch, n_kv_heads, seq_len, head_size] each, float32), and len, the positions it holds.
  function Llama:new_cache(batch)
    if math.type(batch) ~= "integer" or batch < 1 then
      error("Llama:new_cache: batch must be a positive integer, got " .. tostring(batch), 2)
    end
    local c = self.config
    local on = { dtype = "float32", device = self.tok_embeddings.device }
    local cache = { len = 0, batch = batch }
    for i = 1, c.n_layers do
      cache[i] = { k = tide.zeros(batch, c.n_kv_heads, c.seq_len, c.dim // c.n_heads, on),
                   v = tide.zeros(batch, c.n_kv_heads, c.seq_len, c.dim // c.n_heads, on) }
    end
    return cache
  end

  -- Checks the cache and pos of a decode step (pos rewinds: cache.len becomes pos - 1).
  local function check_step(self, what, idx, cache, pos)
    if type(cache) ~= "table" or math.type(cache.len) ~= "integer" then
      error(what .. ": expected a cache from model:new_cache(batch)", 3)
    end
    if pos ~= nil then
      if math.type(pos) ~= "integer" or pos < 1 or pos > cache.len + 1 then
        error(("%s: pos must be an integer in 1..%d (the cache holds %d positions), got %s")
          :format(what, cache.len + 1, cache.len, tostring(pos)), 3)
      end
      cache.len = pos - 1
    end
    llama._check_idx(self, idx, what .. "'s idx", cache.len)
    if idx:size(1) ~= cache.batch then
      error(("%s: idx has batch %d, the cache %d"):format(what, idx:size(1), cache.batch), 3)
    end
  end

  -- model:decode_step(idx, cache [, pos]) -> logits [B, vocab_size] of idx's last position.
  -- idx int64 [B, T] (one new token, or a prompt) continues what the cache holds; cache.len
  -- grows by T. pos (1-based, default cache.len + 1) may be earlier, to rewind. No gradients.
  function Llama:decode_step(idx, cache, pos)
    check_step(self, "Llama:decode_step", idx, cache, pos)
    local logits
    tide.no_grad(function() logits = self:_run(idx, cache, cache.len) end)
    cache.len = cache.len + idx:size(2)
    return logits:select(2, logits:size(2))
  end

  -- The views of the cache that one position at len + 1 writes and reads, four per layer in
  -- layer order (Attention:step_at), and which of them have a dim that grows with the length
  -- ({{view, dim}, ...}: the used parts' dim 3).
  function Llama:_decode_views(cache, len)
    return decode_jit.cache_views(cache, self.config.n_layers, len, true)
  end

  -- One position through the model, pos as an int64 [1] tensor (the rotary rows come from it,
  -- so they are runtime values), against the cache through its views (_decode_views): the
  -- body of decode_step_jit.
  function Llama:_step_views(idx, pos, views)
    local x = llama._embed(self, idx)
    local r = self._rope
    local cos, sin = llama._rope_view(tide.embedding(pos, r.cos), tide.embedding(pos, r.sin))
    for i, block in ipairs(self.layers:children()) do
      x = block:step_at(x, cos, sin, views, 4 * i - 3)
    end
    return llama._head(self, x):select(2, 1)
  end

  -- The same step against the cache's first len positions (pos = len + 1).
  function Llama:_step_at(idx, cache, pos, len)
    return self:_step_views(idx, pos, (self:_decode_views(cache, len)))
  end

  -- model:decode_step_jit(idx, cache [, pos]) -> as decode_step, a one-token idx [B, 1] run
  -- under tide.jit (a static plan for the first length, a symbolic one for every later one);
  -- prompts and positions 1 and 2 (whose view offsets the jit keeps static) run eagerly.
  function Llama:decode_step_jit(idx, cache, pos)
    if decode_jit.runs_eagerly(idx, cache, pos) then
      return self:decode_step(idx, cache, pos)
    end
    check_step(self, "Llama:decode_step_jit", idx, cache, pos)
    self._rope.cos, self._rope.sin = self._rope.cos:to(idx.device), self._rope.sin:to(idx.device)
    return decode_jit.run(self, idx, cache)
  end

  -- model:decode_jit_stats() -> the jitted step's tide.jit statistics, or nil before its use.
  function Llama:decode_jit_stats()
    return decode_jit.stats(self)
  end

  local OPTS = { temperature = true, top_k = true, top_p = true, seed = true, on_token = true,
                 jit = true }

  -- A prompt (a list of ids, an int64 [T] or [B, T] tensor) as int64 [B, T] on the model's device.
  local function prompt_tensor(self, prompt)
    if type(prompt) == "table" then
      local ok, t = pcall(tide.tensor, prompt, { dtype = "int64" })
      prompt = ok and t or nil
    end
    if tide.is_tensor(prompt) and prompt:dim() == 1 then
      prompt = prompt:view(1, prompt:size(1))
    end
    if not tide.is_tensor(prompt) or prompt:dim() ~= 2 or prompt.dtype ~= "int64"
        or prompt:size(2) < 1 then
      error("Llama:generate: the prompt must be a non-empty list of token ids or an int64 "
        .. "tensor [T] or [B, T]", 3)
    end
    return prompt:to(self.tok_embeddings.device)
  end

  -- model:generate(prompt, n [, {temperature = 1, top_k, top_p, seed, on_token, jit = true}])
  -- -> int64 [B, T + n]: the prompt and n new tokens (T + n <= seq_len), each drawn by
  -- tide.models.sampling and passed to on_token(id, row) as it comes. jit = false runs every
  -- step eagerly. seed makes the draws reproducible without disturbing tide's global RNG.
  function Llama:generate(prompt, n, opts)
    if math.type(n) ~= "integer" or n < 0 then
      error("Llama:generate: the number of new tokens must be an integer >= 0, got "
        .. tostring(n), 2)
    end
    local o = sampling.generate_opts(opts, self.config.vocab_size, "Llama:generate", OPTS)
    local seq = prompt_tensor(self, prompt)
    if seq:size(2) + n > self.config.seq_len then
      error(("Llama:generate: a prompt of %d tokens and %d new ones exceed seq_len %d"):format(
        seq:size(2), n, self.config.seq_len), 2)
    end
    local saved_rng = o.seed and tide.get_rng_state()
    if o.seed then tide.manual_seed(o.seed) end
    local step = o.jit and self.decode_step_jit or self.decode_step
    local ok, err = pcall(function()
      local cache = self:new_cache(seq:size(1))
      local logits = self:decode_step(seq, cache)
      for i = 1, n do
        local tok = tide.no_grad(function() return sampling.next_tokens(logits, o) end)
        seq = tide.cat({ seq, tok }, 2)
        if o.on_token then
          for b, id in ipairs(tok:view(-1):totable()) do o.on_token(id, b) end
        end
        if i < n then logits = step(self, tok, cache) end
      end
    end)
    if saved_rng then tide.set_rng_state(saved_rng) end
    if not ok then error(err, 0) end
    return seq
  end
end
