-- test_nn_attention.lua — nn.MultiheadAttention against multi-head attention written out in Lua
-- loops (float64): batch_first and PyTorch's [L, N, E] layout, unbatched input, bool and float
-- attn_mask, key_padding_mask, is_causal, head-averaged weights; parameter names, gradients,
-- jit against eager, the ref and Vulkan devices against the cpu, and errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"

local E, NH, N, L, S = 4, 2, 2, 3, 3
local D = E // NH

local function rnd_table(shape)
  return H.build(shape, function() return H.rnd() end)
end

local function make()
  local m = nn.MultiheadAttention(E, NH, { batch_first = true, dtype = "float64" })
  tide.no_grad(function()
    -- nonzero biases, so that the reference checks where they enter
    m.in_proj_bias:copy_(tide.tensor(rnd_table({ 3 * E }), { dtype = "float64" }))
    m.out_proj.bias:copy_(tide.tensor(rnd_table({ E }), { dtype = "float64" }))
  end)
  return m
end

-- out[n][l], weights[n][l][s] (averaged over heads) for batch-first tables; mask(n, h, l, s)
-- returns true where the score is masked, or a number to add.
local function mha_ref(m, Q, K, V, mask)
  local W, B = m.in_proj_weight:totable(), m.in_proj_bias:totable()
  local Wo, Bo = m.out_proj.weight:totable(), m.out_proj.bias:totable()
  local function proj(x, i, r)
    local s = B[(i - 1) * E + r]
    for c = 1, E do s = s + W[(i - 1) * E + r][c] * x[c] end
    return s
  end
  local out, avg = {}, {}
  for n = 1, #Q do
    out[n], avg[n] = {}, {}
    for l = 1, #Q[n] do
      local concat = {}
      avg[n][l] = {}
      for s = 1, #K[n] do avg[n][l][s] = 0 end
      for h = 1, NH do
        local scores, mx = {}, -math.huge
        for s = 1, #K[n] do
          local dot = 0
          for j = 1, D do
            local r = (h - 1) * D + j
            dot = dot + proj(Q[n][l], 1, r) * proj(K[n][s], 2, r)
          end
          local sc = dot / math.sqrt(D)
          local mk = mask and mask(n, h, l, s)
          if mk == true then sc = -math.huge elseif type(mk) == "number" then sc = sc + mk end
          scores[s] = sc
          mx = math.max(mx, sc)
        end
        local z = 0
        for s = 1, #scores do scores[s] = math.exp(scores[s] - mx); z = z + scores[s] end
        for j = 1, D do
          local r, acc = (h - 1) * D + j, 0
          for s = 1, #scores do acc = acc + scores[s] / z * proj(V[n][s], 3, r) end
          concat[r] = acc
        end
        for s = 1, #scores do avg[n][l][s] = avg[n][l][s] + scores[s] / z / NH end
      end
      out[n][l] = {}
      for r = 1, E do
        local acc = Bo[r]
        for c = 1, E do acc = acc + Wo[r][c] * concat[c] end
        out[n][l][r] = acc
      end
    end
  end
  return out, avg
end

local function t64(x) return tide.tensor(x, { dtype = "float64" }) end

-- float64 throughout; a few dozen products and an exp per value: rounding ~1e-15
local TOL = 1e-12

H.test("MultiheadAttention self- and cross-attention against Lua loops", function()
  local m = make()
  local Q, K, V = rnd_table({ N, L, E }), rnd_table({ N, S, E }), rnd_table({ N, S, E })
  local out, w = m(t64(Q), t64(K), t64(V))
  local ro, rw = mha_ref(m, Q, K, V)
  H.values(out, ro, TOL)
  H.values(w, rw, TOL)
  local o2, w2 = m(t64(Q), t64(Q), t64(Q), { need_weights = false })
  H.values(o2, (mha_ref(m, Q, Q, Q)), TOL)
  H.eq(w2, nil)
  local _, wh = m(t64(Q), t64(K), t64(V), { average_attn_weights = false })
  H.eq(wh:size(), { N, NH, L, S })
  H.values(wh:mean(2), rw, TOL)
  -- unbatched [L, E]
  local uo, uw = m(t64(Q[1]), t64(K[1]), t64(V[1]))
  H.values(uo, ro[1], TOL)
  H.values(uw, rw[1], TOL)
  -- PyTorch's default layout [L, N, E]
  local m2 = nn.MultiheadAttention(E, NH, { dtype = "float64" })
  m2:load_state_dict(m:state_dict())
  local o3, w3 = m2(t64(Q):transpose(1, 2), t64(K):transpose(1, 2), t64(V):transpose(1, 2))
  H.values(o3:transpose(1, 2), ro, TOL)
  H.values(w3, rw, TOL)
end)

