-- test_sdpa.lua — tide.nn.functional.scaled_dot_product_attention from Lua: values and
-- gradients against the composite (matmul, mask, softmax, matmul), causal, bool and float masks,
-- broadcast batch dims, scale; the jit against eager (bitwise: the same kernels on the same
-- operands), the reference device against the CPU, Vulkan against the CPU (bitwise: SDPA runs
-- the CPU kernel through the logged fallback), and the errors.
--
-- Tolerances: float64 1e-12 (the same sums in other orders, rows of <= 300 terms); float32 1e-5
-- absolute on O(1) outputs: each is accumulated in float32 by both, differing by the order of
-- E + S <= 300 additions (~300 * 2^-24 = 2e-5 relative at worst, far less in practice).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local F = tide.nn.functional

tide.manual_seed(21)

local function composite(q, k, v, o)
  o = o or {}
  local s = tide.matmul(q, k:transpose(-2, -1)) * (o.scale or 1 / math.sqrt(q:size(-1)))
  if o.is_causal then
    local future = tide.ones(q:size(-2), k:size(-2), { dtype = "bool" }):triu(1)
    s = s:masked_fill(future, -math.huge)
  end
  local m = o.attn_mask
  if m and m.dtype == "bool" then
    s = s:masked_fill(m:logical_not(), -math.huge)
  elseif m then
    s = s + m
  end
  return tide.matmul(tide.softmax(s, -1), v)
end

local function maxdiff(a, b) return (a - b):abs():max():item() end

local cases = {
  { "plain, L != S", { 2, 3, 5, 8 }, { 2, 3, 9, 8 }, { 2, 3, 9, 4 }, {} },
  { "causal, several blocks", { 1, 2, 140, 8 }, { 1, 2, 300, 8 }, { 1, 2, 300, 8 }, { is_causal = true } },
  { "causal, L > S", { 2, 7, 4 }, { 2, 3, 4 }, { 2, 3, 4 }, { is_causal = true } },
  { "bool mask, broadcast k/v", { 2, 3, 6, 4 }, { 3, 10, 4 }, { 1, 3, 10, 5 }, { mask = { 6, 10 }, bool = true } },
  { "float mask, scale", { 2, 3, 6, 4 }, { 2, 3, 10, 4 }, { 2, 3, 10, 4 }, { mask = { 2, 1, 6, 10 }, scale = 0.3 } },
}

local function make(c, dtype)
  local o = {}
  for key, val in pairs(c[5]) do o[key] = val end
  if o.mask then
    o.attn_mask = o.bool and tide.rand(o.mask):lt(0.8) or tide.randn(o.mask, { dtype = dtype })
    o.mask, o.bool = nil, nil
  end
  local q = tide.randn(c[2], { dtype = dtype }):requires_grad_()
  local k = tide.randn(c[3], { dtype = dtype }):requires_grad_()
  local v = tide.randn(c[4], { dtype = dtype }):requires_grad_()
  return q, k, v, o
end

H.test("values and gradients equal the composite's", function()
  for _, c in ipairs(cases) do
    for _, dtype in ipairs({ "float32", "float64" }) do
      local tol = dtype == "float64" and 1e-12 or 1e-5
      local q, k, v, o = make(c, dtype)
      local out = F.scaled_dot_product_attention(q, k, v, o)
      local ref = composite(q, k, v, o)
      H.eq(out:size(), ref:size(), c[1] .. " shape")
      H.ok(maxdiff(out, ref) <= tol, c[1] .. " " .. dtype .. " values: " .. maxdiff(out, ref))
      local w = tide.randn(out:size(), { dtype = dtype })
      ;(out * w):sum():backward()
      local g = { q.grad, k.grad, v.grad }
      q.grad, k.grad, v.grad = nil, nil, nil
      ;(ref * w):sum():backward()
      local r = { q.grad, k.grad, v.grad }
      for i = 1, 3 do
        H.eq(g[i]:size(), r[i]:size(), c[1] .. " grad shape " .. i)
        H.ok(maxdiff(g[i], r[i]) <= 4 * tol, ("%s %s grad %d: %g"):format(c[1], dtype, i, maxdiff(g[i], r[i])))
      end
      H.eq(out.grad_fn, "scaled_dot_product_attention", "grad_fn")
    end
  end
end)

