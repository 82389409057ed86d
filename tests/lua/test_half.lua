-- test_half.lua — float16 and bfloat16 from Lua: names, promotion, finfo/iinfo, every
-- elementwise op and reduction against a float64 reference rounded once, gradients, the jit
-- against eager (bitwise), and the errors.
--
-- Tolerance of an op on half-precision tensors: the kernel computes in float32 from the exact
-- half inputs and rounds once to the half dtype. The float32 result is within a few float32
-- ulps (2^-23 relative each) of the exact value, far below half an ulp of float16 (2^-11) or
-- bfloat16 (2^-8); it can still fall on the other side of a rounding boundary than the float64
-- value does, so the result is the float64 reference rounded once, or its neighbour: at most 1
-- ulp of the half dtype apart. (The reference itself is rounded through float32, as every cast
-- to a half dtype is; that can add the same one-ulp tie.)
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"

local HALVES = { "float16", "bfloat16" }
local MIN_EXP = { float16 = -14, bfloat16 = -126 }
local FRACTION_BITS = { float16 = 10, bfloat16 = 7 }

-- One ulp of the half dtype at magnitude v (subnormal spacing below the smallest normal).
local function ulp(dtype, v)
  v = math.abs(v)
  local e = v > 0 and math.floor(math.log(v, 2)) or MIN_EXP[dtype]
  if e < MIN_EXP[dtype] then e = MIN_EXP[dtype] end
  return 2.0 ^ (e - FRACTION_BITS[dtype])
end

