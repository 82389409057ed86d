-- test_nn_transformer.lua — nn.TransformerEncoderLayer and nn.TransformerEncoder: PyTorch's
-- parameter names; outputs against the layer written out here from tensor primitives (matmul,
-- softmax, a hand-made layer norm); outputs and gradients against PyTorch 1.13's, from fixtures
-- written by scripts/make_torch_fixtures_transformer.py (post-norm relu [S, N, E], pre-norm
-- gelu batch_first, a 2-layer encoder with a final norm; masks and key padding); gradients
-- against central differences (float64); jit against eager; Vulkan against the CPU; errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"

local DATA = (arg[0]:match("(.*/)") or "./") .. "data/"
local E, NH, FF = 8, 2, 16

tide.manual_seed(21)

-- Every parameter its own random values (norm weights near 1), so a misplaced tensor shows.
local function randomize(m)
  tide.no_grad(function()
    for name, p in m:named_parameters() do
      if name:match("norm%d?%.weight$") then
        p:uniform_(0.5, 1.5)
      else
        p:normal_(0, 0.3)
      end
    end
  end)
  return m
end

-- ---- the reference: the layer from primitives ------------------------------------------------

local function layer_norm(x, w, b, eps)
  local mu = x:mean(-1, true)
  local d = x - mu
  local var = (d * d):mean(-1, true)
  return d / (var + eps):sqrt() * w + b
end

-- x [N, S, E]; mask [S, S] bool or nil; pad [N, S] bool or nil (true: masked)
local function attention_ref(l, x, mask, pad)
  local a = l.self_attn
  local N, S = x:size(1), x:size(2)
  local W, B = a.in_proj_weight, a.in_proj_bias
  local function heads(i)
    local y = tide.matmul(x, W[{ { (i - 1) * E + 1, i * E } }]:t()) + B[{ { (i - 1) * E + 1,
      i * E } }]
    return y:reshape(N, S, NH, E // NH):permute(1, 3, 2, 4)
  end
  local q, k, v = heads(1), heads(2), heads(3)
  local scores = tide.matmul(q, k:transpose(3, 4)) / math.sqrt(E // NH)
  local neg = tide.zeros(N, 1, S, S, { dtype = x.dtype })
  if mask then neg = neg:masked_fill(mask:view(1, 1, S, S):expand(N, 1, S, S), -math.huge) end
  if pad then neg = neg:masked_fill(pad:view(N, 1, 1, S):expand(N, 1, S, S), -math.huge) end
  local o = tide.matmul(tide.softmax(scores + neg, 4), v):permute(1, 3, 2, 4):reshape(N, S, E)
  return tide.matmul(o, a.out_proj.weight:t()) + a.out_proj.bias
end

local function layer_ref(l, src, mask, pad)
  local x = l.batch_first and src or src:transpose(1, 2)
  local act = l.activation_name == "gelu" and tide.gelu or tide.relu
  local function ff(y)
    local h = act(tide.matmul(y, l.linear1.weight:t()) + l.linear1.bias)
    return tide.matmul(h, l.linear2.weight:t()) + l.linear2.bias
  end
  local n1 = function(y) return layer_norm(y, l.norm1.weight, l.norm1.bias, l.norm1.eps) end
  local n2 = function(y) return layer_norm(y, l.norm2.weight, l.norm2.bias, l.norm2.eps) end
  if l.norm_first then
    x = x + attention_ref(l, n1(x), mask, pad)
    x = x + ff(n2(x))
  else
    x = n1(x + attention_ref(l, x, mask, pad))
    x = n2(x + ff(x))
  end
  return l.batch_first and x or x:transpose(1, 2)
end

-- float64 compositions of the same ops in another order: sums of <= 16 terms of size ~10 at
-- u = 1.1e-16 stay below 1e-13; 1e-12 leaves room for softmax and the norms' divisions.
local TOL64 = 1e-12

local function masks(S, N)
  local causal = tide.ones(S, S):triu(1):gt(0)
  local pad = tide.zeros(N, S):gt(0)
  pad[{ 2, S }] = true
  pad[{ 3, { S - 1, S } }] = true
  return causal, pad
end

H.test("parameter names are PyTorch's; options reach the children", function()
  local l = nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF, dropout = 0.2,
                                                layer_norm_eps = 1e-6, bias = false })
  local names = {}
  for name, p in l:named_parameters() do
    names[#names + 1] = name .. ":" .. table.concat(p:size(), "x")
  end
  H.eq(names, { "self_attn.in_proj_weight:24x8", "self_attn.out_proj.weight:8x8",
                "linear1.weight:16x8", "linear2.weight:8x16", "norm1.weight:8",
                "norm2.weight:8" })
  H.eq(l.self_attn.dropout, 0.2)
  H.eq(l.dropout.p, 0.2)
  H.eq(l.norm1.eps, 1e-6)
  local d = nn.TransformerEncoderLayer(E, NH)
  H.eq(d.linear1.weight:size(), { 2048, E }, "dim_feedforward defaults to 2048")
  H.eq(d.dropout.p, 0.1)
  H.eq(#d:parameters(), 12)
end)

H.test("the layer equals the one written out from primitives (float64, every variant)",
  function()
    local S, N = 5, 3
    local causal, pad = masks(S, N)
    for _, nf in ipairs({ false, true }) do
      for _, bf in ipairs({ false, true }) do
        for _, act in ipairs({ "relu", "gelu" }) do
          local l = randomize(nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF,
            dropout = 0, norm_first = nf, batch_first = bf, activation = act,
            dtype = "float64" }))
          local x = tide.randn(bf and N or S, bf and S or N, E, { dtype = "float64" })
          local what = ("norm_first=%s batch_first=%s %s"):format(tostring(nf), tostring(bf),
            act)
          H.values(l(x), layer_ref(l, x):totable(), TOL64, what)
          H.values(l(x, { src_mask = causal, src_key_padding_mask = pad }),
            layer_ref(l, x, causal, pad):totable(), TOL64, what .. " masked")
          H.values(l(x, { is_causal = true }), layer_ref(l, x, causal):totable(), TOL64,
            what .. " is_causal")
        end
      end
    end
    -- a function as the activation
    local l = randomize(nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF, dropout = 0,
      activation = tide.gelu, dtype = "float64" }))
    l.activation_name = "gelu" -- what the reference reads
    local x = tide.randn(S, N, E, { dtype = "float64" })
    H.values(l(x), layer_ref(l, x):totable(), TOL64, "activation = tide.gelu")
    -- unbatched [S, E]
    local x1 = x[{ {}, 1 }]
    H.values(l(x1), layer_ref(l, x1:unsqueeze(2)):squeeze(2):totable(), TOL64, "unbatched")
  end)

