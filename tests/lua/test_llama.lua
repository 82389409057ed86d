-- test_llama.lua — tide.models.llama against PyTorch 1.13: the oracle in data/ (written by
-- scripts/make_llama_fixture.py from the architecture's description, not from tide's code:
-- dim 64, 2 layers, 4 heads, 2 kv heads, hidden 172, vocab 96, seq_len 64, an unshared
-- classifier). Checked: the prompt's logits from llama2.c's file and from the Hugging Face
-- safetensors (config.json beside it, or the shapes plus n_heads); the 32 greedy tokens, eager
-- and jitted; the KV cache's decode step against the full forward; bfloat16 and float16
-- weights; a tied classifier; on Vulkan (when there is one) the logits and 4 greedy tokens;
-- top-k/top-p sampling; tide.load_raw; every error. Vulkan: the same bound (other kernels,
-- other summation orders).
--
-- Tolerance (float32). tide and PyTorch compute the same float32 sums in other orders. A K-term
-- dot product reordered moves by up to about K * eps (eps = 2^-23) times the sum of its terms'
-- magnitudes; the longest sums here are K = 172 (w2), ~2e-5 relative, passed through 2 blocks
-- whose RMSNorms keep the scale, and softmax/exp/rsqrt add a few ulps:
--   max |got - want| <= 1e-4 * max |want|
-- A rotation of the wrong pairs, a kv head mapped wrongly or a mask off by one moves the logits
-- by 1e-1 of their scale or more. The greedy tokens: the fixture's smallest gap between the
-- best and second-best logit over the 32 steps is 0.0137, ~0.3% of the logits' scale, far
-- above that bound, so the argmax cannot flip.
-- bfloat16 weights: tide widens them to float32 inside each product and keeps activations in
-- float32, so against PyTorch's logits from the same bf16-rounded weights in float32
-- (logits_bf16w) the float32 bound above holds. float16 weights against the float32 logits:
-- each weight is off by up to 2^-11 relative, so each product by 2^-11 times the sum of its
-- terms' magnitudes (~2x the result here); ~10 such products lie on a logit's path:
--   max |got - want| <= 1e-2 * max |want|
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local llama = require "tide.models.llama"
local sampling = require "tide.models.sampling"

local DATA = (arg[0]:match("(.*/)") or "./") .. "data/"
local BIN = DATA .. "llama_tiny.bin"
local HF = DATA .. "llama_tiny_hf.safetensors"
local HF_BF16 = DATA .. "llama_tiny_hf_bf16.safetensors"
local TOL, TOL_F16 = 1e-4, 1e-2
local V, D, SEQ = 96, 64, 64

local IO = tide.load(DATA .. "llama_tiny_io.safetensors")
local PROMPT = (IO.prompt + 1):view(1, -1) -- the fixture's ids are 0-based, tide's 1-based
local T = PROMPT:size(2)

local function max_abs(t)
  return t:abs():max():item()
end

local function close(got, want, tol, what)
  H.eq(got:size(), want:size(), what .. " shape")
  local scale, err = max_abs(want), max_abs(got - want)
  H.ok(err <= tol * scale, ("%s: max |diff| %g > %g * max |want| (%g)"):format(what, err, tol,
                                                                              scale))
end

