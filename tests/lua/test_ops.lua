-- test_ops.lua — operators, elementwise ops and their in-place forms, reductions (1-based dims,
-- 1-based argmax/max indices), views and movement, checked against plain Lua loops.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local A = H.build({ 3, 4 }, function(i, j) return H.rnd() * 3 end)
local B = H.build({ 3, 4 }, function(i, j) return H.rnd() * 3 + 0.1 end)
local POS = H.map(A, function(v) return math.abs(v) + 0.5 end)

local function zip(a, b, f)
  if type(a) ~= "table" then
    return f(a, b)
  end
  local r = {}
  for i = 1, #a do
    r[i] = zip(a[i], type(b) == "table" and b[i] or b, f)
  end
  return r
end

H.test("operators with tensors and numbers on either side", function()
  local x, y = tide.tensor(A), tide.tensor(B)
  H.values(x + y, zip(A, B, function(a, b) return a + b end), 1e-6)
  H.values(x - y, zip(A, B, function(a, b) return a - b end), 1e-6)
  H.values(x * y, zip(A, B, function(a, b) return a * b end), 1e-6)
  H.values(x / y, zip(A, B, function(a, b) return a / b end), 1e-5)
  H.values(x + 2, H.map(A, function(a) return a + 2 end), 1e-6)
  H.values(2 - x, H.map(A, function(a) return 2 - a end), 1e-6)
  H.values(3 * x, H.map(A, function(a) return 3 * a end), 1e-6)
  H.values(1 / y, H.map(B, function(b) return 1 / b end), 1e-5)
  local p = tide.tensor(POS)
  H.values(p ^ 2, H.map(POS, function(a) return a ^ 2 end), 1e-5)
  H.values(2 ^ p, H.map(POS, function(a) return 2 ^ a end), 1e-5)
  H.values(p ^ p, H.map(POS, function(a) return a ^ a end), 1e-5)
  H.values(-x, H.map(A, function(a) return -a end))
  H.eq(#x, 3)
end)

H.test("broadcasting and promotion follow PyTorch", function()
  local m = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  local r = tide.tensor({ 10, 20, 30 })
  H.eq((m + r):totable(), { { 11, 22, 33 }, { 14, 25, 36 } })
  H.eq((m + 1).dtype, "int64", "int tensor + integer stays integer")
  H.eq((m + 1.5).dtype, "float32", "int tensor + float is float32")
  H.eq((m / 2).dtype, "float32", "division is true division")
  H.values(m / 2, { { 0.5, 1, 1.5 }, { 2, 2.5, 3 } })
  local i32 = tide.tensor({ 1, 2 }, { dtype = "int32" })
  H.eq((i32 + 2).dtype, "int32")
  H.eq((i32 + tide.tensor({ 1, 1 })).dtype, "int64")
  H.eq((tide.tensor({ 1.0 }, { dtype = "float64" }) + 1.5).dtype, "float64")
end)

H.test("comparisons are methods returning bool tensors", function()
  local x = tide.tensor({ 1, 2, 3 })
  H.eq(x:eq(2):totable(), { false, true, false })
  H.eq(x:ne(2):totable(), { true, false, true })
  H.eq(x:lt(2):totable(), { true, false, false })
  H.eq(x:le(2):totable(), { true, true, false })
  H.eq(x:gt(2):totable(), { false, false, true })
  H.eq(x:ge(tide.tensor({ 3, 2, 1 })):totable(), { false, true, true })
  H.eq(tide.eq(x, x).dtype, "bool")
  H.eq(x == x, true, "== is identity")
  H.eq(tide.tensor({ 1 }) == tide.tensor({ 1 }), false)
  local b = tide.tensor({ true, false, true })
  H.eq(b:logical_not():totable(), { false, true, false })
  H.eq(b:logical_and(tide.tensor({ true, true, false })):totable(), { true, false, false })
  H.eq(tide.logical_or(b, tide.tensor({ false, true, false })):totable(), { true, true, true })
end)

H.test("equal and allclose return booleans", function()
  local a = tide.tensor({ 1.0, 2.0, 3.0 })
  H.eq(tide.equal(a, a:clone()), true)
  H.eq(tide.equal(a, tide.tensor({ 1.0, 2.0 })), false)
  H.eq(tide.equal(a, a + 1e-3), false)
  H.eq(tide.allclose(a, a + 1e-7), true)
  H.eq(tide.allclose(a, a + 1e-2), false)
  H.eq(tide.allclose(a, a + 1e-2, 0, 0.1), true)
  H.eq(a:allclose(a * 1.001, 1e-2), true)
  local inf = tide.tensor({ 1 / 0, 1 })
  H.eq(tide.allclose(inf, inf:clone()), true, "equal infinities are close")
  local nan = tide.tensor({ 0 / 0 })
  H.eq(tide.allclose(nan, nan), false)
  H.eq(tide.allclose(nan, nan, 1e-5, 1e-8, true), true)
  H.eq(tide.isclose(a, a + tide.tensor({ 0, 1, 0 })):totable(), { true, false, true })
end)

H.test("unary math ops, as methods and functions, on non-contiguous input", function()
  local xt = tide.tensor(A):t() -- a transposed view
  local At = {}
  for j = 1, 4 do
    At[j] = {}
    for i = 1, 3 do
      At[j][i] = A[i][j]
    end
  end
  local pt = tide.tensor(POS):t()
  local Pt = H.map(At, function(a) return math.abs(a) + 0.5 end)
  local cases = {
    { "exp", math.exp, At, xt }, { "sin", math.sin, At, xt }, { "cos", math.cos, At, xt },
    { "tanh", function(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end, At, xt },
    { "sigmoid", function(v) return 1 / (1 + math.exp(-v)) end, At, xt },
    { "abs", math.abs, At, xt }, { "neg", function(v) return -v end, At, xt },
    { "relu", function(v) return v > 0 and v or 0 end, At, xt },
    { "floor", math.floor, At, xt }, { "ceil", math.ceil, At, xt },
    { "sign", function(v) return v > 0 and 1 or v < 0 and -1 or 0 end, At, xt },
    { "log", math.log, Pt, pt }, { "sqrt", math.sqrt, Pt, pt },
    { "rsqrt", function(v) return 1 / math.sqrt(v) end, Pt, pt },
    { "reciprocal", function(v) return 1 / v end, Pt, pt },
  }
  for _, c in ipairs(cases) do
    local name, f, ref, x = c[1], c[2], c[3], c[4]
    local want = H.map(ref, f)
    H.values(x[name](x), want, 1e-5, name .. " method")
    H.values(tide[name](x), want, 1e-5, "tide." .. name)
  end
  H.values(tide.tensor({ 0.5, 1.5, 2.5, -0.5 }):round(), { 0, 2, 2, -0 }, 0, "round half to even")
  H.eq(tide.exp(tide.tensor({ 0, 1 })).dtype, "float32", "int input gives float32")
end)

H.test("composite unary ops: silu, gelu, logsumexp", function()
  local x = tide.tensor(A)
  H.values(x:silu(), H.map(A, function(v) return v / (1 + math.exp(-v)) end), 1e-5)
  H.values(tide.logsumexp(x, 2), H.build({ 3 }, function(i)
    local s = 0
    for j = 1, 4 do s = s + math.exp(A[i][j]) end
    return math.log(s)
  end), 1e-5)
  local function gelu_tanh(v)
    local u = math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)
    return 0.5 * v * (1 + (math.exp(u) - math.exp(-u)) / (math.exp(u) + math.exp(-u)))
  end
  H.values(x:gelu("tanh"), H.map(A, gelu_tanh), 1e-5)
  H.values(tide.gelu(tide.tensor({ 0.0, 1.0, -1.0 })), { 0, 0.8413447, -0.1586553 }, 1e-5)
end)

H.test("in-place forms return self and write into views", function()
  local x = tide.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } })
  local r = x:add_(1)
  H.eq(r == x, true, "returns self")
  H.values(x, { { 2, 3 }, { 4, 5 } })
  x:mul_(2)
  H.values(x, { { 4, 6 }, { 8, 10 } })
  x:sub_(tide.tensor({ 1, 2 }))
  H.values(x, { { 3, 4 }, { 7, 8 } })
  x:div_(2)
  H.values(x, { { 1.5, 2 }, { 3.5, 4 } })
  x:pow_(2)
  H.values(x, { { 2.25, 4 }, { 12.25, 16 } })
  x:sqrt_()
  H.values(x, { { 1.5, 2 }, { 3.5, 4 } })
  x:neg_():abs_()
  H.values(x, { { 1.5, 2 }, { 3.5, 4 } })
  x:zero_()
  H.values(x, { { 0, 0 }, { 0, 0 } })
  x:fill_(7)
  H.values(x, { { 7, 7 }, { 7, 7 } })
  x:copy_(tide.tensor({ 1, 2 }))
  H.values(x, { { 1, 2 }, { 1, 2 } }, 0, "copy_ broadcasts")
  x[2]:fill_(9)
  H.values(x, { { 1, 2 }, { 9, 9 } }, 0, "fill_ through a view")
  x:t():add_(tide.tensor({ 10, 20 }))
  H.values(x, { { 11, 12 }, { 29, 29 } }, 0, "in place on a transposed view")
  local i = tide.tensor({ 1, 2 })
  i:add_(3)
  H.eq(i:totable(), { 4, 5 })
  i:clamp_(0, 4)
  H.eq(i:totable(), { 4, 4 })