-- got (a half tensor) within one ulp of want (a half tensor), element by element.
local function within_ulp(got, want, what)
  H.eq(got.dtype, want.dtype, what .. ": dtype")
  local g, w = H.flatten(got:totable()), H.flatten(want:totable())
  H.eq(#g, #w, what .. ": numel")
  for i = 1, #w do
    local a, b = g[i], w[i]
    local same = (a ~= a and b ~= b) or a == b
    if not same then
      local finite = math.abs(a) < math.huge and math.abs(b) < math.huge
      if not finite or math.abs(a - b) > ulp(got.dtype, math.max(math.abs(a), math.abs(b))) then
        error(("%s: element %d: expected %.8g (or one ulp from it), got %.8g"):format(
          what, i, b, a), 2)
      end
    end
  end
end

-- Inputs exactly representable in the half dtype: n values in [lo, hi) rounded to it.
local function inputs(dtype, n, lo, hi)
  local t = {}
  for i = 1, n do t[i] = lo + (hi - lo) * (H.rnd() + 1) / 2 end
  return tide.tensor(t, { dtype = dtype })
end

H.test("names, aliases, methods and sizes", function()
  H.eq(tide.float16, "float16", "tide.float16")
  H.eq(tide.half, "float16", "tide.half")
  H.eq(tide.bfloat16, "bfloat16", "tide.bfloat16")
  H.eq(tide.zeros(2, { dtype = "half" }).dtype, "float16", "half alias")
  H.eq(tide.ones(2):half().dtype, "float16", ":half()")
  H.eq(tide.ones(2):bfloat16().dtype, "bfloat16", ":bfloat16()")
  H.ok(tide.ones(2):half():is_floating_point(), "float16 is floating")
  H.eq(tide.ones(3):bfloat16():element_size(), 2, "2 bytes an element")
end)

H.test("values: rounding, overflow, printing", function()
  local x = tide.tensor({ 1, 0.1, 65504, 65519, 65520, -1e-8, 2049 }, { dtype = "float16" })
  H.eq(x:totable(), { 1, 0.0999755859375, 65504, 65504, math.huge, -0.0, 2048 }, "float16")
  local b = tide.tensor({ 1, 0.1, 257, 3e38, 3.5e38 }, { dtype = "bfloat16" })
  H.eq(b:totable(), { 1, 0.10009765625, 256, 226 / 128 * 2 ^ 127, math.huge }, "bfloat16")
  H.ok(tostring(x):find("dtype=tide.float16", 1, true), "printed dtype")
  local nan = tide.tensor({ 0 / 0 }, { dtype = "bfloat16" })
  H.eq(nan:ne(nan):item(), true, "NaN kept")
end)

H.test("promotion follows PyTorch", function()
  local h, b = tide.ones(2):half(), tide.ones(2):bfloat16()
  H.eq((h + tide.ones(2)).dtype, "float32", "float16 + float32")
  H.eq((h + b).dtype, "float32", "float16 + bfloat16")
  H.eq((h + tide.ones(2, { dtype = "float64" })).dtype, "float64", "float16 + float64")
  H.eq((h + tide.ones(2, { dtype = "int64" })).dtype, "float16", "float16 + int64")
  H.eq((b + 2.5).dtype, "bfloat16", "bfloat16 + a number")
  H.eq((h + tide.tensor(2.5)).dtype, "float16", "float16 + a 0-dim float32")
  H.eq((tide.ones(2, { dtype = "bool" }) + b).dtype, "bfloat16", "bool + bfloat16")
  H.eq(h:lt(2).dtype, "bool", "comparison")
end)

H.test("finfo and iinfo", function()
  local f = tide.finfo("float16")
  H.eq({ f.bits, f.eps, f.max, f.min, f.tiny, f.resolution, f.dtype },
       { 16, 2 ^ -10, 65504, -65504, 2 ^ -14, 1e-3, "float16" }, "float16")
  local bf = tide.finfo(tide.ones(1):bfloat16())
  H.eq({ bf.bits, bf.eps, bf.max, bf.tiny }, { 16, 2 ^ -7, (2 - 2 ^ -7) * 2 ^ 127, 2 ^ -126 },
       "bfloat16")
  H.eq(tide.finfo().eps, 2 ^ -23, "default float32")
  H.eq(tide.finfo("float64").tiny, 2 ^ -1022, "float64")
  local i = tide.iinfo("int32")
  H.eq({ i.bits, i.min, i.max }, { 32, -2147483648, 2147483647 }, "int32")
  H.eq(tide.iinfo("uint8").max, 255, "uint8")
end)

-- unary ops and the input range each is tested on
local UNARY = {
  { "neg", -4, 4 }, { "abs", -4, 4 }, { "exp", -4, 4 }, { "log", 0.01, 8 }, { "sqrt", 0, 8 },
  { "rsqrt", 0.01, 8 }, { "sin", -4, 4 }, { "cos", -4, 4 }, { "tanh", -4, 4 },
  { "sigmoid", -6, 6 }, { "relu", -4, 4 }, { "floor", -4, 4 }, { "ceil", -4, 4 },
  { "round", -4, 4 }, { "sign", -4, 4 }, { "reciprocal", 0.05, 4 }, { "erf", -3, 3 },
  { "log1p", -0.9, 4 }, { "expm1", -4, 4 }, { "log2", 0.01, 8 }, { "tan", -1.4, 1.4 },
  { "asin", -1, 1 }, { "acos", -1, 1 }, { "atan", -8, 8 }, { "sinh", -4, 4 },
  { "cosh", -4, 4 }, { "trunc", -4, 4 }, { "frac", -4, 4 }, { "square", -4, 4 },
}

H.test("unary ops against float64 rounded once", function()
  for _, dt in ipairs(HALVES) do
    for _, u in ipairs(UNARY) do
      local x = inputs(dt, 200, u[2], u[3])
      local got = tide[u[1]](x)
      within_ulp(got, tide[u[1]](x:double()):to(dt), dt .. " " .. u[1])
    end
  end
end)

local BINARY = {
  { "add", -4, 4, -4, 4 }, { "sub", -4, 4, -4, 4 }, { "mul", -4, 4, -4, 4 },
  { "div", -4, 4, 0.25, 4 }, { "pow", 0.1, 4, -2, 2 }, { "maximum", -4, 4, -4, 4 },
  { "minimum", -4, 4, -4, 4 }, { "floor_divide", -8, 8, 0.5, 3 },
  { "remainder", -8, 8, 0.5, 3 }, { "fmod", -8, 8, 0.5, 3 }, { "atan2", -4, 4, -4, 4 },
}

H.test("binary ops against float64 rounded once, comparisons exact", function()
  for _, dt in ipairs(HALVES) do
    for _, op in ipairs(BINARY) do
      local a, b = inputs(dt, 200, op[2], op[3]), inputs(dt, 200, op[4], op[5])
      within_ulp(tide[op[1]](a, b), tide[op[1]](a:double(), b:double()):to(dt), dt .. " " .. op[1])
    end
    local a, b = inputs(dt, 100, -2, 2), inputs(dt, 100, -2, 2)
    for _, cmp in ipairs({ "eq", "ne", "lt", "le", "gt", "ge" }) do
      H.ok(tide.equal(tide[cmp](a, b), tide[cmp](a:double(), b:double())), dt .. " " .. cmp)
    end
    H.ok(tide.equal(tide.where(a:lt(b), a, b), tide.minimum(a, b)), dt .. " where")
  end
end)

H.test("reductions accumulate in float32 and round once", function()
  for _, dt in ipairs(HALVES) do
    -- positive inputs: float32 accumulation of 64 terms errs by 64 * 2^-24 of the sum at most
    local x = inputs(dt, 256, 0.5, 1):reshape({ 4, 64 })
    local xd = x:double()
    within_ulp(x:sum(2), xd:sum(2):to(dt), dt .. " sum")
    within_ulp(x:mean(2), xd:mean(2):to(dt), dt .. " mean")
    within_ulp(x:narrow(2, 1, 8):prod(2), xd:narrow(2, 1, 8):prod(2):to(dt), dt .. " prod")
    H.ok(tide.equal((x:max(2)), (xd:max(2)):to(dt)), dt .. " max exact")
    H.ok(tide.equal(x:argmax(2), xd:argmax(2)), dt .. " argmax")
    within_ulp(x:cumsum(2), xd:cumsum(2):to(dt), dt .. " cumsum")
    within_ulp(x:matmul(x:t()), xd:matmul(xd:t()):to(dt), dt .. " matmul")
  end
end)

H.test("gradients flow in the half dtype", function()
  for _, dt in ipairs(HALVES) do
    local x = inputs(dt, 50, -2, 2):requires_grad_()
    x:tanh():mul(3):sum():backward()
    H.eq(x.grad.dtype, dt, dt .. " grad dtype")
    -- d/dx 3 tanh(x) = 3 (1 - tanh^2): tanh rounded to the half dtype, then the backward's own
    -- ops each round too; three roundings of relative size 2^-(fraction bits + 1) apiece
    local want = (1 - x:detach():double():tanh() ^ 2) * 3
    H.values(x.grad:double(), want:totable(), 4 * 2 ^ -FRACTION_BITS[dt], dt .. " grad")
  end
end)

H.test("the jit equals eager bitwise on half chains", function()
  for _, dt in ipairs(HALVES) do
    local f = tide.jit(function(a, b) return ((a * b + 1):sigmoid() - a:float()):to(dt):relu() end)
    local a, b = inputs(dt, 300, -3, 3), inputs(dt, 300, -3, 3)
    local want = ((a * b + 1):sigmoid() - a:float()):to(dt):relu()
    for i = 1, 3 do
      H.ok(tide.equal(f(a, b), want), dt .. " call " .. i)
    end
    local g = tide.jit(function(x) return (x:exp() * 2):sum(2) end)
    local x = inputs(dt, 64, -1, 1):reshape({ 8, 8 })
    for i = 1, 2 do H.ok(tide.equal(g(x), (x:exp() * 2):sum(2)), dt .. " row sum " .. i) end
  end
end)

H.test("random numbers in the half dtypes", function()
  for _, dt in ipairs(HALVES) do
    tide.manual_seed(7)
    local u = tide.rand({ 100000 }, { dtype = dt })
    H.eq(u.dtype, dt, dt .. " rand dtype")
    -- rounding float32 draws to nearest would give 1.0 about once in 4096 (float16)
    H.ok(u:max():item() < 1 and u:min():item() >= 0, dt .. " rand in [0, 1)")
    -- the mean of 1e5 uniforms: standard error 0.29 / sqrt(1e5) = 9e-4; 5 sigma
    H.near(u:double():mean():item(), 0.5, 0.0046 / 0.5, dt .. " rand mean")
    local n = tide.randn({ 100000 }, { dtype = dt }):double()
    H.near(((n - n:mean()) ^ 2):mean():sqrt():item(), 1, 0.02, dt .. " randn std")
    local k = tide.randint(-5, 5, { 1000 }, { dtype = dt })
    H.ok(tide.equal(k, k:round()) and k:min():item() >= -5 and k:max():item() < 5, dt .. " randint")
  end
  H.raises(function() return tide.randint(0, 3000, { 2 }, { dtype = "float16" }) end,
           "randint", "float16")
end)

H.test("a model in bfloat16 and float16 trains", function()
  local nn, optim = require "tide.nn", require "tide.optim"
  for _, dt in ipairs(HALVES) do
    tide.manual_seed(3)
    local model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    H.eq(model == model:to(dt) and model[1].weight.dtype, dt, dt .. " parameters")
    -- Adam's default eps 1e-8 is below float16's smallest subnormal (6e-8) and rounds to 0, so a
    -- gradient that underflows gives 0/0, as in PyTorch: pure float16 training takes a larger eps
    local opt = optim.Adam(model:parameters(), { lr = 1e-2, eps = 1e-4 })
    local x, y = tide.randn({ 32, 8 }):to(dt), tide.randint(0, 4, { 32 }) + 1
    local first, last
    for step = 1, 30 do
      opt:zero_grad()
      local loss = nn.functional.cross_entropy(model(x), y)
      H.eq(loss.dtype, dt, dt .. " loss dtype")
      loss:backward()
      opt:step()
      first = first or loss:item()
      last = loss:item()
    end
    -- 30 Adam steps on 32 fixed points: the loss falls well below its start (ln 4 = 1.39)
    H.ok(last < 0.7 * first, ("%s loss %.3f -> %.3f"):format(dt, first, last))
  end
end)

H.test("norms, softmax and losses compute in float32 and round once", function()
  local F = require "tide.nn.functional"
  for _, dt in ipairs(HALVES) do
    local x = inputs(dt, 96, -3, 3):reshape({ 8, 12 })
    local w, b = inputs(dt, 12, 0.5, 1.5), inputs(dt, 12, -1, 1)
    local xf, wf, bf = x:float(), w:float(), b:float()
    local function same(got, want, what)
      H.eq(got.dtype, dt, dt .. " " .. what .. " dtype")
      H.ok(tide.equal(got, want:to(dt)), dt .. " " .. what .. ": the float32 result rounded once")
    end
    same(tide.softmax(x, 2), tide.softmax(xf, 2), "softmax")
    same(tide.log_softmax(x, 2), tide.log_softmax(xf, 2), "log_softmax")
    same(tide.logsumexp(x, 2), tide.logsumexp(xf, 2), "logsumexp")
    same(tide.layer_norm(x, { 12 }, w, b), tide.layer_norm(xf, { 12 }, wf, bf), "layer_norm")
    same(F.rms_norm(x, { 12 }, w), F.rms_norm(xf, { 12 }, wf, 2 ^ -FRACTION_BITS[dt]), "rms_norm")
    local y = tide.randint(1, 13, { 8 })
    same(F.cross_entropy(x, y), F.cross_entropy(xf, y), "cross_entropy")
    same(F.mse_loss(x, x:flip(1)), F.mse_loss(xf, xf:flip(1)), "mse_loss")

    local bn = nn.BatchNorm1d(12):to(dt)
    local got = bn(x)
    H.eq(got.dtype, dt, dt .. " batch_norm dtype")
    H.eq(bn.running_mean.dtype, dt, dt .. " running stats keep their dtype")
    H.ok(bn.running_mean:abs():sum():item() > 0, dt .. " running stats updated")
  end
end)

H.test("errors", function()
  H.raises(function() return tide.zeros(2, { dtype = "float8" }) end, "unknown dtype", "float8")
  H.raises(function() return tide.finfo("int32") end, "finfo", "int32", "iinfo")
  H.raises(function() return tide.iinfo("float16") end, "iinfo", "float16", "finfo")
  H.raises(function() return tide.ones(2):half():add_(tide.ones(2)):logical_not():neg() end,
           "neg", "bool")
end)

H.test("Module:half, :bfloat16 and :to(\"half\") convert floats and keep integer buffers", function()
  -- a dtype name must not be taken for a device (which would convert every tensor)
  for _, conv in ipairs({ function(m) return m:half() end, function(m) return m:bfloat16() end,
                          function(m) return m:to("half") end }) do
    local m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    conv(m)
    local bn = m:children()[2]
    H.ok(m:children()[1].weight.dtype == "float16" or m:children()[1].weight.dtype == "bfloat16",
      "a weight converted")
    H.eq(bn.running_mean.dtype, m:children()[1].weight.dtype, "a float buffer converted")
    H.eq(bn.num_batches_tracked.dtype, "int64", "an integer buffer kept")
  end
end)

H.done()
