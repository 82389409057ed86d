-- test_gpt_parity.lua — tide.models.gpt against PyTorch 1.13: the fixture in data/ (written by
-- scripts/gen_gpt_fixture.py) holds a 2-layer GPT's weights with PyTorch's names, a batch of
-- tokens and targets, and the logits, loss and every parameter's gradient PyTorch computed.
-- tide loads the weights with {from = "pytorch"} and must give the same values eagerly and
-- with the training step under tide.jit (the jit gives eager's bits: jit/README.md). Also: the
-- KV-cache decode equals the full forward, a tide checkpoint round-trips, bad configs and
-- inputs are clear errors, generation is reproducible, configure_optimizer's groups.
--
-- Tolerance. Both compute in float32 (eps = 2^-23 ~ 1.2e-7) with their own summation orders.
-- A reordered K-term dot product moves its result by up to about K * eps times the sum of the
-- terms' magnitudes; the longest reductions here are K = 4 * n_embd = 128 (mlp.c_proj, and
-- the weight gradients sum over B * T = 32 positions), so one layer costs ~1.5e-5 relative to
-- the magnitudes involved, and the errors pass through 2 blocks forward and back (a few such
-- steps, not compounding much since LayerNorm renormalizes). So each tensor must satisfy
--   max |tide - torch| <= 1e-4 * max |torch|   (relative to the tensor's own scale)
-- while a misplaced, transposed or wrongly masked tensor moves values by 1e-2 of scale or more.
-- Measured: about 1e-6 of scale.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local gpt = require "tide.models.gpt"

local DATA = (arg[0]:match("(.*/)") or "./") .. "data/"
local TOL = 1e-4
local CONFIG = { vocab_size = 64, block_size = 16, n_layer = 2, n_head = 2, n_embd = 32 }

local function max_abs(t)
  return t:abs():max():item()
end

-- max |got - want| <= tol * max |want|, with shapes equal.
local function close(got, want, what, tol)
  H.eq(got:size(), want:size(), what .. " shape")
  local scale = max_abs(want)
  local err = max_abs(got:to("float32") - want)
  H.ok(err <= (tol or TOL) * scale, ("%s: max |diff| %g > %g * max |want| (%g)"):format(
    what, err, tol or TOL, scale))
  return err / scale
end

local function fixture_model(attention)
  local cfg = {}
  for k, v in pairs(CONFIG) do cfg[k] = v end
  cfg.attention = attention
  local model = gpt.GPT(cfg)
  local sd = tide.load(DATA .. "pytorch_gpt.safetensors")
  local missing, unexpected = model:load_state_dict(sd, { from = "pytorch" })
  H.eq(#missing + #unexpected, 0, "the fixture's names are the model's PyTorch names")
  return model, sd
end

local torch = tide.load(DATA .. "pytorch_gpt_io.safetensors")
local tokens, targets = torch.tokens + 1, torch.targets + 1 -- PyTorch counts tokens from 0

-- The gradient of every parameter against the fixture's grad.<PyTorch name>.
local function check_grads(model, what)
  local n, worst = 0, 0
  local tide_names = {}
  for name in pairs(model:state_dict()) do tide_names[#tide_names + 1] = name end
  local pt = model:state_dict({ to = "pytorch" })
  for name, p in pairs(pt) do
    H.ok(p.grad ~= nil, what .. ": " .. name .. " has a gradient")
    worst = math.max(worst, close(p.grad, torch["grad." .. name], what .. " grad " .. name))
    n = n + 1
  end
  H.eq(n, #tide_names)
  H.eq(n, 2 + 12 * CONFIG.n_layer + 3, "every parameter compared")
  return worst
end

H.test("the fixture's names are nanoGPT's, h counted from 0; tide's own from 1", function()
  local model, sd = fixture_model()
  H.ok(sd["h.0.attn.c_attn.weight"] and sd["h.1.mlp.c_proj.bias"] and sd["lm_head.weight"])
  H.eq(sd["lm_head.bias"], nil, "untied head without bias")
  H.eq(sd["h.0.attn.c_attn.weight"]:size(), { 96, 32 }, "q, k, v stacked, [3C, C]")
  H.eq(sd["h.0.mlp.c_proj.weight"]:size(), { 32, 128 })
  local own = model:state_dict()
  H.ok(own["h.1.attn.c_attn.weight"] and own["h.2.ln_2.bias"] and own["h.0.ln_1.weight"] == nil)
  H.ok(tide.equal(own["h.2.mlp.c_fc.weight"], sd["h.1.mlp.c_fc.weight"]), "h.1 -> tide's h.2")
  local pt = model:state_dict({ to = "pytorch" })
  for name, t in pairs(sd) do
    H.ok(pt[name] and tide.equal(pt[name], t), name .. " written back under PyTorch's name")
  end
end)

H.test("eager logits, loss and every gradient match PyTorch", function()
  local model = fixture_model()
  local loss, logits = model:loss(tokens, targets)
  close(logits, torch.logits, "logits")
  H.eq(loss:dim(), 0)
  close(loss, torch.loss, "loss")
  loss:backward()
  local worst = check_grads(model, "eager")
  if os.getenv("TIDE_TEST_VERBOSE") then print("worst gradient error / scale", worst) end
end)

-- attention = "composite" forces matmul/mask/softmax/matmul even where tide has the fused
-- scaled_dot_product_attention (the default then): both paths must match PyTorch.
H.test("the composite attention path matches PyTorch too", function()
  local model = fixture_model("composite")
  H.eq(model.h[1].attn.sdpa, nil)
  local loss, logits = model:loss(tokens, targets)
  close(logits, torch.logits, "composite logits")
  close(loss, torch.loss, "composite loss")
  loss:backward()
  check_grads(model, "composite")
end)

-- The training step (forward, loss, backward) under tide.jit: the first call compiles, the
-- second replays the cached plan; both must give eager's bits and so PyTorch's values.
H.test("the training step under tide.jit matches eager bitwise and PyTorch", function()
  local eager = fixture_model()
  local eager_loss = eager:loss(tokens, targets)
  eager_loss:backward()
  local model = fixture_model()
  local step = tide.jit(function(x, y)
    model:zero_grad()
    local loss = model:loss(x, y)
    loss:backward()
    return loss
  end)
  for call = 1, 2 do
    local loss = step(tokens, targets)
    H.ok(tide.equal(loss, eager_loss), "call " .. call .. ": loss bitwise equal to eager")
    close(loss, torch.loss, "jit loss")
    local ref = eager:state_dict()
    for name, p in pairs(model:state_dict()) do
      H.ok(tide.equal(p.grad, ref[name].grad), ("call %d: %s grad bitwise"):format(call, name))
    end
    check_grads(model, "jit")
  end
  H.ok(step:stats().compiles >= 1 and step:stats().hits >= 1, "the second call hit the cache")
end)

-- On Vulkan (lavapipe under ctest) the same model gives PyTorch's values within the same
-- tolerance, and greedy generation with the cache on the device gives the CPU's tokens.
H.test("on Vulkan: logits, loss, gradients and generation", function()
  local ok, why = tide.vulkan.available()
  if not ok then
    print("  (Vulkan part skipped: " .. tostring(why) .. ")")
    return
  end
  local cpu = fixture_model()
  local model = fixture_model():to("vulkan")
  local loss, logits = model:loss(tokens:to("vulkan"), targets:to("vulkan"))
  H.eq(logits.device, "vulkan")
  close(logits:to("cpu"), torch.logits, "vulkan logits")
  close(loss:to("cpu"), torch.loss, "vulkan loss")
  loss:backward()
  for name, p in pairs(model:state_dict({ to = "pytorch" })) do
    close(p.grad:to("cpu"), torch["grad." .. name], "vulkan grad " .. name)
  end
  local prompt = tokens:narrow(1, 1, 1):narrow(2, 1, 4)
  local want = cpu:generate(prompt, 8, { temperature = 0 })
  H.ok(tide.equal(model:generate(prompt, 8, { temperature = 0 }):to("cpu"), want),
       "greedy tokens as on the CPU")
end)

H.test("decoding with the KV cache gives the full forward's logits at every position", function()
  local model = fixture_model():eval()
  local full = tide.no_grad(function() return model(tokens) end)
  local cache = model:new_cache(2)
  -- a 5-token prompt at once, then one token at a time
  local last = model:decode_step(tokens:narrow(2, 1, 5), cache)
  H.eq(cache.len, 5)
  close(last, full:select(2, 5), "prefill's last position")
  for t = 6, 16 do
    local step = model:decode_step(tokens:narrow(2, t, 1), cache)
    H.eq(step:size(), { 2, 64 })
    -- the same ops on fewer keys: the same values up to summation order
    close(step, full:select(2, t), "cached position " .. t)
  end
  H.raises(function() model:decode_step(tokens:narrow(2, 1, 1), cache) end,
           "block_size 16")
  -- a chunk of several tokens after cached ones: each sees the cache and its own past only
  local c2 = model:new_cache(2)
  model:decode_step(tokens:narrow(2, 1, 5), c2)
  close(model:decode_step(tokens:narrow(2, 6, 4), c2), full:select(2, 9), "chunk 6..9")
  H.eq(c2.len, 9)
  -- rewinding: position 7 again, with another token, then the original one
  local other = (tokens:narrow(2, 7, 1) % 64) + 1
  model:decode_step(other, c2, 7)
  H.eq(c2.len, 7)
  close(model:decode_step(tokens:narrow(2, 7, 1), c2, 7), full:select(2, 7), "rewound to 7")
  H.raises(function() model:decode_step(other, c2, 9) end, "pos must be an integer in 1..8")
  H.raises(function() model:decode_step(tokens:narrow(1, 1, 1):narrow(2, 1, 1),
                                        model:new_cache(2)) end, "batch 1, the cache 2")
end)

H.test("a tide checkpoint reloads and gives the same logits", function()
  local model = fixture_model():eval()
  local path = os.tmpname()
  tide.save(path, model:state_dict())
  tide.manual_seed(5)
  local fresh = gpt.GPT(CONFIG):eval()
  local x = tokens:narrow(1, 1, 1)
  H.ok(not tide.equal(fresh(x), model(x)), "a fresh model differs before loading")
  fresh:load_state_dict(tide.load(path))
  H.ok(tide.equal(fresh(tokens), model(tokens)), "same logits after reloading")
  -- PyTorch-named checkpoints written by tide load back the same way
  tide.save(path, model:state_dict({ to = "pytorch" }))
  local again = gpt.GPT(CONFIG):eval()
  again:load_state_dict(tide.load(path), { from = "pytorch" })
  H.ok(tide.equal(again(tokens), model(tokens)), "same logits via PyTorch names")
  H.raises(function() gpt.GPT(CONFIG):load_state_dict(tide.load(path)) end,
           "pass {from = \"pytorch\"}")
  os.remove(path)
end)

H.test("bad configs and inputs are clear errors", function()
  H.raises(function() gpt.GPT({ n_embd = 30, n_head = 4 }) end,
           "n_embd (30) must be divisible by n_head (4)")
  H.raises(function() gpt.GPT({ n_layer = 0 }) end, "n_layer must be a positive integer")
  H.raises(function() gpt.GPT({ n_layers = 2 }) end, "unknown config field 'n_layers'")
  H.raises(function() gpt.GPT({ dropout = 1 }) end, "dropout must be a number in [0, 1)")
  local model = fixture_model()
  H.raises(function() model(tide.ones(1, 17, { dtype = "int64" })) end,
           "17 positions", "block_size 16")
  H.raises(function() model(tide.ones(1, 4)) end, "int64 tensor [B, T]", "float32 [1, 4]")
  H.raises(function() model(tide.full({ 1, 4 }, 65, { dtype = "int64" })) end,
           "GPT: token ids must be in 1..64", "index value 65")
  H.raises(function() model(tide.zeros(1, 4, { dtype = "int64" })) end,
           "GPT: token ids must be in 1..64", "index value 0")
  H.raises(function() model:loss(tokens, targets + 64) end,
           "GPT:loss: targets must be token ids in 1..64", "out of range")
  H.raises(function() model:loss(tokens, targets:narrow(2, 1, 3)) end,
           "targets must be an int64 tensor [2, 16]")
  H.raises(function() model:generate({ 1 }, 2, { top_k = 0 }) end, "top_k must be an integer")
  H.raises(function() model:generate({ 1 }, 2, { temp = 1 }) end, "unknown option 'temp'")
  H.raises(function() model:generate({ 1 }, -1) end, "integer >= 0")
end)

H.test("generate: greedy is the argmax chain, sampling is reproducible by seed", function()
  local model = fixture_model()
  local prompt = tokens:narrow(1, 1, 1):narrow(2, 1, 3)
  local streamed = {}
  local out = model:generate(prompt, 6, { temperature = 0,
                                          on_token = function(id, row)
                                            H.eq(row, 1)
                                            streamed[#streamed + 1] = id
                                          end })
  H.eq(out:size(), { 1, 9 })
  H.eq(out:narrow(2, 4, 6):view(-1):totable(), streamed, "on_token saw every new token")
  -- greedy decoding by full forwards, no cache
  local seq = prompt
  for _ = 1, 6 do
    local logits = tide.no_grad(function() return model(seq) end)
    seq = tide.cat({ seq, logits:select(2, seq:size(2)):argmax(2, true) }, 2)
  end
  H.ok(tide.equal(out, seq), "cached greedy equals uncached greedy")
  H.ok(model.training, "generate restores training mode")
  -- a seed gives the same draws and leaves the global RNG where it was
  local before = tide.get_rng_state()
  local a = model:generate(prompt, 20, { temperature = 1.0, top_k = 8, seed = 7 })
  H.eq(tide.get_rng_state(), before, "the global RNG is untouched")
  local b = model:generate(prompt, 20, { temperature = 1.0, top_k = 8, seed = 7 })
  H.ok(tide.equal(a, b), "same seed, same tokens")
  H.ok(a:min():item() >= 1 and a:max():item() <= 64, "tokens in 1..vocab_size")
  -- top_k = 1 is greedy; with top_k = 3 every drawn token is among its prefix's 3 best
  H.ok(tide.equal(model:generate(prompt, 6, { top_k = 1, seed = 3 }), out), "top_k 1 = greedy")
  local k3 = model:generate(prompt, 10, { temperature = 1.5, top_k = 3, seed = 4 })
  local logits = tide.no_grad(function() return model(k3) end)
  for t = 4, 13 do
    local _, best = logits:select(2, t - 1):topk(3, 2)
    local tok = k3[1][t]:item()
    H.ok(best:eq(tok):any():item(), ("position %d: token %d in the top 3"):format(t, tok))
  end
  -- past block_size the cache is rebuilt and generation goes on
  local long = model:generate(prompt, 30, { temperature = 0 })
  H.eq(long:size(), { 1, 33 })
end)

-- The sampler's frequencies over n = 20000 draws from {0.1, 0.2, 0.7, 0}: each within 5
-- standard deviations (sqrt(p (1 - p) / n) <= 0.0033) of p, and the zero never drawn.
H.test("sampling draws tokens with their probabilities", function()
  tide.manual_seed(11)
  local n = 20000
  local probs = tide.tensor({ 0.1, 0.2, 0.7, 0 }):view(1, 4):expand(n, 4):contiguous()
  local ids = gpt._sample(probs)
  H.eq(ids:size(), { n, 1 })
  H.eq(ids.dtype, "int64")
  for k, p in ipairs({ 0.1, 0.2, 0.7, 0 }) do
    local freq = ids:eq(k):to("float64"):mean():item()
    H.ok(math.abs(freq - p) <= 5 * math.sqrt(p * (1 - p) / n),
         ("token %d: frequency %g, probability %g"):format(k, freq, p))
  end
end)

H.test("configure_optimizer: decay on the 2-D weights only (nanoGPT's rule)", function()
  local model = gpt.GPT(CONFIG)
  local opt = model:configure_optimizer({ lr = 1e-3, weight_decay = 0.1, betas = { 0.9, 0.95 } })
  H.eq(#opt.param_groups, 2)
  local decay, no_decay = opt.param_groups[1], opt.param_groups[2]
  H.eq(decay.weight_decay, 0.1)
  H.eq(no_decay.weight_decay, 0)
  H.eq(#decay.params, 2 + 4 * CONFIG.n_layer + 1, "wte, wpe, 4 Linear weights a block, lm_head")
  H.eq(#no_decay.params, 8 * CONFIG.n_layer + 2, "biases and LayerNorm weights")
  for _, p in ipairs(decay.params) do H.eq(p:dim(), 2) end
  for _, p in ipairs(no_decay.params) do H.eq(p:dim(), 1) end
  H.eq(decay.lr, 1e-3)
  H.eq(decay.betas, { 0.9, 0.95 })
  -- a few steps on one batch lower the loss
  local first = model:loss(tokens, targets):item()
  for _ = 1, 5 do
    opt:zero_grad()
    model:loss(tokens, targets):backward()
    opt:step()
  end
  H.ok(model:loss(tokens, targets):item() < first, "the loss falls")
end)

H.test("init: nanoGPT's std, zero biases, seeded by tide's RNG", function()
  tide.manual_seed(1)
  local a = gpt.GPT({ vocab_size = 64, block_size = 32, n_layer = 4, n_head = 2, n_embd = 64 })
  tide.manual_seed(1)
  local b = gpt.GPT({ vocab_size = 64, block_size = 32, n_layer = 4, n_head = 2, n_embd = 64 })
  local sb = b:state_dict()
  for name, t in pairs(a:state_dict()) do
    H.ok(tide.equal(t, sb[name]), name .. " reproducible")
  end
  local sd = a:state_dict()
  local function std(t) return ((t - t:mean()) ^ 2):mean():sqrt():item() end
  -- 4096 draws: the sample std is within ~3% of the true one (1/sqrt(2 * 4096) relative sd)
  H.near(std(sd["h.1.attn.c_attn.weight"]), 0.02, 0.05, "Linear weight std")
  H.near(std(sd["wte.weight"]), 0.02, 0.05, "embedding std")
  H.near(std(sd["h.1.mlp.c_proj.weight"]), 0.02 / math.sqrt(8), 0.05, "c_proj std")
  H.eq(max_abs(sd["h.3.mlp.c_fc.bias"]), 0)
  H.ok(tide.equal(sd["ln_f.weight"], tide.ones(64)))
end)

H.done()
