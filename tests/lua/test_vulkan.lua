-- test_vulkan.lua — the Vulkan device from Lua: availability and device listing, x:to(),
-- creation with {device=}, ops and printing of Vulkan tensors checked against plain Lua loops,
-- tide.sync(), and the errors for a mixed-device op. With no Vulkan, the tests that need it are
-- skipped with the reason printed, and the errors asking for it must say why.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local ok, why = tide.vulkan.available()

H.test("available() returns a boolean and a reason when false", function()
  H.ok(type(ok) == "boolean", "boolean")
  if not ok then
    H.ok(type(why) == "string" and #why > 0, "a reason")
  end
  H.ok(type(tide.vulkan.devices()) == "table", "devices() is a table")
  tide.sync()
end)

H.test("tide.devices() lists the cpu first, then what the registry finds", function()
  local devs = tide.devices()
  H.eq(devs[1].name, "cpu")
  local nvulkan, nref = 0, 0
  for i = 2, #devs do
    local vk = devs[i].name == "vulkan" or devs[i].name:match("^vulkan:%d+$")
    nvulkan = nvulkan + (vk and 1 or 0)
    nref = nref + (devs[i].name == "ref" and 1 or 0)
  end
  H.eq(nvulkan, #tide.vulkan.devices(), "every Vulkan device")
  H.eq(nref, 1, "the reference device")
  H.eq(#devs, 1 + nvulkan + nref, "nothing else")
end)

if not ok then
  print("test_vulkan.lua: no Vulkan device, the Vulkan tests are skipped: " .. why)
  H.test("asking for vulkan without it is a clear error", function()
    H.raises(function() return tide.ones(3):to("vulkan") end, "is not available")
    H.raises(function() return tide.zeros(2, { device = "vulkan" }) end, "not available")
  end)
  H.done()
end

local A = H.build({ 3, 4 }, function(i, j) return H.rnd() * 3 end)
local B = H.build({ 3, 4 }, function(i, j) return H.rnd() * 3 + 0.1 end)

H.test("devices() lists the selected device", function()
  local devs = tide.vulkan.devices()
  H.ok(#devs >= 1, "at least one device")
  local used = 0
  for _, d in ipairs(devs) do
    H.ok(type(d.name) == "string" and type(d.kind) == "string", "name and kind")
    if d.selected then used = used + 1 end
  end
  H.eq(used, 1, "one selected device")
end)

H.test("to vulkan and back keeps the values", function()
  local x = tide.tensor(A)
  local g = x:to("vulkan")
  H.eq(g.device, "vulkan")
  H.values(g, A, 1e-6, "values read from vulkan")
  local back = g:to("cpu")
  H.eq(back.device, "cpu")
  H.values(back, A, 1e-6)
  H.ok(g:to("vulkan") ~= nil, "to the same device")
  local d = g:to({ device = "cpu", dtype = "float64" })
  H.eq(d.dtype, "float64")
  H.eq(d.device, "cpu")
end)

H.test("creation with {device='vulkan'}", function()
  local z = tide.zeros(2, 3, { device = "vulkan" })
  H.eq(z.device, "vulkan")
  H.values(z, { { 0, 0, 0 }, { 0, 0, 0 } })
  local t = tide.tensor(B, { device = "vulkan" })
  H.eq(t.device, "vulkan")
  H.values(t, B, 1e-6)
  local r = tide.arange(1, 6, { device = "vulkan", dtype = "int32" })
  H.eq(r.device, "vulkan")
  H.values(r, { 1, 2, 3, 4, 5 })
end)

H.test("ops on vulkan tensors against Lua loops", function()
  local a, b = tide.tensor(A, { device = "vulkan" }), tide.tensor(B, { device = "vulkan" })
  local want = H.build({ 3, 4 }, function(i, j) return A[i][j] * B[i][j] + 2 end)
  H.values(a * b + 2, want, 1e-6, "a * b + 2")
  local s = a:sum()
  local ref = 0
  for i = 1, 3 do for j = 1, 4 do ref = ref + A[i][j] end end
  H.near(s:item(), ref, 1e-5, "sum")
  local rows = a:sum(2)
  for i = 1, 3 do
    local r = 0
    for j = 1, 4 do r = r + A[i][j] end
    H.near(rows:totable()[i], r, 1e-5, "row sum")
  end
  local m = a:matmul(b:t())
  local mm = H.build({ 3, 3 }, function(i, j)
    local r = 0
    for k = 1, 4 do r = r + A[i][k] * B[j][k] end
    return r
  end)
  H.values(m, mm, 1e-5, "matmul")
  local am = a:argmax(2)
  for i = 1, 3 do
    local best = 1
    for j = 2, 4 do if A[i][j] > A[i][best] then best = j end end
    H.eq(am:totable()[i], best, "argmax is 1-based")
  end
  H.values(a:gt(1.5), H.map(A, function(v) return v > 1.5 end), 0, "comparison")
  tide.sync()
end)

H.test("printing a vulkan tensor shows its values and device", function()
  local t = tide.tensor({ 1.5, 2.5 }, { device = "vulkan" })
  local s = tostring(t)
  H.ok(s:find("1.5", 1, true) and s:find("2.5", 1, true), "values: " .. s)
  H.ok(s:find("vulkan", 1, true), "device: " .. s)
end)

H.test("mixed devices are an error naming both", function()
  local a = tide.tensor(A)
  local g = a:to("vulkan")
  H.raises(function() return a + g end, "cpu", "vulkan")
  H.values(g * 2, H.map(A, function(v) return v * 2 end), 1e-6, "a number goes with any device")
  H.raises(function() return a:to({ device = "tpu" }) end, "unknown device")
end)

H.test("device names come from the registry", function()
  local x = tide.tensor(A)
  local n = #tide.vulkan.devices()
  -- the default device answers to its index too; its name stays "vulkan"
  for _, d in ipairs(tide.vulkan.devices()) do
    if d.selected then H.eq(x:to("vulkan:" .. d.index).device, "vulkan") end
  end
  H.raises(function() return x:to("vulkan:" .. n) end, "vulkan:" .. n, "indices 0..")
  H.raises(function() return tide.ones(2, { device = "vulkan:" .. n }) end, "ones", "vulkan:" .. n)
  H.raises(function() return x:to("flaot32") end, "neither a dtype", "nor a device", "flaot32")
end)

H.test("a jitted function over many batch sizes: one symbolic plan on vulkan", function()
  -- within 1e-5 relative of the CPU's eager values: float32 shaders whose row sums of 9 terms
  -- may round in another order (9 * 2^-24 is below 1e-6)
  local function f(x) return (x:tanh() * 2 + 1):softmax(-1) end
  local j = tide.jit(f)
  for _, b in ipairs({ 5, 12, 3, 40, 7 }) do
    local x = tide.randn(b, 9)
    H.values(j(x:to("vulkan")):to("cpu"), f(x):totable(), 1e-5, "batch " .. b)
  end
  H.eq(j:stats().compiles, 2, "static, then symbolic")
end)

H.test("float16 and bfloat16 on vulkan: casts, copy_, fill_ and ops give the CPU's values", function()
  -- casts, copies and fills are exact (the same bits as the CPU's); add is float32 between
  -- casts on both devices, exact too for two halves
  local vals = { 0, -0.0, 1 / 3, 65504, 65519, 65520, -65520, 1e-7, 6e-8, 2 ^ -25, 3e38, 3.4e38,
                 1 / 0, -1 / 0, 0 / 0, 1 + 2 ^ -11, 1 + 2 ^ -8, -2.5, 123456 }
  local function same(a, b, what)
    local ta, tb = a:to("cpu"):float():totable(), b:to("cpu"):float():totable()
    for i = 1, #tb do
      local x, y = ta[i], tb[i]
      local eq = (x ~= x and y ~= y) or (x == y and 1 / x == 1 / y)
      H.ok(eq, what .. ": element " .. i .. " is " .. tostring(x) .. ", want " .. tostring(y))
    end
  end
  local x = tide.tensor(vals)
  for _, dt in ipairs({ "float16", "bfloat16" }) do
    local c, v = x:to(dt), x:to("vulkan"):to(dt)
    H.eq(v.device, "vulkan")
    H.eq(v.dtype, dt)
    same(v, c, "cast to " .. dt)
    same(v:to("int32"), c:to("int32"), dt .. " to int32")
    same(v + v, c + c, dt .. " add")
    local dc, dv = tide.zeros(#vals, { dtype = dt }), tide.zeros(#vals, { dtype = dt, device = "vulkan" })
    dc:copy_(x:to("float64"))
    dv:copy_(x:to("vulkan"):to("float64"))
    same(dv, dc, "copy_ float64 into " .. dt)
    dc:fill_(65519)
    dv:fill_(65519)
    same(dv, dc, "fill_ " .. dt)
  end
end)

H.done()