-- ---- PyTorch ------------------------------------------------------------------------------

local function load_fixture(name)
  local all = tide.load(DATA .. "pytorch_transformer_" .. name .. ".safetensors")
  local sd, io, grads = {}, {}, {}
  for k, v in pairs(all) do
    if k:match("^io%.") then
      io[k:sub(4)] = v
    elseif k:match("^grad%.") then
      grads[k:sub(6)] = v
    else
      sd[k] = v
    end
  end
  return sd, io, grads
end

-- float64 against float64: the same math in another order; 1e-10 is far above rounding
-- (~1e-14 here) and far below any mistake.
local function check_pytorch(model, name)
  local sd, io, grads = load_fixture(name)
  local missing, unexpected = model:load_state_dict(sd, { from = "pytorch" })
  H.eq(#missing + #unexpected, 0, name .. ": every key loads")
  model:eval()
  local opts = model.num_layers and
    { mask = io.src_mask, src_key_padding_mask = io.src_key_padding_mask } or
    { src_mask = io.src_mask, src_key_padding_mask = io.src_key_padding_mask }
  H.values(model(io.input), io.output:totable(), 1e-10, name .. " output")
  local x = io.input:clone():requires_grad_()
  local y = model(x, opts)
  H.values(y, io.output_masked:totable(), 1e-10, name .. " masked output")
  local loss = (y * io.g):sum()
  loss:backward()
  H.values(x.grad, io.grad_input:totable(), 1e-10, name .. " input gradient")
  local sd_names = model:state_dict({ to = "pytorch" })
  local n = 0
  for pname, g in pairs(grads) do
    local p = sd_names[pname]
    H.ok(p ~= nil and p.grad ~= nil, name .. ": " .. pname .. " has a gradient")
    H.values(p.grad, g:totable(), 1e-10, name .. " grad " .. pname)
    n = n + 1
  end
  H.eq(n, #model:parameters(), name .. ": a gradient for every parameter")
  -- float32: the same model cast; the outputs are layer-normed (size ~1), float32 rounding in
  -- sums of <= 16 terms and softmax stays below 1e-5 relative; 1e-4 absolute bounds it.
  model:float()
  H.values(model(io.input:float(), opts), io.output_masked:totable(), 1e-4, name .. " float32")
end

H.test("post-norm relu [S, N, E]: PyTorch's outputs and gradients", function()
  check_pytorch(nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF, dtype = "float64" }),
    "post")
end)