H.test("the default scale is 1/sqrt(E); tide.scaled_dot_product_attention is the same op", function()
  local q, k, v = tide.randn(3, 4), tide.randn(5, 4), tide.randn(5, 2)
  H.ok(tide.equal(F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, { scale = 0.5 })), "scale 1/sqrt(4)")
  H.ok(tide.equal(tide.scaled_dot_product_attention(q, k, v, { is_causal = true }),
                  F.scaled_dot_product_attention(q, k, v, { is_causal = true })), "tide.*")
end)

local function bitwise(a, b, what)
  H.eq(a:size(), b:size(), what .. " shape")
  H.ok(tide.equal(a, b), what .. ": not bitwise equal")
end

H.test("jit: the same bits as eager, forward and backward; SDPA stays in the plan", function()
  local function step(q, k, v, w)
    local out = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
    local l = (out * w):sum()
    l:backward()
    local gq, gk, gv = q.grad, k.grad, v.grad
    q.grad, k.grad, v.grad = nil, nil, nil
    return out:detach(), gq, gk, gv
  end
  local s = tide.jit(step)
  for rep = 1, 3 do
    local q = tide.randn(2, 2, 70, 8):requires_grad_()
    local k = tide.randn(2, 2, 70, 8):requires_grad_()
    local v = tide.randn(2, 2, 70, 8):requires_grad_()
    local w = tide.randn(2, 2, 70, 8)
    local a = { s(q, k, v, w) }
    local b = { step(q, k, v, w) }
    for i = 1, 4 do bitwise(a[i], b[i], "call " .. rep .. " result " .. i) end
  end
  H.eq(s:stats().hits >= 2, true, "later calls hit the cache")
  H.eq(s:stats().breaks, 0, "no graph break")
  H.eq(s:stats().fallbacks, 0, "no fallback to eager")
end)

H.test("jit over 40 sequence lengths: a symbolic plan, values equal to eager", function()
  local f = function(q, k, v) return F.scaled_dot_product_attention(q, k, v, { is_causal = true }) * 2 end
  local jf = tide.jit(f)
  for L = 1, 40 do
    local q, k, v = tide.randn(2, 3, L, 8), tide.randn(2, 3, L, 8), tide.randn(2, 3, L, 8)
    bitwise(jf(q, k, v), f(q, k, v), "length " .. L)
  end
  H.ok(jf:stats().compiles <= 4, "compiles: " .. jf:stats().compiles)
  H.eq(jf:stats().fallbacks, 0, "no fallback")
end)

H.test("the reference device agrees with the CPU kernel (float64)", function()
  local q, k, v, o = make(cases[4], "float64")
  local out = F.scaled_dot_product_attention(q, k, v, o)
  out:sum():backward()
  local qr = q:detach():to("ref"):requires_grad_()
  local kr = k:detach():to("ref"):requires_grad_()
  local vr = v:detach():to("ref"):requires_grad_()
  local outr = F.scaled_dot_product_attention(qr, kr, vr, { attn_mask = o.attn_mask:to("ref") })
  outr:sum():backward()
  H.ok(maxdiff(outr:to("cpu"), out) <= 1e-12, "output")
  H.ok(maxdiff(qr.grad:to("cpu"), q.grad) <= 1e-12, "dq")
  H.ok(maxdiff(kr.grad:to("cpu"), k.grad) <= 1e-12, "dk")
  H.ok(maxdiff(vr.grad:to("cpu"), v.grad) <= 1e-12, "dv")
end)

