-- test_linear_half.lua — a float32 input times a float16/bfloat16 weight (tide.linear and
-- tide.matmul; the LINEAR_HALF primitive, ops/linear_half.c): the result is float32 and equals
-- the product with the weight cast to float32 up to the order of the sum, gradients (a finite
-- difference for x, the formula for the weight), the jit against eager (bitwise), Vulkan against
-- the CPU, and the errors.
--
-- Tolerance: both sides are float32 sums of K products of the same exact values (a half weight
-- widens to float32 exactly) in different orders; each is within K * 2^-24 * sum |x w| of the
-- exact sum, so they differ by at most 2 (K + 3) 2^-24 sum |x w| (the +3: lane folding and the
-- result's rounding). sum |x w| <= K here (|x|, |w| < 1).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local HALVES = { "float16", "bfloat16" }

local function tol(K) return 2 * (K + 3) * 2 ^ -24 * K end

local function uniform(shape, dtype)
  return (tide.rand(shape) * 2 - 1):to(dtype or "float32")
end

-- max |a - b| over all elements (float32 tensors of one shape)
local function max_diff(a, b)
  return (a:double() - b:double()):abs():max():item()
end

H.test("float32 x half weight equals the product with the weight widened", function()
  tide.manual_seed(3)
  for _, dt in ipairs(HALVES) do
    for _, mnk in ipairs({ { 1, 9, 37 }, { 3, 33, 20 }, { 17, 45, 130 }, { 40, 7, 64 } }) do
      local M, N, K = mnk[1], mnk[2], mnk[3]
      local x, w = uniform({ M, K }), uniform({ N, K }, dt)
      local y = tide.linear(x, w)
      H.eq(y.dtype, "float32", dt .. " result dtype")
      H.eq(y:size(), { M, N }, dt .. " result shape")
      local want = tide.linear(x, w:float())
      local what = ("%s [%d,%d] x [%d,%d]^T"):format(dt, M, K, N, K)
      H.ok(max_diff(y, want) <= tol(K), what .. ": linear")
      H.ok(max_diff(tide.matmul(x, w:t()), want) <= tol(K), what .. ": matmul")
    end
    -- 3-D and 1-D inputs, a bias in the weight's dtype
    local x3, w, b = uniform({ 2, 3, 24 }), uniform({ 5, 24 }, dt), uniform({ 5 }, dt)
    local y3 = tide.linear(x3, w, b)
    H.eq(y3.dtype, "float32", dt .. " with a bias")
    H.ok(max_diff(y3, tide.linear(x3, w:float(), b:float())) <= tol(24) + 2 ^ -22, dt .. " 3-D")
    local x1 = uniform({ 24 })
    H.ok(max_diff(tide.linear(x1, w), tide.linear(x1, w:float())) <= tol(24), dt .. " 1-D")
  end
end)

H.test("gradients: x by finite differences, the weight by its formula", function()
  tide.manual_seed(5)
  for _, dt in ipairs(HALVES) do
    local K, N = 19, 6
    local x, w, g = uniform({ 3, K }):requires_grad_(), uniform({ N, K }, dt):requires_grad_(),
        uniform({ 3, N })
    local function loss(xx) return (tide.linear(xx, w) * g):sum() end
    loss(x):backward()
    H.eq(x.grad.dtype, "float32", dt .. " x.grad dtype")
    H.eq(w.grad.dtype, dt, dt .. " w.grad dtype")
    -- the loss is linear in x: a central difference with step 0.5 is exact up to the float32
    -- roundings of the two losses (18 products each, |loss| < 18 * 3 * 6): 2 * 2^-24 * 324 / 1
    local xd = x:detach()
    for _, idx in ipairs({ { 1, 1 }, { 2, 7 }, { 3, 19 } }) do
      local plus, minus = xd:clone(), xd:clone()
      plus[idx] = plus[idx]:item() + 0.5
      minus[idx] = minus[idx]:item() - 0.5
      local numeric = loss(plus):item() - loss(minus):item()
      H.near(x.grad[idx]:item(), numeric, 1e-4, dt .. " dx" .. idx[1] .. "," .. idx[2])
    end
    -- w.grad = g^T x rounded once to the weight's dtype: within one ulp of it (2^-7 relative
    -- for bfloat16, 2^-10 for float16) of the float64 product
    local want = g:double():t():matmul(xd:double())
    local rel = dt == "bfloat16" and 2 ^ -7 or 2 ^ -10
    local err = (w.grad:double() - want):abs() - want:abs() * rel
    H.ok(err:max():item() <= 1e-6, dt .. " w.grad")
  end
end)

H.test("the jit equals eager bitwise", function()
  tide.manual_seed(7)
  for _, dt in ipairs(HALVES) do
    local f = tide.jit(function(x, w) return tide.linear(x, w):relu() * 2 end)
    local w = uniform({ 33, 40 }, dt)
    for _, M in ipairs({ 1, 20 }) do
      local x = uniform({ M, 40 })
      local want = tide.linear(x, w):relu() * 2
      for i = 1, 2 do H.ok(tide.equal(f(x, w), want), ("%s M=%d call %d"):format(dt, M, i)) end
    end
  end
end)

if tide.vulkan.available() then
  H.test("on Vulkan: the CPU kernel through host copies, the same values", function()
    tide.manual_seed(9)
    for _, dt in ipairs(HALVES) do
      local x, w = uniform({ 2, 30 }), uniform({ 7, 30 }, dt)
      local got = tide.linear(x:to("vulkan"), w:to("vulkan"))
      H.eq(got.device, "vulkan", dt .. " result on vulkan")
      H.ok(tide.equal(got:to("cpu"), tide.linear(x, w)), dt .. " equal to the CPU's")
    end
  end)
end

H.test("a half embedding table's rows are selected as they are (no widened copy)", function()
  tide.manual_seed(11)
  for _, dt in ipairs(HALVES) do
    local tbl = uniform({ 50, 12 }, dt)
    local rows = tide.embedding(tide.tensor({ { 3, 1, 50 } }, { dtype = "int64" }), tbl)
    H.eq(rows.dtype, dt, dt .. " rows keep the dtype")
    H.ok(tide.equal(rows[1][1], tbl[3]) and tide.equal(rows[1][2], tbl[1]) and
      tide.equal(rows[1][3], tbl[50]), dt .. " rows exact (Lua ids count from 1)")
  end
end)

H.test("errors name the op, shapes and dtypes", function()
  local x, w = uniform({ 2, 5 }), uniform({ 3, 4 }, "bfloat16")
  H.raises(function() return tide.linear(x, w) end, "linear", "[2, 5]", "[3, 4]")
  H.raises(function() return tide.matmul(x, w:t()) end, "matmul", "cannot be multiplied")
  local w5 = uniform({ 3, 5 }, "float16")
  H.raises(function() return tide.linear(x:double(), w5) end, "linear", "float64", "float16",
    "float32 input with a float16 or bfloat16 weight")
  H.raises(function() return tide.linear(x:to("bfloat16"), w5:float()) end, "linear",
    "bfloat16", "float32")
end)

H.done()