end)

H.test("reductions with 1-based dims", function()
  local x = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float32" })
  H.values(x:sum(), 21)
  H.values(x:sum(1), { 5, 7, 9 })
  H.values(x:sum(2), { 6, 15 })
  H.values(x:sum(-1), { 6, 15 })
  H.values(x:sum(2, true), { { 6 }, { 15 } })
  H.values(x:sum({ 1, 2 }), 21)
  H.values(tide.sum(x, 1), { 5, 7, 9 })
  H.values(x:mean(), 3.5)
  H.values(x:mean(1), { 2.5, 3.5, 4.5 })
  H.values(x:prod(2), { 6, 120 })
  H.eq(tide.tensor({ 1, 2 }):sum().dtype, "int64")
end)

H.test("max/min return values and 1-based indices; argmax is 1-based", function()
  local x = tide.tensor({ { 3, 9, 1 }, { 7, 2, 8 } })
  H.values(x:max(), 9)
  H.values(x:min(), 1)
  local v, i = x:max(2)
  H.eq(v:totable(), { 9, 8 })
  H.eq(i:totable(), { 2, 3 })
  v, i = x:min(1)
  H.eq(v:totable(), { 3, 2, 1 })
  H.eq(i:totable(), { 1, 2, 1 })
  v, i = x:max(-1, true)
  H.eq(i:totable(), { { 2 }, { 3 } })
  H.eq(x:argmax():item(), 2, "flattened position of 9")
  H.eq(x:argmin():item(), 3)
  H.eq(x:argmax(1):totable(), { 2, 1, 2 })
  H.eq(x:argmin(2):totable(), { 3, 2 })
  H.eq(x:argmax(2, true):totable(), { { 2 }, { 3 } })
  H.eq(x:max(tide.tensor({ 5, 5, 5 })):totable(), { { 5, 9, 5 }, { 7, 5, 8 } })
  H.eq(tide.maximum(x, 4):totable(), { { 4, 9, 4 }, { 7, 4, 8 } })
  H.eq(tide.minimum(x, 4):totable(), { { 3, 4, 1 }, { 4, 2, 4 } })
end)