local function read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write_bytes(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
  return path
end

-- A temporary directory (removed at the end) for files made from the fixture.
local TMP = os.tmpname()
os.remove(TMP)
assert(os.execute("mkdir -p '" .. TMP .. "'"))
local function tmp(name) return TMP .. "/" .. name end

local MODEL = llama.load(BIN)

H.test("llama2.c file: config from the header, the prompt's logits match PyTorch's", function()
  local c = MODEL.config
  H.eq({ c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len,
         c.tied, c.dtype }, { D, 172, 2, 4, 2, V, SEQ, false, "float32" }, "config")
  close(MODEL(PROMPT):view(T, V), IO.logits, TOL, "llama2.c logits")
end)

H.test("Hugging Face safetensors with config.json beside it: logits match", function()
  write_bytes(tmp("model.safetensors"), read_bytes(HF))
  write_bytes(tmp("config.json"), read_bytes(DATA .. "llama_tiny_config.json"))
  local m = llama.load(tmp("model.safetensors"))
  H.eq({ m.config.n_heads, m.config.n_kv_heads, m.config.seq_len, m.config.tied },
       { 4, 2, SEQ, false }, "config from config.json")
  close(m(PROMPT):view(T, V), IO.logits, TOL, "HF logits (config.json)")
end)

H.test("Hugging Face safetensors without config.json: shapes plus n_heads", function()
  local m = llama.load_hf(HF, { n_heads = 4, seq_len = SEQ })
  H.eq({ m.config.n_kv_heads, m.config.hidden_dim, m.config.n_layers }, { 2, 172, 2 }, "config")
  close(m(PROMPT):view(T, V), IO.logits, TOL, "HF logits (inferred)")
  local given = llama.load_hf(HF, { config = { num_attention_heads = 4, num_key_value_heads = 2,
                                                max_position_embeddings = 32 } })
  H.eq({ given.config.n_heads, given.config.seq_len }, { 4, 32 }, "config given as a table")
  close(given(PROMPT):view(T, V), IO.logits, TOL, "HF logits (config table)")
  H.raises(function() llama.load_hf(HF) end, "llama.load_hf", HF, "n_heads")
end)

H.test("greedy: 32 tokens equal PyTorch's, eager and jitted", function()
  local want = IO.greedy:totable()
  for _, jit in ipairs({ false, true }) do
    local streamed = {}
    local out = MODEL:generate(IO.prompt + 1, 32, { temperature = 0, jit = jit,
      on_token = function(id, row) streamed[#streamed + 1] = id - 1; H.eq(row, 1, "row") end })
    local got = (out:view(-1):narrow(1, T + 1, 32) - 1):totable()
    H.eq(got, want, "greedy tokens, jit = " .. tostring(jit))
    H.eq(streamed, want, "streamed tokens, jit = " .. tostring(jit))
  end
  H.ok(MODEL:decode_jit_stats().compiles <= 2, "at most 2 compiles")
end)

H.test("decode step with the cache equals the full forward's last logits", function()
  local full = MODEL(PROMPT)
  local cache = MODEL:new_cache(1)
  close(MODEL:decode_step(PROMPT:narrow(2, 1, 3), cache), full:select(2, 3), TOL, "prefill")
  for t = 4, T do
    local step = t % 2 == 0 and MODEL.decode_step_jit or MODEL.decode_step
    close(step(MODEL, PROMPT:narrow(2, t, 1), cache), full:select(2, t), TOL, "step " .. t)
  end
  H.eq(cache.len, T, "cache.len")
  -- rewinding: position 5 again
  close(MODEL:decode_step_jit(PROMPT:narrow(2, 5, 1), cache, 5), full:select(2, 5), TOL,
        "rewound step")
  H.eq(cache.len, 5, "cache.len after the rewind")
end)

-- llama_fused.lua: a block's wq, wk, wv (and w1, w3) are row views of one weight that a no-grad
-- step reads with one product. The fused and the one-by-one products compute each output from
-- the same row and input (one BLAS row dot product either way), so they agree to float32
-- rounding of a reordered sum at most: TOL.
H.test("fused weights: own names, in-place loads, quantized, converted, gradients", function()
  local function fused(mod, key) -- the fused weight and format a no-grad step reads, or nil
    local w, fmt
    tide.no_grad(function() w, fmt = require("tide.models.llama_fused").get(mod, key) end)
    return w, fmt
  end
  local m = llama.load(BIN)
  local a, ff = m.layers[2].attention, m.layers[2].feed_forward
  H.ok(fused(a, "wqkv") and fused(ff, "w13"), "fused after loading")
  H.eq(table.concat(a.wk:size(), "x"), "32x64", "wk keeps its shape (2 kv heads x 16)")
  local sd = m:state_dict()
  H.ok(sd["layers.2.attention.wv"] and sd["layers.1.feed_forward.w3"], "state_dict names")
  m:load_state_dict(MODEL:state_dict())
  H.ok(fused(a, "wqkv"), "load_state_dict copies in place: still fused")
  local x = tide.randn(1, 1, D)
  tide.no_grad(function()
    local want = tide.cat({ tide.linear(x, a.wq), tide.linear(x, a.wk), tide.linear(x, a.wv) }, 3)
    close(tide.linear(x, (fused(a, "wqkv"))), want, TOL, "fused qkv product")
  end)
  -- gradients: with autograd recording the products read each parameter
  H.eq(require("tide.models.llama_fused").get(a, "wqkv"), nil, "not fused under autograd")
  m(PROMPT):sum():backward()
  H.ok(a.wq.grad and a.wv.grad and ff.w3.grad, "gradients reach wq, wv, w3")
  local q = llama.load(BIN)
  tide.quantize(q, "q8_0")
  local qa = q.layers[1].attention
  local want
  tide.no_grad(function()
    want = tide.cat({ tide.qlinear(x, qa.wq, "q8_0"), tide.qlinear(x, qa.wk, "q8_0"),
                      tide.qlinear(x, qa.wv, "q8_0") }, 3)
  end)
  local w, fmt = fused(qa, "wqkv")
  H.eq({ w and w.dtype, fmt }, { "uint8", "q8_0" }, "quantized blocks fused")
  -- each output row is its own row's blocks times x either way: the same kernel, TOL
  tide.no_grad(function() close(tide.qlinear(x, w, fmt), want, TOL, "fused q8_0 product") end)
  local h = llama.load(BIN):to("bfloat16")
  H.eq(fused(h.layers[1].feed_forward, "w13").dtype, "bfloat16", "fused again after :to")
end)

H.test("bfloat16 and float16 weights", function()
  local m = llama.load(HF_BF16, { n_heads = 4 })
  H.eq({ m.config.dtype, m.layers:children()[1].attention.wq.dtype, m.output.dtype },
       { "bfloat16", "bfloat16", "bfloat16" }, "weights stay bfloat16")
  close(m(PROMPT):view(T, V), IO.logits_bf16w, TOL, "bf16 file vs PyTorch's bf16 weights")
  local from_bin = llama.load(BIN, { dtype = "bfloat16" })
  close(from_bin(PROMPT):view(T, V), IO.logits_bf16w, TOL, "llama2.c cast to bf16")
  local h = llama.load(BIN, { dtype = "float16" })
  close(h(PROMPT):view(T, V), IO.logits, TOL_F16, "float16 weights")
  local sd = tide.load(HF)
  for k, v in pairs(sd) do sd[k] = v:to("float16") end
  tide.save(tmp("f16.safetensors"), sd)
  local f16 = llama.load(tmp("f16.safetensors"), { n_heads = 4 })
  H.eq(f16.config.dtype, "float16", "an F16 file loads as float16")
  close(f16(PROMPT):view(T, V), IO.logits, TOL_F16, "F16 safetensors")
  local out = m:generate(IO.prompt + 1, 8, { temperature = 0 })
  H.eq(out:size(), { 1, T + 8 }, "bf16 generation runs")
end)

-- The fixture's bytes with the header's vocab_size made positive (shared classifier) and wcls cut.
local function tied_file()
  local s = read_bytes(BIN)
  local h = { string.unpack("<i4i4i4i4i4i4i4", s) }
  h[6] = -h[6]
  return write_bytes(tmp("tied.bin"), string.pack("<i4i4i4i4i4i4i4", table.unpack(h, 1, 7))
    .. s:sub(29, #s - V * D * 4))
end

H.test("a classifier tied to the embedding", function()
  local m = llama.load(tied_file())
  H.ok(m.config.tied and m.output == nil and m:classifier() == m.tok_embeddings, "tied")
  local untied = llama.load(BIN)
  tide.no_grad(function() untied.output:copy_(untied.tok_embeddings) end)
  close(m(PROMPT), untied(PROMPT), TOL, "tied logits")
  local sd = tide.load(HF)
  sd["lm_head.weight"] = nil
  tide.save(tmp("tied.safetensors"), sd)
  local hf = llama.load(tmp("tied.safetensors"), { n_heads = 4 })
  H.ok(hf.config.tied and hf.output == nil, "HF without lm_head.weight: tied")
  close(hf(PROMPT), untied(PROMPT), TOL, "HF tied logits")
end)

H.test("on Vulkan: the logits and the first greedy tokens", function()
  local ok, why = tide.vulkan.available()
  if not ok then
    print("  (Vulkan part skipped: " .. tostring(why) .. ")")
    return
  end
  local m = llama.load(BIN):to("vulkan")
  local p = PROMPT:to("vulkan")
  close(m(p):to("cpu"):view(T, V), IO.logits, TOL, "Vulkan logits")
  -- a few greedy steps only: each new kernel costs lavapipe a pipeline build (seconds)
  local out = m:generate(p, 4, { temperature = 0, jit = false })
  H.eq(out.device, "vulkan", "tokens stay on the device")
  H.eq((out:to("cpu"):view(-1):narrow(1, T + 1, 4) - 1):totable(),
       { table.unpack(IO.greedy:totable(), 1, 4) }, "Vulkan greedy tokens")
end)

H.test("sampling: top-k 1 and a tiny top-p are greedy; top-p keeps the nucleus", function()
  local greedy = MODEL:generate(PROMPT, 10, { temperature = 0 })
  H.eq(MODEL:generate(PROMPT, 10, { temperature = 0.9, top_k = 1, seed = 5 }):totable(),
       greedy:totable(), "top_k = 1")
  H.eq(MODEL:generate(PROMPT, 10, { temperature = 0.9, top_p = 1e-6, seed = 5 }):totable(),
       greedy:totable(), "top_p = 1e-6")
  local a = MODEL:generate(PROMPT, 10, { temperature = 1, top_p = 0.9, seed = 7 })
  local b = MODEL:generate(PROMPT, 10, { temperature = 1, top_p = 0.9, seed = 7, jit = false })
  H.eq(a:totable(), b:totable(), "seeded draws repeat, jitted or not")
  -- probabilities 0.5, 0.3, 0.2 with top_p 0.6: tokens 1 and 2 only, 0.625 and 0.375 after
  -- renormalizing; 4000 rows drawn at once, 4 sigma = 4 * sqrt(.625 * .375 / 4000) = 0.031
  local N = 4000
  local logits = tide.tensor({ { math.log(0.5), math.log(0.3), math.log(0.2) } }):expand(N, 3)
  tide.manual_seed(11)
  local tok = sampling.next_tokens(logits, { temperature = 1, top_p = 0.6 })
  H.eq(tok:eq(3):sum():item(), 0, "token 3 is outside the nucleus")
  H.near(tok:eq(1):to("float32"):mean():item(), 0.625, 0.031, "share of token 1")
end)

H.test("tide.load_raw reads arrays at an offset, and refuses a short file", function()
  local s = read_bytes(BIN)
  local h = { string.unpack("<i4i4i4i4i4i4i4", s) }
  H.eq(tide.load_raw(BIN, 0, "int32", { 7 }):totable(), { table.unpack(h, 1, 7) }, "header")
  local f = tide.load_raw(BIN, 28, "float32", { 2, 3 }):view(-1):totable()
  for i = 1, 6 do
    H.near(f[i], (string.unpack("<f", s, 28 + 4 * (i - 1) + 1)), 0, "float " .. i)
  end
  H.raises(function() tide.load_raw(BIN, #s - 4, "float32", { 2 }) end, "load_raw", BIN,
           tostring(#s + 4), tostring(#s))
  H.raises(function() tide.load_raw(BIN, -1, "float32", { 2 }) end, "offset must be >= 0")
  H.raises(function() tide.load_raw(tmp("nothing"), 0, "float32", { 2 }) end, "cannot open")
end)

H.test("file errors name the file and the sizes", function()
  local s = read_bytes(BIN)
  local cut = write_bytes(tmp("cut.bin"), s:sub(1, #s - 4))
  H.raises(function() llama.load(cut) end, "llama.load_llama2c", cut, tostring(#s),
           tostring(#s - 4))
  local h = { string.unpack("<i4i4i4i4i4i4i4", s) }
  h[6] = -h[6] -- says shared: the file is one classifier too long
  local bad = write_bytes(tmp("bad.bin"), string.pack("<i4i4i4i4i4i4i4", table.unpack(h, 1, 7))
    .. s:sub(29))
  H.raises(function() llama.load(bad) end, bad, "vocab_size 96", tostring(#s - V * D * 4),
           "the file has " .. #s)
  H.raises(function() llama.load(write_bytes(tmp("tiny.bin"), "abc")) end, "3 bytes",
           "28-byte header")
  h[6], h[4] = -h[6], 5 -- 64 is not 5 heads
  local heads = write_bytes(tmp("heads.bin"), string.pack("<i4i4i4i4i4i4i4", table.unpack(h, 1, 7))
    .. s:sub(29))
  H.raises(function() llama.load(heads) end, heads, "not a Llama", "n_heads")
  H.raises(function() llama.load(tmp("missing.bin")) end, "cannot open")
  assert(os.execute("mkdir -p '" .. tmp("badjson") .. "'"))
  write_bytes(tmp("badjson/model.safetensors"), read_bytes(HF))
  write_bytes(tmp("badjson/config.json"), '{"hidden_size": 64, "num_attention_heads": }')
  H.raises(function() llama.load(tmp("badjson/model.safetensors")) end, "badjson/config.json",
           "unexpected character at byte")
  local sd = tide.load(HF)
  sd["model.layers.1.mlp.up_proj.weight"] = nil
  tide.save(tmp("missing.safetensors"), sd)
  H.raises(function() llama.load(tmp("missing.safetensors"), { n_heads = 4 }) end,
           "missing tensor 'model.layers.1.mlp.up_proj.weight'")
  sd = tide.load(HF)
  sd["model.norm.weight"] = tide.ones(D + 1)
  tide.save(tmp("shape.safetensors"), sd)
  H.raises(function() llama.load(tmp("shape.safetensors"), { n_heads = 4 }) end,
           "'model.norm.weight' is [65], expected [64]")
  sd = tide.load(HF)
  sd["model.extra"] = tide.ones(2)
  tide.save(tmp("extra.safetensors"), sd)
  H.raises(function() llama.load(tmp("extra.safetensors"), { n_heads = 4 }) end,
           "unexpected tensor 'model.extra'")
end)

H.test("a random model: parameter shapes, forward, generation", function()
  tide.manual_seed(3)
  local m = llama.Llama({ dim = 32, hidden_dim = 48, n_layers = 2, n_heads = 4, n_kv_heads = 1,
                          vocab_size = 40, seq_len = 16, dtype = "bfloat16" })
  local shapes = {}
  for name, p in m:named_parameters() do shapes[name] = table.concat(p:size(), "x") .. p.dtype end
  H.eq({ shapes.tok_embeddings, shapes["layers.2.attention.wk"], shapes["layers.1.feed_forward.w2"],
         shapes["layers.1.ffn_norm"], shapes.output },
       { "40x32bfloat16", "8x32bfloat16", "32x48bfloat16", "32bfloat16", "40x32bfloat16" },
       "parameter shapes")
  local idx = tide.tensor({ { 1, 5, 40 } }, { dtype = "int64" })
  local logits = m(idx)
  H.eq({ logits:size(), logits.dtype }, { { 1, 3, 40 }, "float32" }, "logits")
  local cache = m:new_cache(1)
  m:decode_step(idx:narrow(2, 1, 2), cache)
  close(m:decode_step(idx:narrow(2, 3, 1), cache), logits:select(2, 3), TOL, "cache (1 kv head)")
  H.eq(m:generate(idx, 13, { temperature = 0.7, seed = 1 }):size(), { 1, 16 }, "generate")
end)

H.test("argument errors", function()
  H.raises(function() llama.load(BIN, { dtype = "int32" }) end, "dtype must be")
  H.raises(function() llama.load(BIN, { bogus = 1 }) end, "unknown option 'bogus'")
  H.raises(function() llama.load(42) end, "expected a file path")
  H.raises(function() llama.Llama({ dim = 64, n_heads = 3 }) end, "n_heads")
  H.raises(function() llama.Llama({ dim = 64, n_heads = 4, n_kv_heads = 3 }) end, "n_kv_heads")
  H.raises(function() llama.Llama({ nope = 1 }) end, "unknown config field 'nope'")
  H.raises(function() MODEL(tide.tensor({ { 0, 1 } }, { dtype = "int64" })) end, "1..96")
  H.raises(function() MODEL(tide.tensor({ { 97 } }, { dtype = "int64" })) end, "1..96")
  H.raises(function() MODEL(tide.ones(1, 2)) end, "int64 tensor [B, T]")
  H.raises(function() MODEL(tide.ones(1, SEQ + 1, { dtype = "int64" })) end, "seq_len 64")
  H.raises(function() MODEL:generate(PROMPT, SEQ) end, "exceed seq_len 64")
  H.raises(function() MODEL:generate(PROMPT, 2, { top_p = 0 }) end, "top_p must be")
  H.raises(function() MODEL:generate(PROMPT, 2, { top_p = 1.5 }) end, "top_p must be")
  H.raises(function() MODEL:generate(PROMPT, 2, { temperature = -1 }) end, "temperature")
  H.raises(function() MODEL:generate(PROMPT, 2, { top_k = V + 1 }) end, "top_k")
  H.raises(function() MODEL:generate(PROMPT, 2, { foo = 1 }) end, "unknown option 'foo'")
  H.raises(function() MODEL:generate({}, 2) end, "non-empty list")
  H.raises(function() MODEL:generate(PROMPT, -1) end, "integer >= 0")
  H.raises(function() MODEL:new_cache(0) end, "batch must be a positive integer")
  local cache = MODEL:new_cache(1)
  H.raises(function() MODEL:decode_step(PROMPT, cache, 3) end, "pos must be an integer in 1..1")
  H.raises(function() MODEL:decode_step(PROMPT, {}) end, "expected a cache")
  H.raises(function() MODEL:decode_step(PROMPT:expand(2, T), cache) end, "batch 2, the cache 1")
end)

os.execute("rm -rf '" .. TMP .. "'")
H.done()
