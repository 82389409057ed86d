-- test_conv_family.lua — conv1d/conv3d, conv_transpose1d/2d/3d, the 1-D/3-D pools (ceil_mode,
-- count_include_pad), adaptive_avg_pool1d/3d and unfold/fold from Lua: known answers, finite
-- difference gradient checks in float64, tide.jit against eager, Vulkan against the CPU, the
-- modules, and errors that name the op, shapes and dtypes. The values against direct loops over
-- a grid of options are tests/test_conv_nd.c's.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"
local F = nn.functional

local function t(v) return tide.tensor(v, { dtype = "float64" }) end

H.test("known answers", function()
  -- conv1d: a [1, 0, -1] kernel is x[i] - x[i + 2]
  local x = t({ { { 1, 2, 4, 7, 11 } } })
  H.values(F.conv1d(x, t({ { { 1, 0, -1 } } })), { { { -3, -5, -7 } } }, 0, "conv1d")
  H.values(F.conv1d(x, t({ { { 1, 0, -1 } } }), t({ 10 }), { padding = "same" }),
    { { { 8, 7, 5, 3, 17 } } }, 0, "conv1d same + bias")
  H.values(tide.conv1d(x, t({ { { 1, 1 } } }), nil, 1, 0, 2), { { { 5, 9, 15 } } }, 0,
    "conv1d dilation (positional)")
  -- conv_transpose1d: [1, 2] with a [1, 1, 1] kernel at stride 2 spreads and overlaps
  H.values(F.conv_transpose1d(t({ { { 1, 2 } } }), t({ { { 1, 1, 1 } } }), nil, { stride = 2 }),
    { { { 1, 1, 3, 2, 2 } } }, 0, "conv_transpose1d")
  H.values(F.conv_transpose1d(t({ { { 1, 2 } } }), t({ { { 1, 1, 1 } } }), nil,
    { stride = 2, padding = 1, output_padding = 1 }), { { { 1, 3, 2, 2 } } }, 0,
    "conv_transpose1d padding + output_padding")
  -- conv3d of ones with a 2x2x2 ones kernel counts the window
  H.values(F.conv3d(tide.ones(1, 1, 2, 2, 2):double(), tide.ones(1, 1, 2, 2, 2):double()),
    { { { { { 8 } } } } }, 0, "conv3d")
  -- pools
  local p = t({ { { 1, 3, 2, 5, 4 } } })
  H.values(F.max_pool1d(p, 2), { { { 3, 5 } } }, 0, "max_pool1d")
  H.values(F.max_pool1d(p, 2, { ceil_mode = true }), { { { 3, 5, 4 } } }, 0, "max_pool1d ceil")
  H.values(F.avg_pool1d(p, 2, { ceil_mode = true }), { { { 2, 3.5, 4 } } }, 0, "avg_pool1d ceil")
  H.values(F.avg_pool1d(p, 3, 2, 1), { { { 4 / 3, 10 / 3, 3 } } }, 1e-15, "avg_pool1d padded")
  H.values(F.avg_pool1d(p, 3, { stride = 2, padding = 1, count_include_pad = false }),
    { { { 2, 10 / 3, 4.5 } } }, 1e-15, "avg_pool1d count_include_pad=false")
  local v, i = F.max_pool1d(p, 2, { return_indices = true })
  H.values(v, { { { 3, 5 } } }, 0, "max_pool1d values")
  H.values(i, { { { 2, 4 } } }, 0, "max_pool1d 1-based indices")
  local cube = tide.arange(0, 8):double():reshape(1, 1, 2, 2, 2)
  H.values(F.max_pool3d(cube, 2), { { { { { 7 } } } } }, 0, "max_pool3d")
  H.values(F.avg_pool3d(cube, 2), { { { { { 3.5 } } } } }, 0, "avg_pool3d")
  H.values(F.adaptive_avg_pool1d(t({ { { 1, 2, 3, 4, 5, 6 } } }), 3), { { { 1.5, 3.5, 5.5 } } }, 0,
    "adaptive_avg_pool1d")
  H.values(F.adaptive_avg_pool3d(cube, 1), { { { { { 3.5 } } } } }, 0, "adaptive_avg_pool3d")
  -- unfold: a 3x3 plane in 2x2 windows, rows are the kernel taps
  local img = tide.arange(1, 10):double():reshape(1, 1, 3, 3)
  H.values(F.unfold(img, 2), { { { 1, 2, 4, 5 }, { 2, 3, 5, 6 }, { 4, 5, 7, 8 }, { 5, 6, 8, 9 } } },
    0, "unfold")
  H.values(F.fold(F.unfold(tide.ones(1, 1, 3, 3):double(), 2), { 3, 3 }, 2),
    { { { { 1, 2, 1 }, { 2, 4, 2 }, { 1, 2, 1 } } } }, 0, "fold counts the overlaps")
  H.ok(tide.conv3d == F.conv3d and tide.avg_pool1d == F.avg_pool1d, "tide.X is F.X")
  -- unbatched input
  H.eq(F.conv1d(tide.ones(2, 6), tide.ones(3, 2, 3)):size(), { 3, 4 }, "unbatched conv1d")
end)

