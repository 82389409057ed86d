-- test_triu_cumsum.lua — triu/tril and cumsum from Lua: values against plain Lua loops (every
-- diagonal sign, batches, non-square, integer dtypes), gradients against their closed forms,
-- the jit against eager (bitwise: the same kernels in the same order), Vulkan against the CPU
-- (bitwise: where only selects, cumsum runs the CPU kernel through the fallback), and errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

tide.manual_seed(21)

-- Lua reference: keep element (i, j) of the last two dims when j - i >= k (triu) / <= k (tril).
local function tri_ref(t, k, upper)
  return (function()
    local function walk(v, depth)
      if type(v[1][1]) ~= "table" then
        local r = {}
        for i = 1, #v do
          r[i] = {}
          for j = 1, #v[i] do
            local keep = upper and (j - i >= k) or (not upper and j - i <= k)
            r[i][j] = keep and v[i][j] or 0
          end
        end
        return r
      end
      local r = {}
      for b = 1, #v do r[b] = walk(v[b], depth + 1) end
      return r
    end
    return walk(t, 0)
  end)()
end

H.test("triu/tril keep the right diagonals of every matrix in a batch", function()
  local x = tide.randn(2, 3, 4, 5)
  local t = x:totable()
  for k = -4, 5 do
    H.values(x:triu(k), tri_ref(t, k, true), 0, "triu " .. k)
    H.values(tide.tril(x, k), tri_ref(t, k, false), 0, "tril " .. k)
  end
  H.values(x:triu(), tri_ref(t, 0, true), 0, "triu default")
  local m = tide.arange(1, 13):reshape(4, 3) -- int64, taller than wide
  H.values(m:tril(), { { 1, 0, 0 }, { 4, 5, 0 }, { 7, 8, 9 }, { 10, 11, 12 } }, 0)
  H.eq(m:tril().dtype, "int64")
  H.values(m:t():triu(1), { { 0, 4, 7, 10 }, { 0, 0, 8, 11 }, { 0, 0, 0, 12 } }, 0, "strided")
  H.eq(tide.ones(0, 3):triu():size(), { 0, 3 })
end)

local function cumsum_ref(v, dim, shape)
  -- 2-D or 3-D nested tables; dim 1-based
  local out = H.map(v, function(a) return a end)
  local function get(t, idx) for _, i in ipairs(idx) do t = t[i] end return t end
  local function set(t, idx, val)
    for d = 1, #idx - 1 do t = t[idx[d]] end
    t[idx[#idx]] = val
  end
  local idx = {}
  local function rec(d)
    if d > #shape then
      if idx[dim] > 1 then
        local prev = { table.unpack(idx) }
        prev[dim] = prev[dim] - 1
        set(out, idx, get(out, prev) + get(v, idx))
      end
      return
    end
    for i = 1, shape[d] do idx[d] = i; rec(d + 1) end
  end
  rec(1)
  return out
end

H.test("cumsum adds in order along any dim; integers and bools give int64", function()
  local x = tide.randn(3, 4, 5):double()
  local v = x:totable()
  for dim = 1, 3 do
    H.values(x:cumsum(dim), cumsum_ref(v, dim, { 3, 4, 5 }), 1e-12, "dim " .. dim)
  end
  H.values(x:cumsum(-1), cumsum_ref(v, 3, { 3, 4, 5 }), 1e-12, "dim -1")
  local y = tide.randn(6, 7)
  H.values(y:t():cumsum(1), cumsum_ref(y:t():totable(), 1, { 7, 6 }), 1e-5, "transposed")
  local i = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "int32" })
  H.values(tide.cumsum(i, 2), { { 1, 3, 6 }, { 4, 9, 15 } }, 0)
  H.eq(tide.cumsum(i, 2).dtype, "int64")
  local b = tide.tensor({ true, false, true, true })
  H.values(b:cumsum(1), { 1, 1, 2, 3 }, 0)
  H.values(tide.tensor(2.5):cumsum(1), 2.5, 0, "0-dim")
end)

H.test("gradients: triu masks, cumsum is the reversed cumsum", function()
  local x = tide.randn(3, 4):double():requires_grad_()
  local w = tide.randn(3, 4):double()
  local l = (x:triu(1) * w):sum() + (x:tril(-1) * w * 2):sum()
  l:backward()
  local wt = w:totable()
  H.values(x.grad, H.build({ 3, 4 }, function(i, j)
    return (j - i >= 1 and wt[i][j] or 0) + (j - i <= -1 and 2 * wt[i][j] or 0)
  end), 1e-12)
  H.eq(x:triu().grad_fn, "triu")
  x.grad = nil
  local c = x:cumsum(2)
  H.eq(c.grad_fn, "cumsum")
  local l2 = (c * w):sum()
  l2:backward()
  H.values(x.grad, H.build({ 3, 4 }, function(i, j)
    local s = 0
    for k = j, 4 do s = s + wt[i][k] end
    return s
  end), 1e-12)
end)

local function bitwise(a, b, what)
  H.eq(a:size(), b:size(), what .. " shape")
  H.eq(a.dtype, b.dtype, what .. " dtype")
  H.ok(tide.equal(a, b), what .. ": not bitwise equal")
end