H.test("pre-norm gelu batch_first: PyTorch's outputs and gradients", function()
  check_pytorch(nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF, activation = "gelu",
    norm_first = true, batch_first = true, dtype = "float64" }), "pre")
end)

H.test("TransformerEncoder (2 layers, final norm): PyTorch's outputs and gradients", function()
  local layer = nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF, activation = "gelu",
    norm_first = true, batch_first = true, dtype = "float64" })
  local enc = nn.TransformerEncoder(layer, 2, { norm = nn.LayerNorm(E, { dtype = "float64" }) })
  check_pytorch(enc, "encoder")
end)

H.test("TransformerEncoder copies the layer: equal at the start, separate parameters", function()
  local layer = randomize(nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF,
    dropout = 0 }))
  local enc = nn.TransformerEncoder(layer, 3)
  H.eq(#enc.layers, 3)
  H.eq(#enc:parameters(), 36)
  for i = 1, 3 do
    H.ok(tide.equal(enc.layers[i].linear1.weight, layer.linear1.weight), "layer " .. i)
    H.ok(enc.layers[i].linear1.weight ~= layer.linear1.weight, "a copy, not the same tensor")
  end
  tide.no_grad(function() enc.layers[1].linear1.weight:fill_(0) end)
  H.ok(not tide.equal(enc.layers[2].linear1.weight, enc.layers[1].linear1.weight), "separate")
  local x = tide.randn(4, 2, E)
  local want = x
  for i = 1, 3 do want = enc.layers[i](want) end
  H.values(enc(x), want:totable(), 0, "the layers in order")
end)

-- ---- gradients, jit, Vulkan ------------------------------------------------------------------

H.test("gradients match central differences (float64, tiny layer, masks)", function()
  local l = randomize(nn.TransformerEncoderLayer(4, 2, { dim_feedforward = 6, dropout = 0,
    activation = "gelu", dtype = "float64" }))
  local S, N = 3, 2
  local causal = tide.ones(S, S):triu(1):gt(0)
  local x = tide.randn(S, N, 4, { dtype = "float64" }):requires_grad_()
  local g = tide.randn(S, N, 4, { dtype = "float64" })
  local function loss() return (l(x, { src_mask = causal }) * g):sum() end
  loss():backward()
  -- central differences, h = 1e-6: truncation ~h^2 * |f'''| ~1e-11, rounding ~1e-16 / h ~1e-10
  local h, tol = 1e-6, 1e-7
  local function numeric(t, idx)
    local v = t[idx]:item()
    local fp, fm
    tide.no_grad(function()
      t[idx] = v + h
      fp = loss():item()
      t[idx] = v - h
      fm = loss():item()
      t[idx] = v
    end)
    return (fp - fm) / (2 * h)
  end
  local worst = 0
  for s = 1, S do
    for n = 1, N do
      for e = 1, 4 do
        local idx = { s, n, e }
        worst = math.max(worst, math.abs(numeric(x, idx) - x.grad[idx]:item()))
      end
    end
  end
  for name, p in l:named_parameters() do
    H.ok(p.grad ~= nil, name .. " has a gradient")
    local flat = p:view(-1)
    local gflat = p.grad and p.grad:view(-1)
    for i = 1, gflat and math.min(5, flat:numel()) or 0 do
      local d = math.abs(numeric(flat, { i }) - gflat[i]:item())
      H.ok(d < tol, ("%s[%d]: |numeric - autograd| = %.2e"):format(name, i, d))
    end
  end
  print(("gradcheck: input worst |numeric - autograd| = %.2e"):format(worst))
  H.ok(worst < tol, ("input: worst |numeric - autograd| = %.2e"):format(worst))
end)

H.test("tide.jit: the traced layer gives eager's values and gradients", function()
  local l = randomize(nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF, dropout = 0,
    norm_first = true, activation = "gelu" }))
  local x = tide.randn(5, 3, E)
  local causal = tide.ones(5, 5):triu(1):gt(0)
  local f = tide.jit(function(a) return l(a, { src_mask = causal }) end)
  local want = l(x, { src_mask = causal })
  -- CPU jit against CPU eager is bitwise (jit/README.md); a fused group may still reorder a
  -- reduction's terms in float32: a few ulps of values ~1, so 1e-5
  for _ = 1, 2 do H.values(f(x), want:totable(), 1e-5, "jit forward") end
  local step = tide.jit(function(a)
    l:zero_grad()
    local loss = l(a, { src_mask = causal }):pow(2):sum()
    loss:backward()
    return loss
  end)
  l:zero_grad()
  local eager = l(x, { src_mask = causal }):pow(2):sum()
  eager:backward()
  local want_g = l.linear1.weight.grad:clone()
  for _ = 1, 2 do
    local got = step(x)
    H.near(got:item(), eager:item(), 1e-4 * math.abs(eager:item()), "jit loss")
    H.values(l.linear1.weight.grad, want_g:totable(), 1e-4, "jit gradient")
  end
end)

H.test("train mode: dropout is random, eval mode is deterministic", function()
  local l = nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF, dropout = 0.5 })
  local x = tide.randn(4, 2, E)
  H.ok(not tide.equal(l(x), l(x)), "two training passes differ")
  l:eval()
  H.ok(tide.equal(l(x), l(x)), "eval passes agree")
end)

local vk = tide.vulkan.available()
H.test("vulkan: the same values as the CPU", function()
  if not vk then
    print("test_nn_transformer.lua: no Vulkan device, skipped")
    return
  end
  local l = randomize(nn.TransformerEncoderLayer(E, NH, { dim_feedforward = FF, dropout = 0,
    norm_first = true, activation = "gelu", batch_first = true }))
  local x = tide.randn(3, 5, E)
  local _, pad = masks(5, 3)
  local want = l(x, { src_key_padding_mask = pad, is_causal = true })
  l:to("vulkan")
  local got = l(x:to("vulkan"), { src_key_padding_mask = pad:to("vulkan"), is_causal = true })
  H.eq(got.device, "vulkan")
  -- float32 on both: sums of <= 16 terms in another order and the device's exp/erf ulps, on
  -- layer-normed values ~1: 1e-4 bounds it (as the float32 PyTorch comparison above)
  H.values(got:to("cpu"), want:totable(), 1e-4, "vulkan forward")
end)

H.test("errors name the module, the shapes and the options", function()
  H.raises(function() return nn.TransformerEncoderLayer(6, 4) end, "TransformerEncoderLayer",
    "divisible")
  H.raises(function() return nn.TransformerEncoderLayer(8, 2, { activation = "tanh" }) end,
    "TransformerEncoderLayer", "activation", "\"tanh\"")
  H.raises(function() return nn.TransformerEncoderLayer(8, 2, { dim_ff = 3 }) end,
    "unknown option 'dim_ff'")
  H.raises(function() return nn.TransformerEncoderLayer(8, 2, { layer_norm_eps = 0 }) end,
    "layer_norm_eps")
  local l = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 4 })
  H.raises(function() return l(tide.randn(5, 3, 7)) end, "TransformerEncoderLayer", "src",
    "[S, N, E]", "[5, 3, 7]")
  H.raises(function() return l(tide.randn(5, 3, 8), { mask = 1 }) end, "unknown option 'mask'")
  H.raises(function() return l(tide.randn(5, 3, 8), { src_mask = tide.zeros(4, 4) }) end,
    "attn_mask", "[5, 5]")
  H.raises(function() return nn.TransformerEncoder(nn.Linear(2, 2), 2) end,
    "TransformerEncoder", "TransformerEncoderLayer")
  H.raises(function() return nn.TransformerEncoder(l, 0) end, "TransformerEncoder", "num_layers")
end)

H.done()