-- sum(f(...) * g) by central differences at a few entries of each input against autograd.
local function gradcheck(name, fn, inputs)
  for _, v in ipairs(inputs) do v:requires_grad_(true) end
  local out = fn(table.unpack(inputs))
  local g = tide.randn(table.unpack(out:size())):double()
  tide.sum(out * g):backward()
  local eps = 1e-6
  for k, v in ipairs(inputs) do
    local grad = v.grad:reshape(-1):totable()
    local vals, shape = v:detach():reshape(-1):totable(), v:size()
    local function at(j, delta) -- sum(fn(...) * g) with entry j of input k moved by delta
      local moved = { table.unpack(vals) }
      moved[j] = moved[j] + delta
      local args = {}
      for idx, u in ipairs(inputs) do
        args[idx] = idx == k and tide.tensor(moved, { dtype = "float64" }):reshape(shape)
                    or u:detach()
      end
      return tide.sum(fn(table.unpack(args)) * g):item()
    end
    for s = 1, 6 do
      local j = (s * 7919) % #vals + 1
      -- float64 central difference: error ~ eps^2 * f''' + rounding 1e-16 * |sum| / eps
      H.near(grad[j], (at(j, eps) - at(j, -eps)) / (2 * eps), 1e-6,
        ("%s input %d entry %d"):format(name, k, j))
    end
  end
end

H.test("gradients against finite differences (float64)", function()
  local d = "float64"
  gradcheck("conv1d", function(x, w, b)
    return F.conv1d(x, w, b, { stride = 2, padding = 1, dilation = 2, groups = 2 })
  end, { tide.randn(2, 4, 9):double(), tide.randn(6, 2, 3):double(), tide.randn(6):double() })
  gradcheck("conv3d", function(x, w)
    return F.conv3d(x, w, nil, { stride = { 2, 1, 1 }, padding = 1, groups = 2 })
  end, { tide.randn(1, 4, 4, 5, 4):double(), tide.randn(2, 2, 3, 2, 3):double() })
  gradcheck("conv_transpose1d", function(x, w)
    return F.conv_transpose1d(x, w, nil, { stride = 2, padding = 1, output_padding = 1 })
  end, { tide.randn(2, 3, 5):double(), tide.randn(3, 2, 3):double() })
  gradcheck("conv_transpose2d", function(x, w, b)
    return F.conv_transpose2d(x, w, b, { stride = { 2, 1 }, padding = 1, groups = 2,
                                         dilation = { 1, 2 } })
  end, { tide.randn(2, 4, 3, 4):double(), tide.randn(4, 3, 3, 2):double(), tide.randn(6):double() })
  gradcheck("conv_transpose3d", function(x, w)
    return F.conv_transpose3d(x, w, nil, { stride = 2, padding = { 1, 0, 1 },
                                           output_padding = { 1, 0, 0 } })
  end, { tide.randn(1, 2, 3, 2, 3):double(), tide.randn(2, 3, 2, 2, 3):double() })
  gradcheck("avg_pool3d ceil", function(x)
    return F.avg_pool3d(x, 2, { stride = 2, padding = 1, ceil_mode = true,
                                count_include_pad = false })
  end, { tide.randn(1, 2, 5, 4, 5):double() })
  gradcheck("max_pool3d", function(x) return F.max_pool3d(x, { 2, 3, 2 }, 2) end,
    { tide.randn(1, 2, 5, 6, 5):double() })
  gradcheck("adaptive_avg_pool3d", function(x) return F.adaptive_avg_pool3d(x, { 2, 3, 2 }) end,
    { tide.randn(1, 2, 5, 7, 4):double() })
  gradcheck("unfold", function(x) return F.unfold(x, { 2, 3 }, { padding = 1, stride = 2 }) end,
    { tide.randn(2, 2, 5, 6):double() })
  gradcheck("fold", function(x) return F.fold(x, { 4, 5 }, 2, { dilation = { 1, 2 } }) end,
    { tide.randn(1, 8, 3 * 3):double() })
end)

H.test("tide.jit against eager", function()
  local x, w, wt = tide.randn(2, 4, 5, 6, 7), tide.randn(6, 2, 3, 3, 3), tide.randn(4, 3, 2, 2, 2)
  local function f(a, b, c)
    local y = F.conv3d(a, b, nil, { padding = 1, groups = 2 })
    local z = F.conv_transpose3d(a, c, nil, { stride = 2 })
    return F.max_pool3d(y, 2, { ceil_mode = true }) , F.avg_pool3d(z, 3, 2)
  end
  local jf = tide.jit(f)
  local e1, e2 = f(x, w, wt)
  for _ = 1, 2 do -- the first call traces, the second replays
    local j1, j2 = jf(x, w, wt)
    H.values(j1, e1:totable(), 1e-6, "conv3d + max_pool3d jitted")
    H.values(j2, e2:totable(), 1e-6, "conv_transpose3d + avg_pool3d jitted")
  end
  local u = tide.randn(2, 3, 6, 6)
  local ju = tide.jit(function(a) return F.fold(F.unfold(a, 3, { padding = 1 }), { 6, 6 }, 3,
    { padding = 1 }) end)
  H.values(ju(u), F.fold(F.unfold(u, 3, { padding = 1 }), { 6, 6 }, 3, { padding = 1 }):totable(),
    1e-6, "unfold + fold jitted")
end)

H.test("modules", function()
  local m = nn.Conv1d(4, 6, 3, { stride = 2, padding = 1, groups = 2 })
  H.eq(m.weight:size(), { 6, 2, 3 }, "Conv1d weight")
  local x = tide.randn(2, 4, 9)
  H.values(m(x), F.conv1d(x, m.weight, m.bias, { stride = 2, padding = 1, groups = 2 }):totable(),
    0, "Conv1d forward")
  H.eq(nn.Conv3d(2, 4, { 1, 2, 3 }).weight:size(), { 4, 2, 1, 2, 3 }, "Conv3d weight")
  local ct = nn.ConvTranspose2d(4, 6, 3, { stride = 2, padding = 1, output_padding = 1, groups = 2 })
  H.eq(ct.weight:size(), { 4, 3, 3, 3 }, "ConvTranspose2d weight")
  H.eq(ct(tide.randn(1, 4, 5, 5)):size(), { 1, 6, 10, 10 }, "ConvTranspose2d output")
  H.eq(nn.ConvTranspose1d(3, 2, 4)(tide.randn(1, 3, 5)):size(), { 1, 2, 8 }, "ConvTranspose1d")
  H.eq(nn.ConvTranspose3d(3, 2, 2, { stride = 2 })(tide.randn(1, 3, 2, 3, 4)):size(),
    { 1, 2, 4, 6, 8 }, "ConvTranspose3d")
  local v = tide.randn(1, 2, 7)
  H.values(nn.MaxPool1d(3, 2, 1)(v), F.max_pool1d(v, 3, 2, 1):totable(), 0, "MaxPool1d")
  H.values(nn.AvgPool1d(3, { ceil_mode = true })(v), F.avg_pool1d(v, 3, { ceil_mode = true })
    :totable(), 0, "AvgPool1d")
  local c = tide.randn(1, 2, 4, 5, 6)
  H.values(nn.MaxPool3d(2)(c), F.max_pool3d(c, 2):totable(), 0, "MaxPool3d")
  H.values(nn.AvgPool3d(2, { stride = 1 })(c), F.avg_pool3d(c, 2, 1):totable(), 0, "AvgPool3d")
  H.eq(nn.AdaptiveAvgPool1d(3)(v):size(), { 1, 2, 3 }, "AdaptiveAvgPool1d")
  H.eq(nn.AdaptiveAvgPool3d({ 1, 2, 3 })(c):size(), { 1, 2, 1, 2, 3 }, "AdaptiveAvgPool3d")
  local img = tide.randn(1, 2, 4, 4)
  local cols = nn.Unfold(2, { stride = 2 })(img)
  H.eq(cols:size(), { 1, 8, 4 }, "Unfold")
  H.values(nn.Fold({ 4, 4 }, 2, { stride = 2 })(cols), img:totable(), 0, "Fold inverts Unfold")
  H.ok(tostring(nn.Conv3d(2, 4, 3)):match("Conv3d%(2, 4, kernel_size=%(3, 3, 3%)") ~= nil,
    "Conv3d repr")
end)

H.test("errors name the op, shapes and dtypes", function()
  H.raises(function() return F.conv1d(tide.ones(2, 4, 8), tide.ones(6, 3, 3)) end,
    "conv1d", "channel mismatch", "[2, 4, 8] float32", "[6, 3, 3] float32")
  H.raises(function() return F.conv3d(tide.ones(4, 8, 8), tide.ones(6, 4, 3, 3, 3)) end,
    "conv3d", "5-D", "[4, 8, 8] float32")
  H.raises(function() return F.conv1d(tide.ones(2, 4, 8), tide.ones(6, 4, 3):double()) end,
    "conv1d", "same dtype", "float64")
  H.raises(function() return F.conv1d(tide.ones(2, 4, 8), tide.ones(6, 4, 2), nil,
    { stride = 2, padding = "same" }) end, "conv1d", "same", "stride 1")
  H.raises(function() return F.conv_transpose2d(tide.ones(1, 4, 3, 3), tide.ones(4, 2, 3, 3), nil,
    { stride = 2, output_padding = 2 }) end, "conv_transpose2d", "output_padding 2", "[1, 4, 3, 3]")
  H.raises(function() return F.max_pool3d(tide.ones(1, 3, 3), 2) end, "max_pool3d", "5-D",
    "[1, 3, 3] float32")
  H.raises(function() return F.avg_pool1d(tide.ones(1, 1, 4, { dtype = "int32" }), 2) end, "avg_pool1d",
    "int32")
  H.raises(function() return F.avg_pool1d(tide.ones(1, 1, 4), 2, { bogus = 1 }) end, "avg_pool1d",
    "bogus")
  H.raises(function() return F.fold(tide.ones(1, 5, 4), { 3, 3 }, 2) end, "fold", "[1, 5, 4]")
  H.raises(function() return F.adaptive_avg_pool3d(tide.ones(1, 1, 2, 2, 2), { 1, 2 }) end,
    "adaptive_avg_pool3d", "output_size")
end)

if tide.vulkan.available() then
  H.test("Vulkan against the CPU", function()
    -- float32 sums of <= 54 products of values in [-4, 4]: 1e-4 absolute covers the orders
    local x, w = tide.randn(2, 4, 5, 6, 7), tide.randn(6, 4, 3, 3, 3)
    local wt, s = tide.randn(4, 3, 2, 2, 2), tide.randn(2, 4, 11)
    local gx, gw, gwt, gs = x:to("vulkan"), w:to("vulkan"), wt:to("vulkan"), s:to("vulkan")
    H.values(F.conv3d(gx, gw, nil, { padding = 1 }):to("cpu"),
      F.conv3d(x, w, nil, { padding = 1 }):totable(), 1e-4, "conv3d")
    H.values(F.conv_transpose3d(gx, gwt, nil, { stride = 2 }):to("cpu"),
      F.conv_transpose3d(x, wt, nil, { stride = 2 }):totable(), 1e-4, "conv_transpose3d")
    local w1 = tide.randn(6, 4, 3)
    H.values(F.conv1d(gs, w1:to("vulkan"), nil, { padding = 1 }):to("cpu"),
      F.conv1d(s, w1, nil, { padding = 1 }):totable(), 1e-4, "conv1d")
    H.values(F.max_pool3d(gx, 2, { ceil_mode = true }):to("cpu"),
      F.max_pool3d(x, 2, { ceil_mode = true }):totable(), 0, "max_pool3d")
    H.values(F.avg_pool1d(gs, 3, { stride = 2, ceil_mode = true }):to("cpu"),
      F.avg_pool1d(s, 3, { stride = 2, ceil_mode = true }):totable(), 1e-6, "avg_pool1d")
    H.values(F.adaptive_avg_pool3d(gx, { 2, 3, 4 }):to("cpu"),
      F.adaptive_avg_pool3d(x, { 2, 3, 4 }):totable(), 1e-6, "adaptive_avg_pool3d")
    H.values(F.fold(F.unfold(gx:narrow(3, 1, 1):squeeze(3), 2), { 6, 7 }, 2):to("cpu"),
      F.fold(F.unfold(x:narrow(3, 1, 1):squeeze(3), 2), { 6, 7 }, 2):totable(), 1e-6,
      "unfold + fold")
  end)
else
  print("test_conv_family.lua: no Vulkan device, its test is skipped")
end

H.done()