H.test("jit: the same bits as eager, forward and backward", function()
  local function fwd(x) return (x:triu(1) + x:tril(-2) * 3):cumsum(2):tanh() end
  local function step(x, w)
    local l = (x:cumsum(1):tril() * w):sum()
    l:backward()
    local g = x.grad
    x.grad = nil
    return l, g
  end
  local f, s = tide.jit(fwd), tide.jit(step)
  for rep = 1, 3 do
    local x = tide.randn(4, 6, 5)
    bitwise(f(x), fwd(x), "forward call " .. rep)
    local p = tide.randn(6, 5):requires_grad_()
    local w = tide.randn(6, 5)
    local l1, g1 = s(p, w)
    local l2, g2 = step(p, w)
    bitwise(l1, l2, "loss call " .. rep)
    bitwise(g1, g2, "grad call " .. rep)
  end
  H.eq(f:stats().hits >= 2, true, "later calls hit the cache")
  H.eq(f:stats().breaks, 0, "cumsum stays in the plan (an opaque library op): no break")
  H.eq(f:stats().fallbacks, 0, "no fallback to eager")
end)

local vk = tide.vulkan.available()
H.test("vulkan: the same bits as the CPU (cumsum through the logged CPU fallback)", function()
  if not vk then
    print("test_triu_cumsum.lua: no Vulkan device, skipped")
    return
  end
  local x = tide.randn(3, 5, 7)
  local xv = x:to("vulkan")
  for k = -2, 3 do
    bitwise(xv:triu(k):to("cpu"), x:triu(k), "triu " .. k)
    bitwise(xv:tril(k):to("cpu"), x:tril(k), "tril " .. k)
  end
  for dim = 1, 3 do
    bitwise(xv:cumsum(dim):to("cpu"), x:cumsum(dim), "cumsum " .. dim)
  end
  local i = tide.randint(-5, 5, { 4, 6 }, { dtype = "int32" })
  bitwise(i:to("vulkan"):cumsum(2):to("cpu"), i:cumsum(2), "int32 cumsum")
  local p = tide.randn(4, 4):to("vulkan"):requires_grad_()
  local l = (p:cumsum(1):triu() * 2):sum()
  l:backward()
  local q = p:to("cpu"):detach():requires_grad_()
  local l2 = (q:cumsum(1):triu() * 2):sum()
  l2:backward()
  bitwise(p.grad:to("cpu"), q.grad, "grad")
  local fwd = function(t) return (t:triu(1) * 2):cumsum(2):tril() end
  local jf = tide.jit(fwd)
  for _ = 1, 2 do bitwise(jf(xv):to("cpu"), fwd(x), "jit on vulkan") end
end)

H.test("topk: values and 1-based indices, best first; gradient scattered back", function()
  local x = tide.tensor({ { 3, 1, 4, 1, 5 }, { 9, 2, 6, 5, 3 } })
  local v, i = x:topk(2)
  H.values(v, { { 5, 4 }, { 9, 6 } }, 0)
  H.values(i, { { 5, 3 }, { 1, 3 } }, 0)
  v, i = tide.topk(x, 3, { dim = 2, largest = false, sorted = true })
  H.values(v, { { 1, 1, 3 }, { 2, 3, 5 } }, 0, "smallest; ties to the lower position")
  H.values(i, { { 2, 4, 1 }, { 2, 5, 4 } }, 0)
  v, i = x:topk(1, 1)
  H.values(v, { { 9, 2, 6, 5, 5 } }, 0, "dim 1")
  H.values(i, { { 2, 2, 2, 2, 1 } }, 0)
  local y = tide.randn(3, 6):double():requires_grad_()
  local w = tide.randn(3, 2):double()
  local vals, idx = y:topk(2, { dim = -1 })
  H.eq(vals.grad_fn, "topk")
  ;(vals * w):sum():backward()
  local it, wt = idx:totable(), w:totable()
  H.values(y.grad, H.build({ 3, 6 }, function(r, c)
    if it[r][1] == c then return wt[r][1] end
    if it[r][2] == c then return wt[r][2] end
    return 0
  end), 0)
  local f = tide.jit(function(t) local a, b = t:topk(3); return a * 2, b end)
  local z = tide.randn(5, 8)
  local a1, b1 = f(z)
  local a2, b2 = z:topk(3)
  H.ok(tide.equal(a1, a2 * 2) and tide.equal(b1, b2), "jit equals eager")
  if vk then
    local av, bv = z:to("vulkan"):topk(3, { largest = false })
    local ac, bc = z:topk(3, { largest = false })
    H.ok(tide.equal(av:to("cpu"), ac) and tide.equal(bv:to("cpu"), bc), "vulkan equals cpu")
  end
  H.raises(function() return x:topk(6) end, "topk", "k = 6", "0..5", "[2, 5] int64")
  H.raises(function() return x:topk(1, 3) end, "topk", "dim 3")
  H.raises(function() return x:topk(1.5) end, "topk", "k", "integer")
  H.raises(function() return x:topk(1, { largest = 1 }) end, "topk", "largest", "boolean")
  H.raises(function() return tide.tensor({ true }):topk(1) end, "topk", "bool")
end)

H.test("errors name the op and the shape", function()
  H.raises(function() return tide.triu(tide.ones(3)) end, "triu", "at least 2 dims", "[3]")
  H.raises(function() return tide.tril(tide.tensor(1)) end, "tril", "at least 2 dims")
  H.raises(function() return tide.triu(tide.ones(2, 2), 1.5) end, "triu", "diagonal", "integer")
  H.raises(function() return tide.tril(tide.ones(2, 2), "x") end, "tril", "diagonal", "integer")
  H.raises(function() return tide.cumsum(tide.ones(2, 3), 3) end, "cumsum", "dim 3", "2 dims")
  H.raises(function() return tide.cumsum(tide.ones(2, 3)) end, "cumsum", "dim")
  H.raises(function() return tide.cumsum(tide.ones(2, 3), 1.5) end, "cumsum", "integer")
end)

H.done()