local vk = tide.vulkan.available()
H.test("vulkan: the same bits as the CPU (through the logged CPU fallback)", function()
  if not vk then
    print("test_sdpa.lua: no Vulkan device, skipped")
    return
  end
  local q, k, v = tide.randn(2, 3, 20, 8), tide.randn(2, 3, 30, 8), tide.randn(2, 3, 30, 4)
  local m = tide.randn(20, 30)
  local want = F.scaled_dot_product_attention(q, k, v, { attn_mask = m })
  local got = F.scaled_dot_product_attention(q:to("vulkan"), k:to("vulkan"), v:to("vulkan"),
                                             { attn_mask = m:to("vulkan") })
  bitwise(got:to("cpu"), want, "forward")
  local qv = q:to("vulkan"):requires_grad_()
  local l = F.scaled_dot_product_attention(qv, k:to("vulkan"), v:to("vulkan"), { is_causal = true }):sum()
  l:backward()
  local qc = q:detach():requires_grad_()
  F.scaled_dot_product_attention(qc, k, v, { is_causal = true }):sum():backward()
  bitwise(qv.grad:to("cpu"), qc.grad, "dq")
  local jf = tide.jit(function(a, b, c) return F.scaled_dot_product_attention(a, b, c, { is_causal = true }) end)
  for _ = 1, 2 do
    bitwise(jf(q:to("vulkan"), k:to("vulkan"), v:to("vulkan")):to("cpu"),
            F.scaled_dot_product_attention(q, k, v, { is_causal = true }), "jit on vulkan")
  end
end)

H.test("nn.MultiheadAttention without weights takes the fused path and gives the same output", function()
  local nn = tide.nn
  local mha = nn.MultiheadAttention(16, 4, { batch_first = true })
  local x = tide.randn(2, 7, 16)
  local mem = tide.randn(2, 9, 16)
  local future = tide.ones(7, 7, { dtype = "bool" }):triu(1)
  local fmask = tide.randn(2 * 4, 7, 9)
  local opts = {
    { {}, x, x }, { { is_causal = true }, x, x }, { { attn_mask = future }, x, x },
    { { attn_mask = fmask }, x, mem },
  }
  for i, c in ipairs(opts) do
    local o = c[1]
    local want = mha(c[2], c[3], c[3], o)
    o.need_weights = false
    local got, w = mha(c[2], c[3], c[3], o)
    H.eq(w, nil, "no weights")
    H.ok(maxdiff(got, want) <= 1e-5, "case " .. i .. ": " .. maxdiff(got, want))
  end
  local got = mha(x, x, x, { is_causal = true, need_weights = false })
  H.raises(function() mha(x, x, x, { attn_mask = tide.ones(3, 3, { dtype = "bool" }), need_weights = false }) end,
           "MultiheadAttention: attn_mask must be [L, S] = [7, 7]")
  got:sum():backward()
  H.ok(mha.in_proj_weight.grad ~= nil, "gradients reach the projections")
end)

H.test("errors name the op, the shapes and the dtypes", function()
  local q, k, v = tide.randn(2, 5, 4), tide.randn(2, 6, 4), tide.randn(2, 6, 3)
  local op = "scaled_dot_product_attention"
  H.raises(function() F.scaled_dot_product_attention(q, tide.randn(2, 6, 3), v) end, op, "key's last dim", "[2, 6, 3] float32")
  H.raises(function() F.scaled_dot_product_attention(q, k, tide.randn(2, 7, 3)) end, op, "value's second-to-last dim")
  H.raises(function() F.scaled_dot_product_attention(q, k:double(), v) end, op, "one dtype", "float64")
  H.raises(function() F.scaled_dot_product_attention(q, k, v, { attn_mask = tide.ones(5, 6, { dtype = "bool" }), is_causal = true }) end,
           op, "cannot both be set")
  H.raises(function() F.scaled_dot_product_attention(q, k, v, { attn_mask = tide.ones(4, 6) }) end,
           op, "attn_mask [4, 6] float32 does not broadcast to [..., L, S] = [..., 5, 6]")
  H.raises(function() F.scaled_dot_product_attention(q, k, v, { dropout_p = 0.1 }) end, op, "dropout_p > 0 is not supported yet")
  H.raises(function() F.scaled_dot_product_attention(q, k, v, { casual = true }) end, op, "unknown option 'casual'")
  H.raises(function() F.scaled_dot_product_attention(q, k, v, 3) end, op, "options must be a table")
  H.raises(function() F.scaled_dot_product_attention(q, k, v, { is_causal = 1 }) end, op, "is_causal must be a boolean")
end)

H.done()