H.test("all, any, where, clamp", function()
  local b = tide.tensor({ { true, false }, { true, true } })
  H.eq(b:all():item(), false)
  H.eq(b:any():item(), true)
  H.eq(b:all(2):totable(), { false, true })
  H.eq(tide.tensor({ 0, 0 }):any():item(), false)
  local c = tide.tensor({ true, false, true })
  H.values(tide.where(c, tide.tensor({ 1.0, 2.0, 3.0 }), 0), { 1, 0, 3 })
  H.values(tide.where(c, 5, tide.tensor({ 1.0, 2.0, 3.0 })), { 5, 2, 5 })
  H.values(tide.tensor({ 1.0, 2.0, 3.0 }):where(c, -1), { 1, -1, 3 })
  local x = tide.tensor({ -2.0, 0.5, 3.0 })
  H.values(x:clamp(-1, 1), { -1, 0.5, 1 })
  H.values(x:clamp(nil, 1), { -2, 0.5, 1 })
  H.values(tide.clamp(x, 0), { 0, 0.5, 3 })
end)

H.test("views share memory and use 1-based dims", function()
  local x = tide.arange(24):reshape(2, 3, 4)
  H.eq(x:size(), { 2, 3, 4 })
  H.eq(x:view(6, -1):size(), { 6, 4 })
  H.eq(x:reshape({ 4, 6 }):size(), { 4, 6 })
  H.eq(tide.reshape(x, 24):size(), { 24 })
  local p = x:permute(3, 1, 2)
  H.eq(p:size(), { 4, 2, 3 })
  H.eq(p[{ 2, 1, 3 }]:item(), x[{ 1, 3, 2 }]:item())
  H.eq(x:permute({ 2, 1, 3 }):size(), { 3, 2, 4 })
  H.eq(x:transpose(1, 3):size(), { 4, 3, 2 })
  H.eq(x:transpose(-1, -2):size(), { 2, 4, 3 })
  local m = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  H.eq(m:t():totable(), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
  H.eq(tide.tensor({ 1, 2 }):t():totable(), { 1, 2 })
  H.eq(m:unsqueeze(1):size(), { 1, 2, 3 })
  H.eq(m:unsqueeze(3):size(), { 2, 3, 1 })
  H.eq(m:unsqueeze(-1):size(), { 2, 3, 1 })
  H.eq(tide.zeros(1, 3, 1):squeeze():size(), { 3 })
  H.eq(tide.zeros(1, 3, 1):squeeze(1):size(), { 3, 1 })
  H.eq(tide.zeros(1, 3, 1):squeeze(2):size(), { 1, 3, 1 })
  H.eq(tide.tensor({ { 1 }, { 2 } }):expand(2, 3):totable(), { { 1, 1, 1 }, { 2, 2, 2 } })
  H.eq(tide.tensor({ { 1 }, { 2 } }):expand(-1, 2):totable(), { { 1, 1 }, { 2, 2 } })
  H.eq(m:narrow(2, 2, 2):totable(), { { 2, 3 }, { 5, 6 } })
  H.eq(m:narrow(2, -2, 2):totable(), { { 2, 3 }, { 5, 6 } })
  H.eq(m:narrow(1, 3, 0):size(), { 0, 3 })
  H.eq(m:select(2, 3):totable(), { 3, 6 })
  H.eq(m:select(1, -1):totable(), { 4, 5, 6 })
  H.eq(x:flatten():size(), { 24 })
  H.eq(x:flatten(2):size(), { 2, 12 })
  H.eq(x:flatten(1, 2):size(), { 6, 4 })
  H.eq(x:unflatten(3, { 2, 2 }):size(), { 2, 3, 2, 2 })
  H.eq(m:view_as(tide.zeros(3, 2)):size(), { 3, 2 })
  H.eq(tide.tensor({ 1 }):expand_as(m):size(), { 2, 3 })
  -- a write through a view shows in the original
  local v = m:view(6)
  v[1] = 100
  H.eq(m[{ 1, 1 }]:item(), 100)
  m:narrow(2, 3, 1):fill_(0)
  H.eq(m:totable(), { { 100, 2, 0 }, { 4, 5, 0 } })
  H.eq(m:select(1, 2):shares_storage(m), true)
end)

H.test("cat, stack, pad, flip, split, chunk", function()
  local a = tide.tensor({ { 1, 2 }, { 3, 4 } })
  local b = tide.tensor({ { 5, 6 } })
  H.eq(tide.cat({ a, b }):totable(), { { 1, 2 }, { 3, 4 }, { 5, 6 } })
  H.eq(tide.cat({ a, a }, 2):totable(), { { 1, 2, 1, 2 }, { 3, 4, 3, 4 } })
  H.eq(tide.cat({ a, a }, -1):size(), { 2, 4 })
  H.eq(tide.stack({ a, a }):size(), { 2, 2, 2 })
  H.eq(tide.stack({ a, a }, 3):size(), { 2, 2, 2 })
  H.eq(tide.stack({ a, a }, 3):totable(), { { { 1, 1 }, { 2, 2 } }, { { 3, 3 }, { 4, 4 } } })
  H.eq(tide.pad(a, { 1, 0 }):totable(), { { 0, 1, 2 }, { 0, 3, 4 } })
  H.eq(tide.pad(a, { 0, 0, 1, 1 }, 9):totable(), { { 9, 9 }, { 1, 2 }, { 3, 4 }, { 9, 9 } })
  H.eq(a:flip(1):totable(), { { 3, 4 }, { 1, 2 } })
  H.eq(a:flip(1, 2):totable(), { { 4, 3 }, { 2, 1 } })
  H.eq(tide.flip(a, { 2 }):totable(), { { 2, 1 }, { 4, 3 } })
  local parts = tide.arange(7):split(3)
  H.eq(#parts, 3)
  H.eq(parts[3]:totable(), { 6 })
  parts = tide.arange(6):split({ 1, 5 })
  H.eq(parts[2]:totable(), { 1, 2, 3, 4, 5 })
  local ch = tide.arange(6):view(2, 3):chunk(3, 2)
  H.eq(#ch, 3)
  H.eq(ch[2]:totable(), { { 1 }, { 4 } })
end)

H.test("matmul family against a reference loop", function()
  local M, K, N = 3, 5, 4
  local Am = H.build({ M, K }, function() return H.rnd() end)
  local Bm = H.build({ K, N }, function() return H.rnd() end)
  local want = H.build({ M, N }, function(i, j)
    local s = 0
    for k = 1, K do
      s = s + Am[i][k] * Bm[k][j]
    end
    return s
  end)
  local a, b = tide.tensor(Am), tide.tensor(Bm)
  H.values(a:matmul(b), want, 1e-5)
  H.values(tide.matmul(a, b), want, 1e-5)
  H.values(tide.mm(a, b), want, 1e-5)
  H.values(a:t():contiguous():t():matmul(b), want, 1e-5, "transposed operand")
  local v = tide.tensor({ 1.0, 2.0, 3.0, 4.0, 5.0 })
  H.values(a:mv(v), H.build({ M }, function(i)
    local s = 0
    for k = 1, K do s = s + Am[i][k] * k end
    return s
  end), 1e-5)
  H.values(v:dot(v), 55)
  H.eq(tide.bmm(tide.zeros(2, 3, 5), tide.zeros(2, 5, 4)):size(), { 2, 3, 4 })
end)

-- Lua's own // and % on numbers are Python's (floor, the divisor's sign): the reference.
H.test("// and % (floor_divide, remainder) with tensors and numbers on either side", function()
  -- quarters over small integers: no quotient lands within float32's rounding of an integer
  local QA = H.build({ 3, 4 }, function(i, j) return ((i * 7 + j * 5) % 29 - 14) / 4 end)
  local QB = H.build({ 3, 4 }, function(i, j) return (((i + j) % 2) * 2 - 1) * (j + i / 4) end)
  local x, y = tide.tensor(QA), tide.tensor(QB)
  H.values(x // y, zip(QA, QB, function(a, b) return a // b end), 0)
  H.values(x % y, zip(QA, QB, function(a, b) return a % b end), 1e-6)
  H.values(x // 2, H.map(QA, function(a) return a // 2 end), 0)
  H.values(x % -1.5, H.map(QA, function(a) return a % -1.5 end), 1e-6)
  H.values(5 // y, H.map(QB, function(b) return 5 // b end), 0)
  H.values(5 % y, H.map(QB, function(b) return 5 % b end), 1e-6)
  H.values(x:floor_divide(y), zip(QA, QB, function(a, b) return a // b end), 0)
  H.values(tide.remainder(x, y), zip(QA, QB, function(a, b) return a % b end), 1e-6)
  H.values(tide.floor_divide(x, 2), H.map(QA, function(a) return a // 2 end), 0)
  local z = x:clone()
  z:floor_divide_(2)
  H.values(z, H.map(QA, function(a) return a // 2 end), 0)
  z = x:clone()
  z:remainder_(y)
  H.values(z, zip(QA, QB, function(a, b) return a % b end), 1e-6)
  -- PyTorch's float rounding, not floor(a / b): in float32 1 / 0.1 rounds to 10, but
  -- 0.1f is a little above 0.1, so 1 // 0.1 is 9 and the remainder is just under 0.1
  local one = tide.tensor({ 1.0 })
  H.values(one // 0.1, { 9 }, 0)
  H.values(one % 0.1, { 0.0999999866 }, 1e-7)
end)

H.test("// and % on integers stay integers; zero divisors", function()
  local IA, IB = {}, {}
  for a = -7, 7 do
    for _, b in ipairs({ -3, -2, -1, 1, 2, 3 }) do
      IA[#IA + 1], IB[#IB + 1] = a, b
    end
  end
  local ia, ib = tide.tensor(IA), tide.tensor(IB)
  H.eq((ia // ib).dtype, "int64")
  H.eq((ia // ib):totable(), zip(IA, IB, function(a, b) return a // b end))
  H.eq((ia % ib):totable(), zip(IA, IB, function(a, b) return a % b end))
  H.eq((ia % 3):totable(), H.map(IA, function(a) return a % 3 end))
  H.eq((7 // ib):totable(), H.map(IB, function(b) return 7 // b end))
  local i32 = tide.tensor({ -7, 7 }, { dtype = "int32" })
  H.eq((i32 // 2).dtype, "int32")
  H.eq((i32 // 2):totable(), { -4, 3 })
  H.eq((i32 % -2):totable(), { -1, -1 })
  H.eq((i32 // 2.0).dtype, "float32", "a float number promotes, as in PyTorch")
  H.values(i32 // 2.0, { -4, 3 }, 0)
  H.eq((tide.tensor({ 200, 7 }, { dtype = "uint8" }) // 3):totable(), { 66, 2 })
  -- integer division by zero gives 0 for both (tide.h; PyTorch raises, NumPy gives 0)
  H.eq((tide.tensor({ -7, 0, 7 }) // 0):totable(), { 0, 0, 0 })
  H.eq((tide.tensor({ -7, 0, 7 }) % 0):totable(), { 0, 0, 0 })
  -- floats follow IEEE: a / 0 for //, NaN for %
  H.values(tide.tensor({ -1.5, 0, 2 }) // 0, { -math.huge, 0 / 0, math.huge }, 0)
  H.values(tide.tensor({ -1.5, 0, 2 }) % 0, { 0 / 0, 0 / 0, 0 / 0 }, 0)
  -- an infinite divisor: x // inf is 0 or -1, x % inf is x or inf (Python's)
  H.values(tide.tensor({ 1.5, -1.5 }) // math.huge, { 0, -1 }, 0)
  H.values(tide.tensor({ 1.5, -1.5 }) % math.huge, { 1.5, math.huge }, 0)
end)

H.test("// and % errors name the op", function()
  local b = tide.tensor({ true, false })
  H.raises(function() return b // b end, "floor_divide", "bool")
  H.raises(function() return b % b end, "remainder", "bool")
  H.raises(function() return tide.zeros(2, 3) // tide.zeros(4) end, "floor_divide", "[2, 3]", "[4]")
  H.raises(function() return tide.zeros(2, 3) % tide.zeros(4) end, "remainder", "[2, 3]", "[4]")
  H.raises(function() return tide.floor_divide(1, 2) end, "floor_divide", "tensor")
  H.raises(function() return tide.zeros(2) % "x" end, "remainder")
end)

H.test("float to integer casts of NaN, inf and out-of-range values (docs/tensors.md)", function()
  local inf, nan = 1 / 0, 0 / 0
  local I32, I64 = -2147483648, math.mininteger
  local values = { nan, inf, -inf, 3e9, -3e9, 2 ^ 63, 2 ^ 64, 300.75, -1.5, -0.0 }
  local want = {
    int32 = { I32, I32, I32, I32, I32, I32, I32, 300, -1, 0 },
    int64 = { I64, I64, I64, 3000000000, -3000000000, I64, I64, 300, -1, 0 },
    uint8 = { 0, 0, 0, 0, 0, 0, 0, 44, 255, 0 },
    bool = { true, true, true, true, true, true, true, true, true, false },
  }
  local devices = { "cpu" }
  if tide.vulkan and tide.vulkan.available() then devices[2] = "vulkan" end
  for _, device in ipairs(devices) do
    for _, src in ipairs({ "float32", "float64" }) do
      local x = tide.tensor(values, { dtype = src, device = device })
      for dst, expected in pairs(want) do
        local what = ("%s %s -> %s"):format(device, src, dst)
        H.eq(x:to(dst):to("cpu"):totable(), expected, what)
        -- the jit's cast (libtcc C or a shader) gives the same values
        local f = tide.jit(function(t) return t:to(dst) end)
        H.eq(f(x):to("cpu"):totable(), expected, what .. " (jit)")
      end
    end
  end
end)

H.done()
