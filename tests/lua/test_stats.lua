-- test_stats.lua — reductions, scans, sorting and searching from Lua (ops/stats.c, scan.c,
-- sort.c, search.c): known answers (PyTorch's), gradients against central differences in
-- float64, the jit against eager (bitwise: the same kernels in the same order; the ops whose
-- size depends on the data break the trace and stay right on new data), Vulkan against the CPU
-- (SORT and the scans run the CPU kernels through the logged fallback), and errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

tide.manual_seed(24)
local nan, inf = 0 / 0, math.huge

H.test("var, std, var_mean, std_mean: correction, dims, keepdim", function()
  local x = tide.tensor({ { 1., 2, 3, 4 }, { 2, 4, 6, 8 } })
  H.near(x:var():item(), 37.5 / 7, 1e-6) -- all eight: mean 3.75, squares 37.5, unbiased
  H.values(x:var(2), { 5 / 3, 20 / 3 }, 1e-6)
  H.values(x:var(2, false), { 1.25, 5 }, 1e-6, "unbiased = false")
  H.values(tide.var(x, 2, { correction = 0, keepdim = true }), { { 1.25 }, { 5 } }, 1e-6)
  H.values(x:std(1), { math.sqrt(0.5), math.sqrt(2), math.sqrt(4.5), math.sqrt(8) }, 1e-6)
  local v, m = tide.var_mean(x, { 1, 2 })
  H.near(v:item(), 37.5 / 7, 1e-6)
  H.near(m:item(), 3.75, 1e-6)
  local s, m2 = x:std_mean(2, { keepdim = true })
  H.eq(s:size(), { 2, 1 })
  H.values(m2, { { 2.5 }, { 5 } }, 1e-6)
  local v1 = tide.tensor({ 3. }):var():item()
  H.ok(v1 ~= v1, "one element, correction 1: 0/0 = NaN")
end)

H.test("amax, amin, nansum, nanmean, count_nonzero", function()
  local x = tide.tensor({ { 1., 5, nan }, { 3, 2, 0 } })
  H.values(tide.amax(x, 2), { nan, 3 }, 0)
  H.values(tide.amin(tide.tensor({ { 1, 5 }, { 3, 2 } }), { 1, 2 }), 1, 0)
  H.values(x:nansum(2), { 6, 5 }, 0)
  H.values(x:nanmean(2), { 3, 5 / 3 }, 1e-6)
  H.values(x:nansum(), 11, 0)
  H.values(tide.count_nonzero(x), 5, 0)
  H.values(tide.count_nonzero(x, 1), { 2, 2, 1 }, 0)
  H.eq(tide.count_nonzero(x).dtype, "int64")
end)

H.test("norm: p = 2, 1, inf, -inf, 0, 3, 'fro', dims", function()
  local x = tide.tensor({ { 3., -4 }, { 0, 12 } })
  H.near(x:norm():item(), 13, 1e-6)
  H.near(tide.norm(x, "fro"):item(), 13, 1e-6)
  H.near(tide.norm(x, 1):item(), 19, 1e-6)
  H.near(tide.norm(x, inf):item(), 12, 0)
  H.near(tide.norm(x, -inf):item(), 0, 0)
  H.near(tide.norm(x, 0):item(), 3, 0)
  H.near(tide.norm(x, 3):item(), (27 + 64 + 1728) ^ (1 / 3), 1e-4)
  H.values(tide.norm(x, 2, 2), { 5, 12 }, 1e-6)
  H.values(tide.norm(x, { p = 1, dim = 1, keepdim = true }), { { 3, 16 } }, 1e-6)
end)

H.test("cumprod, logcumsumexp, cummax, cummin", function()
  H.values(tide.cumprod(tide.tensor({ 1., 2, 0, 4 }), 1), { 1, 2, 0, 0 }, 0)
  H.values(tide.tensor({ 2, 3, 4 }):cumprod(1), { 2, 6, 24 }, 0)
  H.eq(tide.tensor({ 2, 3 }, { dtype = "int32" }):cumprod(1).dtype, "int64")
  local l = tide.logcumsumexp(tide.tensor({ 0., 1, 1000, -inf }), 1)
  H.values(l, { 0, math.log(1 + math.exp(1)), 1000, 1000 }, 1e-5, "no overflow")
  H.values(tide.logcumsumexp(tide.tensor({ -inf, -inf, 0 }), 1), { -inf, -inf, 0 }, 0)
  local v, i = tide.cummax(tide.tensor({ 1., 3, 2, 3, nan, 5 }), 1)
  H.values(v, { 1, 3, 3, 3, nan, nan }, 0)
  H.values(i, { 1, 2, 2, 4, 5, 5 }, 0, "ties to the later position; NaN wins once met")
  v, i = tide.tensor({ { 4, 2, 3, 1 } }):cummin(2)
  H.values(v, { { 4, 2, 2, 1 } }, 0)
  H.values(i, { { 1, 2, 2, 4 } }, 0)
end)

H.test("sort and argsort: stable, descending, NaN as PyTorch, every dtype", function()
  local x = tide.tensor({ 2., nan, 1, 2, -inf, nan, 0 })
  local v, i = x:sort()
  H.values(v, { -inf, 0, 1, 2, 2, nan, nan }, 0)
  H.values(i, { 5, 7, 3, 1, 4, 2, 6 }, 0, "stable, NaNs last")
  v, i = x:sort({ descending = true })
  H.values(v, { nan, nan, 2, 2, 1, 0, -inf }, 0)
  H.values(i, { 2, 6, 1, 4, 3, 7, 5 }, 0, "NaNs first, ties in order")
  H.values(tide.argsort(tide.tensor({ { 3, 1, 2 }, { 1, 1, 0 } }), 2), { { 2, 3, 1 }, { 3, 1, 2 } }, 0)
  H.values(tide.tensor({ { 3, 1 }, { 1, 2 } }):sort(1), { { 1, 1 }, { 3, 2 } }, 0)
  for _, dt in ipairs({ "float64", "int32", "int64", "uint8", "bool" }) do
    local t = tide.tensor({ 3, 0, 1, 0 }):to(dt)
    local sv, si = t:sort(1, true)
    H.values(sv:to("int64"), dt == "bool" and { 1, 1, 0, 0 } or { 3, 1, 0, 0 }, 0, dt)
    H.values(si, { 1, 3, 2, 4 }, 0, dt)
  end
  for _, dt in ipairs({ "float16", "bfloat16" }) do
    local h = tide.tensor({ 3.5, nan, 1, -2, 1 }):to(dt)
    local hv, hi = h:sort(1, true)
    H.eq(hv.dtype, dt)
    H.values(hv:float(), { nan, 3.5, 1, 1, -2 }, 0, dt)
    H.values(hi, { 2, 1, 3, 5, 4 }, 0, dt)
  end
  local big = tide.randn(3, 1000)
  local s = big:sort(2)
  H.ok(tide.equal(s, big:topk(1000, { largest = false })), "equals topk of everything")
end)

H.test("median (lower, first NaN) and quantile (every interpolation)", function()
  H.near(tide.tensor({ 4., 1, 3, 2 }):median():item(), 2, 0)
  local none = tide.zeros(0):median():item()
  H.ok(none ~= none, "the median of nothing is NaN")
  local v, i = tide.median(tide.tensor({ { 1., 5, 3 }, { 4, nan, 6 } }), 2)
  H.values(v, { 3, nan }, 0)
  H.values(i, { 3, 2 }, 0)
  v, i = tide.median(tide.tensor({ { 1., 5 }, { 3, 0 } }), 1, true)
  H.values(v, { { 1, 0 } }, 0)
  H.values(i, { { 1, 2 } }, 0)
  local x = tide.tensor({ 1., 2, 3, 4 })
  H.near(tide.quantile(x, 0.5):item(), 2.5, 1e-6)
  H.values(tide.quantile(x, tide.tensor({ 0, 0.25, 1 })), { 1, 1.75, 4 }, 1e-6)
  local want = { linear = 1.9, lower = 1, higher = 2, nearest = 2, midpoint = 1.5 }
  for mode, w in pairs(want) do
    H.near(x:quantile(0.3, { interpolation = mode }):item(), w, 1e-6, mode)
  end
  local m = tide.tensor({ { 1., 2, 3 }, { 6, 5, 4 } })
  H.values(tide.quantile(m, 0.5, 2), { 2, 5 }, 1e-6)
  local q = tide.quantile(m, tide.tensor({ 0.5, 1 }), 2, true)
  H.eq(q:size(), { 2, 2, 1 })
  H.values(q, { { { 2 }, { 5 } }, { { 3 }, { 6 } } }, 1e-6)
  local qn = tide.quantile(tide.tensor({ 1., nan }), 0.2):item()
  H.ok(qn ~= qn, "a NaN gives NaN")
end)

H.test("nonzero, unique, searchsorted, bincount, histc", function()
  local x = tide.tensor({ { 0, 3, 0 }, { 1, 0, 2 } })
  H.values(tide.nonzero(x), { { 1, 2 }, { 2, 1 }, { 2, 3 } }, 0)
  local t = tide.nonzero(x, { as_tuple = true })
  H.values(t[1], { 1, 2, 2 }, 0)
  H.values(t[2], { 2, 1, 3 }, 0)
  H.eq(tide.nonzero(tide.zeros(2, 2)):size(), { 0, 2 })
  local u, inv, cnt = tide.unique(tide.tensor({ { 3, 1 }, { 3, 2 } }), { return_inverse = true, return_counts = true })
  H.values(u, { 1, 2, 3 }, 0)
  H.values(inv, { { 3, 1 }, { 3, 2 } }, 0)
  H.values(cnt, { 1, 1, 2 }, 0)
  H.values(tide.unique(tide.tensor({ 1., nan, nan })), { 1, nan, nan }, 0, "NaNs are distinct")
  local seq = tide.tensor({ 1., 3, 5, 7, nan })
  H.values(tide.searchsorted(seq, tide.tensor({ 0., 3, 6, 9, nan })), { 1, 2, 4, 5, 6 }, 0)
  H.values(tide.searchsorted(seq, tide.tensor({ 3., 7, nan }), { side = "right" }), { 3, 5, 6 }, 0)
  local rows = tide.tensor({ { 1, 3, 5 }, { 2, 4, 6 } })
  H.values(tide.searchsorted(rows, tide.tensor({ { 3 }, { 3 } }), { right = true }), { { 3 }, { 2 } }, 0)
  local unsorted = tide.tensor({ 5, 1, 3 })
  local r = tide.searchsorted(unsorted, tide.tensor({ 2, 4 }), { sorter = unsorted:argsort() })
  H.values(r, { 2, 3 }, 0, "sorter")
  H.eq(tide.searchsorted(seq, 4, { out_int32 = true }).dtype, "int32")
  H.values(tide.bincount(tide.tensor({ 0, 1, 1, 3 })), { 1, 2, 0, 1 }, 0)
  H.values(tide.bincount(tide.tensor({ 1, 1 }), { minlength = 4 }), { 0, 2, 0, 0 }, 0)
  local bw = tide.bincount(tide.tensor({ 0, 2, 2 }), tide.tensor({ 0.5, 1, 2 }, { dtype = "float32" }))
  H.values(bw, { 0.5, 0, 3 }, 0)
  H.eq(bw.dtype, "float32")
  H.values(tide.histc(tide.tensor({ 1., 2, 1 }), 4, 0, 3), { 0, 2, 1, 0 }, 0)
  H.values(tide.histc(tide.tensor({ 1., 2, 1, 3, 5 }), { bins = 2 }), { 3, 2 }, 0, "own range")
  H.values(tide.histc(tide.tensor({ 2., 2 }), 2), { 0, 2 }, 0, "one value: widened by 1")
  H.values(tide.histc(tide.tensor({ -1., 0, 1, nan }), 2, 0, 1), { 1, 1 }, 0, "outside and NaN")
end)

-- Central differences in float64 against autograd, for L = sum(f(x) * w).
local function gradcheck(f, x, what)
  x = x:double():detach():requires_grad_()
  local y = f(x)
  local w = tide.randn(table.unpack(y:size())):double()
  ;(y * w):sum():backward()
  local g = x.grad:reshape(-1):totable()
  local flat = x:detach():reshape(-1):totable()
  local eps, worst = 1e-6, 0
  for k = 1, #flat do
    local function at(d)
      local p = { table.unpack(flat) }
      p[k] = p[k] + d
      return (f(tide.tensor(p, { dtype = "float64" }):reshape(table.unpack(x:size()))) * w):sum():item()
    end
    local num = (at(eps) - at(-eps)) / (2 * eps)
    worst = math.max(worst, math.abs(num - g[k]) / math.max(1, math.abs(num)))
  end
  -- central differences of smooth float64 functions: error ~ eps^2 * f''' + 1e-16 / eps
  H.ok(worst < 1e-6, ("%s: worst relative gradient error %.2e"):format(what, worst))
end

H.test("gradients against central differences", function()
  local x = tide.randn(3, 5)
  gradcheck(function(t) return t:var(2) end, x, "var")
  gradcheck(function(t) return t:std({ dim = 1, correction = 0 }) end, x, "std")
  gradcheck(function(t) return tide.norm(t) end, x, "norm 2")
  gradcheck(function(t) return tide.norm(t, 3, 2) end, x, "norm 3")
  gradcheck(function(t) return tide.norm(t, 1, 1) end, x, "norm 1")
  gradcheck(function(t) return tide.norm(t, inf, 2) end, x, "norm inf")
  gradcheck(function(t) return (t:sort(2, true)) end, x, "sort")
  gradcheck(function(t) return (t:median(2)) end, x, "median")
  gradcheck(function(t) return t:median() end, x, "median of all")
  gradcheck(function(t) return tide.quantile(t, tide.tensor({ 0.3, 0.8 }, { dtype = "float64" }), 2) end, x, "quantile")
  gradcheck(function(t) return (t:cummax(2)) end, x, "cummax")
  gradcheck(function(t) return (t:cummin(1)) end, x, "cummin")
  gradcheck(function(t) return t:logcumsumexp(2) end, x, "logcumsumexp")
  gradcheck(function(t) return t:cumprod(2) end, x, "cumprod")
  local z = tide.tensor({ { 2., 0, 3, 0.5 }, { 0, 0, 1.5, -2 }, { 1, 2, 3, 0 } })
  gradcheck(function(t) return t:cumprod(2) end, z, "cumprod with zeros")
  gradcheck(function(t) return t:cumprod(1) end, z:t(), "cumprod with zeros along dim 1")
  gradcheck(function(t) return tide.nanmean(t, 2) end, x, "nanmean")
  -- a long line: the gradient is O(n) (a quadratic one would need 10^10 elements here)
  -- ones with a zero at z: dx_i = z - i before z, n - z + 1 at z, 0 after (1-based)
  local n, z = 100000, 50000
  local long = tide.ones(n, { dtype = "float64" })
  long[z] = 0
  long:requires_grad_()
  long:cumprod(1):sum():backward()
  local gl = long.grad
  H.eq({ gl[1]:item(), gl[z - 1]:item(), gl[z]:item(), gl[z + 1]:item(), gl[n]:item() },
    { z - 1, 1, n - z + 1, 0, 0 }, "long cumprod gradient")
end)

local function bitwise(a, b, what)
  H.eq(a:size(), b:size(), what .. " shape")
  H.eq(a.dtype, b.dtype, what .. " dtype")
  H.ok(tide.equal(a, b), what .. ": not bitwise equal")
end

H.test("jit: the same bits as eager; data-sized ops break and stay right", function()
  local function fwd(x)
    local s, i = x:sort(2, true)
    local cm = x:cummax(2)
    return s * 2 + x:var(2, { keepdim = true }) + tide.norm(x, 3, 2, true) + cm,
        i, x:cumprod(1):logcumsumexp(2), x:median(2), tide.quantile(x, 0.25, 2)
  end
  local f = tide.jit(fwd)
  for rep = 1, 3 do
    local x = tide.randn(4, 6)
    local a = { f(x) }
    local b = { fwd(x) }
    for k = 1, #b do bitwise(a[k], b[k], ("output %d call %d"):format(k, rep)) end
  end
  H.ok(f:stats().hits >= 2, "later calls hit the cache")
  H.eq(f:stats().breaks, 0, "sort, the scans, median and a number q read nothing back")
  local function sized(x)
    local u, inv, c = tide.unique(x, { return_inverse = true, return_counts = true })
    return u * 2, inv, c, tide.nonzero(x), tide.bincount(x)
  end
  local g = tide.jit(sized)
  for rep = 1, 4 do
    local x = tide.randint(0, 2 + rep, { 12 })
    local a = { g(x) }
    local b = { sized(x) }
    for k = 1, #b do bitwise(a[k], b[k], ("data-sized output %d call %d"):format(k, rep)) end
  end
  H.ok(g:stats().breaks > 0, "the counts read back are graph breaks")
end)

local vk = tide.vulkan.available()
H.test("vulkan: the same bits as the CPU (SORT and the scans through the CPU fallback)", function()
  if not vk then
    print("test_stats.lua: no Vulkan device, skipped")
    return
  end
  local x = tide.randn(5, 9)
  local xv = x:to("vulkan")
  local a, ai = xv:sort(2)
  local b, bi = x:sort(2)
  bitwise(a:to("cpu"), b, "sort values")
  bitwise(ai:to("cpu"), bi, "sort indices")
  bitwise(xv:cumprod(2):to("cpu"), x:cumprod(2), "cumprod")
  bitwise(xv:logcumsumexp(1):to("cpu"), x:logcumsumexp(1), "logcumsumexp")
  bitwise(select(2, xv:cummin(2)):to("cpu"), select(2, x:cummin(2)), "cummin")
  bitwise(xv:median(2):to("cpu"), x:median(2), "median")
  H.near(tide.quantile(xv, 0.3):to("cpu"):item(), tide.quantile(x, 0.3):item(), 1e-6)
  bitwise(tide.nonzero(xv:gt(0)):to("cpu"), tide.nonzero(x:gt(0)), "nonzero")
  bitwise(tide.unique(xv:round()):to("cpu"), tide.unique(x:round()), "unique")
end)

H.test("errors name the op, shapes and dtypes", function()
  local i = tide.tensor({ 1, 2 })
  H.raises(function() return i:var() end, "var", "[2] int64", "floating")
  H.raises(function() return tide.ones(2, 3):var(3) end, "var", "dim")
  H.raises(function() return tide.norm(tide.ones(2), "nuc") end, "norm", "nuc")
  H.raises(function() return tide.logcumsumexp(i, 1) end, "logcumsumexp", "[2] int64")
  H.raises(function() return tide.cumprod(tide.ones(2, 3), 3) end, "cumprod", "dim 3")
  H.raises(function() return tide.sort(tide.ones(2, 3), 3) end, "sort", "dim")
  H.raises(function() return tide.quantile(tide.ones(4), 1.5) end, "quantile", "[0, 1]", "1.5")
  H.raises(function() return tide.quantile(tide.ones(4), tide.tensor({ 0.5, -0.5 })) end, "quantile", "[0, 1]", "-0.5")
  H.raises(function() return tide.quantile(i, 0.5) end, "quantile", "[2] int64")
  H.raises(function() return tide.quantile(tide.ones(4), 0.5, { interpolation = "cubic" }) end,
    "quantile", "interpolation", "cubic")
  H.raises(function() return tide.quantile(tide.ones(0), 0.5) end, "quantile", "non-empty", "[0]")
  H.raises(function() return tide.median(tide.ones(0, 2), 1) end, "median", "no element", "[0, 2]")
  H.raises(function() return tide.unique(i, { dim = 1 }) end, "unique", "dim")
  H.raises(function() return tide.searchsorted(tide.ones(2, 3), tide.ones(3, 1)) end,
    "searchsorted", "[2, 3] float32", "[3, 1] float32")
  H.raises(function() return tide.searchsorted(tide.ones(3), 1, { side = "up" }) end, "searchsorted", "side")
  H.raises(function() return tide.searchsorted(tide.ones(3), 1, { sorter = tide.tensor({ 1, 2, 4 }) }) end,
    "searchsorted", "index value 4")
  H.raises(function() return tide.bincount(tide.tensor({ 1, -2 })) end, "bincount", "negative", "-2")
  H.raises(function() return tide.bincount(tide.ones(3)) end, "bincount", "[3] float32", "integer")
  H.raises(function() return tide.bincount(i, tide.ones(3)) end, "bincount", "weights", "[3] float32")
  H.raises(function() return tide.histc(tide.ones(3), 0) end, "histc", "bins")
  H.raises(function() return tide.histc(tide.ones(3), 4, 2, 1) end, "histc", "max")
  H.raises(function() return tide.histc(i, 4) end, "histc", "[2] int64")
end)

H.done()
