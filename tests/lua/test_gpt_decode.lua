-- test_gpt_decode.lua — the GPT's decoding step under tide.jit (model:decode_step_jit): the
-- cache stays at block size and attention masks the later keys, so only the write's view
-- offset depends on the length, and a symbolic plan serves every length.
-- Checked: over lengths 1..40 the jitted step equals the same step run eagerly bitwise (the
-- jit's promise on the CPU, jit/README.md; lengths 1 and 2 run eagerly by design), and the
-- eager decode_step (attention over the first len keys only) and the
-- full forward's last logits within float32 tolerance; at most 2 compiles; greedy generation
-- (past block_size, where the cache is rebuilt) gives eager's tokens; on Vulkan the same
-- against the CPU; bad arguments are clear errors.
--
-- Tolerance. The jitted step attends over the whole block with the later keys masked to -inf
-- (exp gives exactly 0 there), the eager decode over the first len keys, and the full forward
-- computes every position at once: the same float32 sums in other orders. A K-term dot
-- product reordered moves by up to about K * eps (eps = 2^-23) times the sum of its terms'
-- magnitudes; the longest sums are K = 4 * n_embd = 128 (mlp.c_proj), ~1.5e-5 relative, passed
-- through 2 LayerNorm-ed blocks without compounding much:
--   max |got - want| <= 1e-4 * max |want|
-- while a key written at the wrong position or a mask off by one moves values by 1e-2 of scale
-- or more. Vulkan against the CPU: the same bound (other kernels, other orders).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local gpt = require "tide.models.gpt"

local TOL = 1e-4
local CONFIG = { vocab_size = 64, block_size = 48, n_layer = 2, n_head = 2, n_embd = 32 }
local LENGTHS = 40

local function max_abs(t)
  return t:abs():max():item()
end

local function close(got, want, what)
  H.eq(got:size(), want:size(), what .. " shape")
  local scale = max_abs(want)
  local err = max_abs(got:to("cpu") - want:to("cpu"))
  H.ok(err <= TOL * scale, ("%s: max |diff| %g > %g * max |want| (%g)"):format(what, err, TOL,
                                                                              scale))
end

local function model_and_tokens()
  tide.manual_seed(7)
  local model = gpt.GPT(CONFIG):eval()
  return model, tide.randint(1, CONFIG.vocab_size + 1, { 2, LENGTHS })
end

H.test("jitted decode over lengths 1..40: eager's bits, the forward's logits, one compile",
       function()
  local model, tokens = model_and_tokens()
  local full = tide.no_grad(function() return model(tokens) end)
  local jc, ec, sc = model:new_cache(2), model:new_cache(2), model:new_cache(2)
  for t = 1, LENGTHS do
    local tok = tokens:narrow(2, t, 1)
    local got = model:decode_step_jit(tok, jc)
    H.eq(jc.len, t)
    local pos = tide.tensor({ t }, { dtype = "int64" })
    local same = tide.no_grad(function() return model:_step_at(tok, sc, pos, t - 1) end)
    if t > 2 then
      H.ok(tide.equal(got, same), "length " .. t .. ": bitwise the same step run eagerly")
    end
    close(got, same, "length " .. t .. " against the masked step run eagerly")
    close(got, model:decode_step(tok, ec), "length " .. t .. " against decode_step")
    close(got, full:select(2, t), "length " .. t .. " against the full forward")
  end
  local st = model:decode_jit_stats()
  H.ok(st.compiles <= 2, ("%d compiles for %d lengths"):format(st.compiles, LENGTHS))
  H.eq(st.fallbacks, 0)
  -- lengths 1 and 2 run eagerly, 3 and 4 compile: every other length hits
  H.ok(st.hits >= LENGTHS - 4, "the other lengths hit the plan")
end)

H.test("the composite attention path (matmul, masked_fill, softmax) under the jit too", function()
  tide.manual_seed(7)
  local model = gpt.GPT({ vocab_size = 64, block_size = 48, n_layer = 2, n_head = 2, n_embd = 32,
                          attention = "composite" }):eval()
  local tokens = tide.randint(1, 65, { 2, 20 })
  local jc, ec, sc = model:new_cache(2), model:new_cache(2), model:new_cache(2)
  for t = 1, 20 do
    local tok = tokens:narrow(2, t, 1)
    -- The eager step starts from the jitted one's cache. Positions 1 and 2 go through
    -- decode_step (attention over the first len keys), whose products over K = len keys round
    -- differently from the masked step's over K = block_size (zeros past len) in avx2's sgemm;
    -- the cache carries that difference into every later step unless both start equal.
    for i = 1, CONFIG.n_layer do
      sc[i].k:copy_(jc[i].k)
      sc[i].v:copy_(jc[i].v)
    end
    local pos = tide.tensor({ t }, { dtype = "int64" })
    local same = tide.no_grad(function() return model:_step_at(tok, sc, pos, t - 1) end)
    local got = model:decode_step_jit(tok, jc)
    if t > 2 then
      H.ok(tide.equal(got, same), "composite length " .. t .. ": bitwise the same step eagerly")
    end
    close(got, same, "composite length " .. t .. " against the masked step run eagerly")
    close(got, model:decode_step(tok, ec), "composite length " .. t .. " against decode_step")
  end
  H.ok(model:decode_jit_stats().compiles <= 2)
end)

H.test("a prompt, then rewinding: the jitted step continues decode_step's cache", function()
  local model, tokens = model_and_tokens()
  local full = tide.no_grad(function() return model(tokens) end)
  local cache = model:new_cache(2)
  close(model:decode_step_jit(tokens:narrow(2, 1, 6), cache), full:select(2, 6), "prompt")
  H.eq(cache.len, 6)
  for t = 7, 12 do
    close(model:decode_step_jit(tokens:narrow(2, t, 1), cache), full:select(2, t), "pos " .. t)
  end
  -- back to position 9 with another token: as a fresh run over tokens 1..8 and that token
  local other = tokens:clone()
  other:narrow(2, 9, 1):fill_(5)
  local want = tide.no_grad(function() return model(other:narrow(2, 1, 9)) end)
  close(model:decode_step_jit(other:narrow(2, 9, 1), cache, 9), want:select(2, 9), "rewound")
  H.eq(cache.len, 9)
end)

H.test("greedy and seeded generation with the jitted step give eager's tokens", function()
  local model = model_and_tokens()
  local prompt = { 3, 14, 15, 9 }
  -- 70 new tokens: past block_size 48, so the cache is rebuilt once on the way
  local eager = model:generate(prompt, 70, { temperature = 0, jit = false })
  local jitted = model:generate(prompt, 70, { temperature = 0 })
  H.ok(tide.equal(jitted, eager), "greedy tokens equal")
  local a = model:generate(prompt, 30, { temperature = 0.9, top_k = 10, seed = 3, jit = false })
  local b = model:generate(prompt, 30, { temperature = 0.9, top_k = 10, seed = 3, jit = true })
  H.ok(tide.equal(a, b), "sampled tokens equal under one seed")
  H.ok(model:decode_jit_stats().compiles <= 2, "still one plan after the cache was rebuilt")
end)

H.test("bad arguments are clear errors", function()
  local model, tokens = model_and_tokens()
  local cache = model:new_cache(2)
  H.raises(function() model:decode_step_jit(tokens:narrow(2, 1, 1), {}) end, "new_cache")
  H.raises(function() model:decode_step_jit(tokens:narrow(2, 1, 1), cache, 3) end,
           "pos must be an integer in 1..1")
  H.raises(function() model:decode_step_jit(tokens:narrow(1, 1, 1):narrow(2, 1, 1), cache) end,
           "batch 1, the cache 2")
  H.raises(function() model:decode_step_jit(tokens:narrow(2, 1, 1):to("float32"), cache) end,
           "int64")
  cache.len = CONFIG.block_size
  H.raises(function() model:decode_step_jit(tokens:narrow(2, 1, 1), cache) end, "block_size 48")
  H.raises(function() model:generate({ 1 }, 3, { jit = 1 }) end, "jit must be a boolean")
end)

H.test("on Vulkan: the jitted decode against the CPU's, and greedy tokens", function()
  local ok, why = tide.vulkan.available()
  if not ok then
    print("  (Vulkan part skipped: " .. tostring(why) .. ")")
    return
  end
  local cpu, tokens = model_and_tokens()
  local model = model_and_tokens():to("vulkan")
  local vt = tokens:to("vulkan")
  local cc, vc = cpu:new_cache(2), model:new_cache(2)
  for t = 1, LENGTHS do
    local want = cpu:decode_step_jit(tokens:narrow(2, t, 1), cc)
    local got = model:decode_step_jit(vt:narrow(2, t, 1), vc)
    H.eq(got.device, "vulkan")
    close(got, want, "vulkan length " .. t)
  end
  H.ok(model:decode_jit_stats().compiles <= 2,
       ("%d compiles on Vulkan"):format(model:decode_jit_stats().compiles))
  local prompt = { 3, 14, 15, 9 }
  H.ok(tide.equal(model:generate(prompt, 20, { temperature = 0 }):to("cpu"),
                  cpu:generate(prompt, 20, { temperature = 0, jit = false })),
       "greedy tokens as on the CPU")
end)

H.done()
