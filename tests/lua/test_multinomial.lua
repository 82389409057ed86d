-- test_multinomial.lua — tide.multinomial / x:multinomial from Lua: 1-based int64 indices (as
-- topk's), the law of the draws with and without replacement against a chi-square bound,
-- distinct draws without replacement, determinism per seed, tide.jit (fresh draws per call,
-- each equal to eager's under the same seed), Vulkan against the CPU, no gradient, and errors.
--
-- The bound (as tests/test_multinomial.c): for N draws over m categories of positive
-- probability, X2 = sum (count - N p)^2 / (N p) is about chi-square with m - 1 degrees of freedom
-- (mean m - 1, sd sqrt(2 (m - 1))); we allow mean + 6 sd, 17.7 for m - 1 = 3 (tail ~5e-4; the
-- seed is fixed, so a pass is stable).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local weights = { 0.5, 0, 1.5, 3, 10 } -- need not sum to 1; the 0 is never drawn
local total = 15
local N = 20000

local function chi2(counts, p, n)
  local x2 = 0
  for j = 1, #p do
    if p[j] > 0 then x2 = x2 + (counts[j] - n * p[j]) ^ 2 / (n * p[j]) end
  end
  return x2
end
local bound = 3 + 6 * math.sqrt(6)

local function probs()
  local p = {}
  for j, w in ipairs(weights) do p[j] = w / total end
  return p
end

local function count(list, k)
  local c = {}
  for j = 1, k do c[j] = 0 end
  for _, v in ipairs(list) do c[v] = c[v] + 1 end
  return c
end

H.test("with replacement: 1-based int64 indices following the weights", function()
  tide.manual_seed(31)
  for _, dtype in ipairs({ "float32", "float64" }) do
    local w = tide.tensor(weights, { dtype = dtype })
    local idx = tide.multinomial(w, N, true)
    H.eq(idx.dtype, "int64")
    H.eq(idx:size(), { N })
    local c = count(idx:totable(), #weights)
    H.eq(c[2], 0, "the zero weight is never drawn")
    local x2 = chi2(c, probs(), N)
    H.ok(x2 < bound, ("%s chi-square %.2f < %.2f"):format(dtype, x2, bound))
  end
  -- 2-D: one row per distribution; the method form and the options table
  local m = tide.tensor({ { 0, 0, 1.0 }, { 1, 0, 0 } }):multinomial(3, { replacement = true })
  H.values(m, { { 3, 3, 3 }, { 1, 1, 1 } }, 0)
end)

H.test("without replacement: distinct draws, first and second following their laws", function()
  tide.manual_seed(32)
  local w = tide.tensor(weights):view(1, 5):expand(N, 5)
  local idx = tide.multinomial(w, 4)
  H.eq(idx:size(), { N, 4 })
  local rows = idx:totable()
  local first, second, ok = {}, {}, true
  for r = 1, N do
    local s = rows[r]
    for a = 1, 4 do
      ok = ok and s[a] ~= 2
      for b = 1, a - 1 do ok = ok and s[a] ~= s[b] end
    end
    first[r], second[r] = s[1], s[2]
  end
  H.ok(ok, "distinct, never the zero weight")
  local p = probs()
  local q = {} -- P(second = j) = sum over i ~= j of p_i p_j / (1 - p_i)
  for j = 1, 5 do
    q[j] = 0
    for i = 1, 5 do
      if i ~= j then q[j] = q[j] + p[i] * p[j] / (1 - p[i]) end
    end
  end
  local x1, x2 = chi2(count(first, 5), p, N), chi2(count(second, 5), q, N)
  H.ok(x1 < bound and x2 < bound, ("chi-square %.2f, %.2f < %.2f"):format(x1, x2, bound))
  -- all categories: a permutation of the positive ones
  local perm = tide.multinomial(tide.tensor({ 1, 2, 3 }, { dtype = "float64" }), 3):totable()
  table.sort(perm)
  H.eq(perm, { 1, 2, 3 })
end)

H.test("a seed gives the same draws; the next call draws anew", function()
  local w = tide.tensor(weights)
  tide.manual_seed(5)
  local a, b = tide.multinomial(w, 64, true), tide.multinomial(w, 64, true)
  tide.manual_seed(5)
  local a2 = tide.multinomial(w, 64, true)
  H.ok(tide.equal(a, a2), "same seed, same draws")
  H.ok(not tide.equal(a, b), "the next call differs (agreeing by chance: < 1e-10)")
end)

H.test("tide.jit: each call draws anew and equals eager under the same seed", function()
  local w = tide.tensor({ { 1, 2, 3, 4 }, { 4, 0, 2, 1 } }, { dtype = "float32" })
  for _, replacement in ipairs({ false, true }) do
    local n = replacement and 32 or 3
    local f = tide.jit(function(x) return tide.multinomial(x, n, replacement) end)
    tide.manual_seed(3)
    local j1, j2 = f(w), f(w)
    tide.manual_seed(3)
    local e1, e2 = tide.multinomial(w, n, replacement), tide.multinomial(w, n, replacement)
    H.ok(tide.equal(j1, e1) and tide.equal(j2, e2), "jit equals eager, replacement=" ..
      tostring(replacement))
    if replacement then H.ok(not tide.equal(j1, j2), "two jitted calls differ") end
  end
end)

H.test("no gradient: the indices do not require grad", function()
  local w = tide.tensor({ 1, 2, 3 }, { dtype = "float64" }):requires_grad_()
  local idx = tide.multinomial(w, 2)
  H.eq(idx.requires_grad, false)
end)

local vk = tide.vulkan.available()
H.test("vulkan: the same draws as the CPU (random and topk through the logged fallback)",
  function()
    if not vk then
      print("test_multinomial.lua: no Vulkan device, skipped")
      return
    end
    local w = tide.tensor({ { 0.1, 0, 0.3, 0.6, 2 }, { 1, 1, 1, 1, 1 } })
    for _, replacement in ipairs({ false, true }) do
      local n = replacement and 50 or 4
      tide.manual_seed(7)
      local c = tide.multinomial(w, n, replacement)
      tide.manual_seed(7)
      local v = tide.multinomial(w:to("vulkan"), n, replacement)
      H.eq(v.device, "vulkan")
      -- the keys' log and division may round differently on the device; a flipped pair needs
      -- two keys within a few ulps (below 1e-5 for these 250 keys)
      H.ok(tide.equal(v:to("cpu"), c), "vulkan equals cpu, replacement=" .. tostring(replacement))
    end
  end)

H.test("errors name the op, the shape and the dtype", function()
  local f = tide.multinomial
  H.raises(function() return f(tide.tensor({ 1.0, -1 }), 1) end, "multinomial", "probs [2] float32",
    "2nd weight", "is -1")
  H.raises(function() return f(tide.tensor({ 1, 0 / 0 }), 1) end, "is nan")
  H.raises(function() return f(tide.tensor({ math.huge, 1 }), 1) end, "is inf")
  H.raises(function() return f(tide.tensor({ { 1.0, 1 }, { 0, 0 } }), 1) end, "probs [2, 2]",
    "2nd row sums to 0")
  H.raises(function() return f(tide.tensor({ 1.0, 0 }), 3) end, "cannot draw 3 samples from 2")
  H.raises(function() return f(tide.tensor({ 1.0, 0 }), 2) end, "1 positive weights")
  H.raises(function() return f(tide.tensor({ 1, 2 }, { dtype = "int64" }), 1) end,
    "probs [2] int64", "floating")
  H.raises(function() return f(tide.ones(2, 2, 2), 1) end, "probs [2, 2, 2]", "1-D or 2-D")
  H.raises(function() return f(tide.ones(2), 0) end, "num_samples must be positive")
  H.raises(function() return f(tide.ones(2), 1.5) end, "multinomial", "num_samples")
  H.raises(function() return f(tide.ones(2), 1, { replace = true }) end, "unknown option replace")
  H.raises(function() return f(tide.ones(2), 1, "yes") end, "replacement")
end)

H.done()
