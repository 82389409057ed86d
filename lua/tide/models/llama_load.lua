-- tide.models.llama_load — the checkpoint readers of tide.models.llama: llama2.c's binary
-- format and Hugging Face's safetensors names. llama.lua calls this module with its table once.
--
--   llama.load(path [, opts])          .safetensors -> load_hf, anything else -> load_llama2c
--   llama.load_llama2c(path [, {dtype = "float32"}])
--   llama.load_hf(path [, {dtype =, config =, n_heads =, n_kv_heads =, seq_len =}])
--   llama.save(model, path)            safetensors with HF names, quantized or not (llama_save.lua)
--
-- Every mistake in a file is an error naming the file.
local tide = require "tide"
local sampling = require "tide.models.sampling"

return function(llama)
  local HALF = { float32 = true, float16 = true, bfloat16 = true }

  local function check_opts(opts, what, allowed)
    opts = sampling.check_keys(opts, what, allowed)
    if opts.dtype ~= nil and not HALF[opts.dtype] then
      error(what .. ": dtype must be float32, float16 or bfloat16, got " .. tostring(opts.dtype),
        3)
    end
    return opts
  end

  local function file_size(what, path)
    if type(path) ~= "string" then
      error(what .. ": expected a file path, got " .. type(path), 3)
    end
    local f, msg = io.open(path, "rb")
    if not f then
      error(("%s: cannot open %s"):format(what, msg), 3)
    end
    local size = f:seek("end")
    f:close()
    if not size then
      error(("%s: %s: cannot read its size (not a regular file?)"):format(what, path), 3)
    end
    return size
  end

  -- ---- llama2.c ---------------------------------------------------------------------------------

  local HEADER = { "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                   "seq_len" }

  -- The config a llama2.c header describes, checked (vocab_size < 0: unshared classifier).
  local function llama2c_config(path, h)
    local c = {}
    for i, k in ipairs(HEADER) do c[k] = h[i] end
    local shared = c.vocab_size > 0
    c.vocab_size = math.abs(c.vocab_size)
    c.tied = shared
    local ok, err = pcall(llama.check_config, c)
    if not ok then
      error(("llama.load_llama2c: %s: the header (%s) is not a Llama: %s"):format(path,
        table.concat(h, ", "), err), 0)
    end
    return c
  end

  -- The arrays after the header, in the file's order: name, shape (the per-layer ones stacked).
  local function llama2c_layout(c)
    local L, D, H, V = c.n_layers, c.dim, c.hidden_dim, c.vocab_size
    local hs = D // c.n_heads
    local kv = c.n_kv_heads * hs
    local list = {
      { "tok_embeddings", { V, D } }, { "attention_norm", { L, D } }, { "wq", { L, D, D } },
      { "wk", { L, kv, D } }, { "wv", { L, kv, D } }, { "wo", { L, D, D } },
      { "ffn_norm", { L, D } }, { "w1", { L, H, D } }, { "w2", { L, D, H } },
      { "w3", { L, H, D } }, { "norm", { D } },
      { nil, { c.seq_len * hs // 2 } }, { nil, { c.seq_len * hs // 2 } }, -- unused RoPE tables
    }
    if not c.tied then list[#list + 1] = { "output", { V, D } } end
    return list
  end

  local function numel(shape)
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    return n
  end

  -- llama.load_llama2c(path [, {dtype = "float32"}]) -> a Llama from llama2.c's format: seven
  -- int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (< 0: an unshared
  -- classifier follows), seq_len), then float32 arrays. dtype: the weights' dtype in tide.
  function llama.load_llama2c(path, opts)
    local what = "llama.load_llama2c"
    opts = check_opts(opts, what, { dtype = true })
    local size = file_size(what, path)
    if size < 28 then
      error(("%s: %s: %d bytes, shorter than llama2.c's 28-byte header"):format(what, path, size),
        2)
    end
    local c = llama2c_config(path, tide.load_raw(path, 0, "int32", { 7 }):totable())
    local layout = llama2c_layout(c)
    local want = 28
    for _, a in ipairs(layout) do want = want + 4 * numel(a[2]) end
    if want ~= size then
      error(("%s: %s: its header (dim %d, hidden_dim %d, n_layers %d, n_heads %d, n_kv_heads %d, "
        .. "vocab_size %d%s, seq_len %d) needs %d bytes, but the file has %d"):format(what, path,
        c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
        c.tied and "" or " unshared", c.seq_len, want, size), 2)
    end
    c.dtype = opts.dtype or "float32"
    local arrays, off = {}, 28
    for _, a in ipairs(layout) do
      if a[1] then
        arrays[a[1]] = tide.load_raw(path, off, "float32", a[2]):to(c.dtype)
      end
      off = off + 4 * numel(a[2])
    end
    local w = { tok_embeddings = arrays.tok_embeddings, norm = arrays.norm,
                output = arrays.output, layers = {} }
    for i = 1, c.n_layers do
      local layer = {}
      for _, k in ipairs({ "attention_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2",
                           "w3" }) do
        layer[k] = arrays[k]:select(1, i)
      end
      w.layers[i] = layer
    end
    return llama.Llama(c, w)
  end

  require("tide.models.llama_hf")(llama, { check_opts = check_opts, file_size = file_size })
  require("tide.models.llama_save")(llama)

  -- llama.load(path [, opts]) -> load_hf for a .safetensors file, else load_llama2c.
  function llama.load(path, opts)
    if type(path) == "string" and path:match("%.safetensors$") then
      return llama.load_hf(path, opts)
    end
    return llama.load_llama2c(path, opts)
  end
end