H.test("MultiheadAttention masks: bool and float attn_mask, key_padding_mask, is_causal", function()
  local m = make()
  local Q = rnd_table({ N, L, E })
  local q = t64(Q)
  local causal = function(_, _, l, s) return s > l end
  local ro = mha_ref(m, Q, Q, Q, causal)
  H.values((m(q, q, q, { is_causal = true })), ro, TOL)
  local bmask = tide.tensor({ { false, true, true }, { false, false, true },
                              { false, false, false } })
  H.values((m(q, q, q, { attn_mask = bmask })), ro, TOL)
  local F = rnd_table({ L, S })
  H.values((m(q, q, q, { attn_mask = t64(F) })),
           (mha_ref(m, Q, Q, Q, function(_, _, l, s) return F[l][s] end)), TOL)
  -- a per-(batch, head) mask [N * H, L, S]: head h of batch n is row (n - 1) * H + h
  local F3 = rnd_table({ N * NH, L, S })
  H.values((m(q, q, q, { attn_mask = t64(F3) })),
           (mha_ref(m, Q, Q, Q, function(n, h, l, s) return F3[(n - 1) * NH + h][l][s] end)), TOL)
  local kp = tide.tensor({ { false, false, true }, { false, true, true } })
  local KP = { { false, false, true }, { false, true, true } }
  local o, w = m(q, q, q, { key_padding_mask = kp })
  local ro2, rw2 = mha_ref(m, Q, Q, Q, function(n, _, _, s) return KP[n][s] end)
  H.values(o, ro2, TOL)
  H.values(w, rw2, TOL)
  H.eq(w[{ 2, 1, 2 }]:item(), 0.0)
end)

H.test("MultiheadAttention parameters, gradients and jit", function()
  local m = nn.MultiheadAttention(8, 4)
  local names = {}
  for name, p in m:named_parameters() do
    names[#names + 1] = name .. ":" .. table.concat(p:size(), "x")
  end
  H.eq(names, { "in_proj_weight:24x8", "in_proj_bias:24", "out_proj.weight:8x8",
                "out_proj.bias:8" })
  H.eq(m.in_proj_bias:abs():max():item(), 0.0)
  H.eq(tostring(m):match("^[^\n]*"),
       "MultiheadAttention(embed_dim=8, num_heads=4, dropout=0, batch_first=false")
  local nb = nn.MultiheadAttention(8, 2, { bias = false })
  H.eq(#nb:parameters(), 2)
  -- every parameter gets a gradient
  local x = tide.randn(5, 2, 8)
  local out = m(x, x, x)
  out:sum():backward()
  for name, p in m:named_parameters() do
    H.ok(p.grad ~= nil and p.grad:abs():sum():item() > 0, name .. " has a gradient")
  end
  -- the traced forward gives the eager values (float32; fusion may reorder: a few ulps)
  local f = tide.jit(function(a) return (m(a, a, a, { is_causal = true })) end)
  local want = m(x, x, x, { is_causal = true })
  for _ = 1, 2 do
    H.values(f(x), want:totable(), 1e-5)
  end
end)

H.test("MultiheadAttention errors name the module and the shapes", function()
  H.raises(function() return nn.MultiheadAttention(6, 4) end, "MultiheadAttention", "divisible")
  H.raises(function() return nn.MultiheadAttention(8, 2, { dropout = 1 }) end,
           "MultiheadAttention", "dropout")
  H.raises(function() return nn.MultiheadAttention(8, 2, { kdim = 3 }) end, "unknown option 'kdim'")
  local m = nn.MultiheadAttention(4, 2, { batch_first = true })
  local x = tide.randn(2, 3, 4)
  H.raises(function() return m(tide.randn(2, 3, 5), x, x) end,
           "MultiheadAttention", "query", "[2, 3, 5]")
  H.raises(function() return m(x, tide.randn(3, 3, 4), x) end, "MultiheadAttention", "disagree")
  H.raises(function() return m(x, x, x, { attn_mask = tide.zeros(3, 4) }) end,
           "MultiheadAttention", "attn_mask", "[3, 4]")
  H.raises(function() return m(x, x, x, { key_padding_mask = tide.zeros(3, 3) }) end,
           "MultiheadAttention", "key_padding_mask", "[2, 3]")
  H.raises(function() return m(x, x, x, { causal = true }) end, "unknown option 'causal'")
  H.raises(function() return m(x, nil, x) end, "MultiheadAttention", "key must be a tensor")
end)


-- The reference device always; Vulkan (lavapipe in CI) when there is one.
local other_devices = { "ref" }
if tide.vulkan.available() then other_devices[#other_devices + 1] = "vulkan" end
for _, dev in ipairs(other_devices) do
  H.test("MultiheadAttention, RMSNorm, clip_grad_norm_ on " .. dev .. " match the cpu", function()
    local function run(device)
      tide.manual_seed(1)
      local m = nn.MultiheadAttention(8, 2, { batch_first = true })
      local r = nn.RMSNorm(8)
      tide.manual_seed(2)
      local x = tide.randn(2, 5, 8)
      m:to(device); r:to(device)
      x = x:to(device)
      local o = r(m(x, x, x, { is_causal = true }))
      o:sum():backward()
      local total = nn.utils.clip_grad_norm_(m:parameters(), 0.5)
      return o:to("cpu"), total:to("cpu"), m.in_proj_weight.grad:to("cpu")
    end
    local o1, t1, g1 = run("cpu")
    local o2, t2, g2 = run(dev)
    -- float32 with a different summation order per device: a few ulps of values ~1..100
    H.values(o2, o1:totable(), 1e-5, "output")
    H.near(t2:item(), t1:item(), 1e-5, "total norm")
    H.values(g2, g1:totable(), 1e-4, "clipped gradient")
  end)
end

H.done()
