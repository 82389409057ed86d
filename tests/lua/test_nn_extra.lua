-- test_nn_extra.lua — tide.nn.functional's normalizations, losses, resizing, padding modes,
-- pixel shuffles, grid_sample, adaptive_max_pool2d and bilinear against PyTorch 1.13's answers
-- (tests/lua/data/nn_extra_fixtures.lua, from scripts/make_nn_extra_fixtures.py: values and the
-- gradients of sum(out * r), float64), a finite-difference gradient check, the jit against
-- eager, Vulkan against the CPU, the modules, and the errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"
local F = nn.functional

local dir = arg[0]:match("(.*/)") or "./"
local FX = dofile(dir .. "data/nn_extra_fixtures.lua")

tide.manual_seed(24)

local function T(v, dtype) return tide.tensor(v, { dtype = dtype or "float64" }) end
local function I(v) return tide.tensor(v, { dtype = "int64" }) end

-- Each case: the fixture's inputs (float ones as float64 tensors, integer ones as int64) -> out.
local CALLS = {
  group_norm = function(a) return F.group_norm(a.x, 2, a.w, a.b, 1e-5) end,
  instance_norm = function(a) return F.instance_norm(a.x, nil, nil, a.w, a.b) end,
  normalize = function(a) return F.normalize(a.x, { p = 2, dim = 2 }) end,
  cosine_similarity = function(a) return F.cosine_similarity(a.a, a.b, { dim = 2 }) end,
  pairwise_distance = function(a) return F.pairwise_distance(a.a, a.b) end,
  pairwise_distance_p1 = function(a) return F.pairwise_distance(a.a, a.b, { p = 1 }) end,
  smooth_l1_loss = function(a) return F.smooth_l1_loss(a.a, a.t, { beta = 0.7, reduction = "none" }) end,
  huber_loss = function(a) return F.huber_loss(a.a, a.t, { delta = 1.3, reduction = "sum" }) end,
  bce = function(a) return F.binary_cross_entropy(a.p, a.t, { weight = a.w }) end,
  kl_div = function(a) return F.kl_div(a.i, a.t, { reduction = "batchmean" }) end,
  kl_div_log = function(a) return F.kl_div(a.i, a.t, { reduction = "sum", log_target = true }) end,
  margin_ranking_loss = function(a) return F.margin_ranking_loss(a.a, a.b, a.y, { margin = 0.3 }) end,
  hinge_embedding_loss = function(a)
    return F.hinge_embedding_loss(a.x, a.y, { margin = 1.5, reduction = "none" })
  end,
  soft_margin_loss = function(a) return F.soft_margin_loss(a.x, a.y) end,
  multi_margin_loss = function(a)
    return F.multi_margin_loss(a.x, a.y, { p = 2, margin = 0.8, weight = a.w, reduction = "none" })
  end,
  cosine_embedding_loss = function(a) return F.cosine_embedding_loss(a.a, a.b, a.y, { margin = -0.2 }) end,
  triplet_margin_loss = function(a) return F.triplet_margin_loss(a.a, a.p, a.n, { swap = true }) end,
  -- the logits x go through log_softmax, where PyTorch's CTC gradient and the true one agree
  ctc_loss = function(a)
    return F.ctc_loss(tide.log_softmax(a.x, 3), a.tg, a.il, a.tl, { blank = 1, reduction = "none" })
  end,
  ctc_loss_mean = function(a) return F.ctc_loss(tide.log_softmax(a.x, 3), a.tg, a.il, a.tl, { blank = 3 }) end,
  ctc_loss_inf = function(a)
    return F.ctc_loss(tide.log_softmax(a.x, 3), a.tg, a.il, a.tl, { reduction = "sum", zero_infinity = true })
  end,
  pixel_shuffle = function(a) return F.pixel_shuffle(a.x, 2) end,
  pixel_unshuffle = function(a) return F.pixel_unshuffle(a.x, 2) end,
  adaptive_max_pool2d = function(a) return F.adaptive_max_pool2d(a.x, { 3, 2 }) end,
  adaptive_max_pool2d_indices = function(a)
    local _, i = F.adaptive_max_pool2d(a.x, { 3, 2 }, true)
    return i
  end,
  interp_nearest_size = function(a) return F.interpolate(a.x, { size = { 7, 3 } }) end,
  interp_nearest_scale = function(a) return F.interpolate(a.x, { scale_factor = { 1.5, 0.5 } }) end,
  interp_nearest_exact = function(a) return F.interpolate(a.x, { size = { 7, 3 }, mode = "nearest-exact" }) end,
  interp_recompute = function(a)
    return F.interpolate(a.x, { scale_factor = 1.7, mode = "bilinear", recompute_scale_factor = true })
  end,
  interp_trilinear = function(a) return F.interpolate(a.x, { size = { 3, 4, 2 }, mode = "trilinear" }) end,
  pad_reflect = function(a) return F.pad(a.x, { 2, 3, 1, 2 }, "reflect") end,
  pad_replicate = function(a) return F.pad(a.x, { 2, 3, 1, 2 }, "replicate") end,
  pad_circular = function(a) return F.pad(a.x, { 2, 3, 1, 2 }, "circular") end,
  pad_reflect_1d = function(a) return F.pad(a.x, { 3, 1 }, "reflect") end,
  bilinear = function(a) return F.bilinear(a.a, a.b, a.w, a.bias) end,
}
for _, ac in ipairs({ false, true }) do
  CALLS["interp_bilinear_size_" .. (ac and "True" or "False")] = function(a)
    return F.interpolate(a.x, { size = { 7, 3 }, mode = "bilinear", align_corners = ac })
  end
  CALLS["interp_bilinear_scale_" .. (ac and "True" or "False")] = function(a)
    return F.interpolate(a.x, { scale_factor = 1.7, mode = "bilinear", align_corners = ac })
  end
  CALLS["interp_linear_" .. (ac and "True" or "False")] = function(a)
    return F.interpolate(a.x, 9, nil, "linear", ac)
  end
  for _, mode in ipairs({ "bilinear", "nearest", "bicubic" }) do
    for _, pad in ipairs({ "zeros", "border", "reflection" }) do
      CALLS[("grid_sample_%s_%s_%s"):format(mode, pad, ac and "True" or "False")] = function(a)
        return F.grid_sample(a.x, a.grid, { mode = mode, padding_mode = pad, align_corners = ac })
      end
    end
  end
end

local INT_INPUTS = { tg = true, il = true, tl = true }
local function inputs_of(name, grad)
  local a = {}
  for k, v in pairs(FX[name].inputs) do
    local int = INT_INPUTS[k] or (name == "multi_margin_loss" and k == "y")
    a[k] = int and I(v) or T(v)
    if grad and FX[name].grads and FX[name].grads[k] then a[k]:requires_grad_() end
  end
  return a
end

-- float64 composites of exp/log/sqrt: ~1e-15 relative per op, a few dozen ops deep
local TOL = 1e-10

H.test("every case is called, and every call has a case", function()
  for name in pairs(FX) do H.ok(CALLS[name] ~= nil, "no call for fixture " .. name) end
  for name in pairs(CALLS) do H.ok(FX[name] ~= nil, "no fixture for " .. name) end
end)

H.test("values and gradients equal PyTorch 1.13's", function()
  for name, call in pairs(CALLS) do
    local fx = FX[name]
    local a = inputs_of(name, true)
    local out = call(a)
    H.values(out, fx.out, TOL, name)
    if fx.r then
      (out * T(fx.r)):sum():backward()
      for k, g in pairs(fx.grads) do
        H.values(a[k].grad, g, 1e-9, name .. " grad " .. k)
      end
    end
  end
end)

-- Central differences of sum(f(x) * r) in float64: step 1e-6 leaves ~1e-9 of truncation and
-- rounding error for these smooth functions.
local function gradcheck(name, f, x)
  x = x:detach():clone():requires_grad_()
  local y = f(x)
  local r = tide.randn(y:size()):double()
  ;(y * r):sum():backward()
  local flat, g = x:detach():view(-1), x.grad:view(-1)
  for i = 1, flat:numel() do
    local v = flat[i]:item()
    flat[i] = v + 1e-6
    local up = (f(x:detach()) * r):sum():item()
    flat[i] = v - 1e-6
    local down = (f(x:detach()) * r):sum():item()
    flat[i] = v
    H.near(g[i]:item(), (up - down) / 2e-6, 1e-6, ("%s d/dx[%d]"):format(name, i))
  end
end

H.test("gradcheck: finite differences agree with autograd", function()
  local x = tide.randn(2, 4, 3):double()
  gradcheck("group_norm", function(t) return F.group_norm(t, 2) end, x)
  gradcheck("instance_norm", function(t) return F.instance_norm(t) end, x)
  gradcheck("interpolate", function(t)
    return F.interpolate(t:view(2, 2, 2, 3), { size = { 3, 5 }, mode = "bilinear" })
  end, x)
  gradcheck("pad reflect", function(t) return F.pad(t, { 2, 1 }, "reflect") end, x)
  local target = tide.randn(2, 4, 3):double()
  gradcheck("smooth_l1", function(t) return F.smooth_l1_loss(t, target) end, x)
  local lp = tide.log_softmax(tide.randn(5, 2, 4):double(), 3)
  gradcheck("ctc_loss", function(t)
    return F.ctc_loss(t, I({ { 2, 3 }, { 4, 4 } }), { 5, 5 }, { 2, 2 })
  end, lp)
  local grid = (tide.rand(1, 2, 3, 2):double() * 1.6 - 0.8)
  local img = tide.randn(1, 2, 3, 4):double()
  gradcheck("grid_sample grid", function(g) return F.grid_sample(img, g) end, grid)
  -- bicubic with reflection: the grid's gradient also flows through the reflection's abs/fmod
  -- (points inside (-0.8, 0.8) of a [3, 4] image stay clear of the reflection's kinks)
  gradcheck("grid_sample bicubic reflection grid", function(g)
    return F.grid_sample(img, g, { mode = "bicubic", padding_mode = "reflection" })
  end, grid)
  gradcheck("grid_sample bicubic reflection input", function(t)
    return F.grid_sample(t, grid, { mode = "bicubic", padding_mode = "reflection",
                                    align_corners = true })
  end, img)
end)

H.test("float32 agrees with float64 (both CPU tiers run this file)", function()
  for _, name in ipairs({ "group_norm", "interp_bilinear_size_False", "pad_reflect",
                          "grid_sample_bilinear_zeros_False", "ctc_loss", "triplet_margin_loss" }) do
    local a = inputs_of(name, false)
    for k, v in pairs(a) do if v.dtype == "float64" then a[k] = v:float() end end
    H.values(CALLS[name](a), FX[name].out, 1e-4, name .. " float32")
  end
end)

local function bitwise(a, b, what)
  H.eq(a:size(), b:size(), what .. " shape")
  H.ok(tide.equal(a, b), what .. ": not bitwise equal")
end

H.test("jit: the same values as eager", function()
  local w = tide.randn(4)
  local function fwd(x)
    local y = F.group_norm(x, 2, w) + F.instance_norm(x)
    y = F.interpolate(y, { size = { 5, 7 }, mode = "bilinear" })
    y = F.pad(y, { 1, 1, 1, 1 }, "reflect") + 0
    y = F.pixel_unshuffle(F.pad(y, { 1, 0, 0, 1 }, "replicate"), 2)
    return F.pixel_shuffle(y, 2):tanh()
  end
  local f = tide.jit(fwd)
  for rep = 1, 3 do
    local x = tide.randn(2, 4, 3, 5)
    bitwise(f(x), fwd(x), "call " .. rep)
  end
  H.eq(f:stats().fallbacks, 0, "no fallback to eager")
  local function step(x)
    local l = F.smooth_l1_loss(F.interpolate(x, { scale_factor = 2 }), tide.ones(2, 3, 8, 8))
    l:backward()
    local g = x.grad
    x.grad = nil
    return l, g
  end
  local s = tide.jit(step)
  for rep = 1, 2 do
    local p = tide.randn(2, 3, 4, 4):requires_grad_()
    local l1, g1 = s(p)
    local l2, g2 = step(p)
    H.near(l1:item(), l2:item(), 1e-6, "loss " .. rep)
    H.values(g1, g2:totable(), 1e-6, "grad " .. rep)
  end
end)

-- The losses, grid_sample, adaptive_max_pool2d, bilinear and ctc_loss in one traced function.
local function loss_bundle(a, b, y, lp, grid, w)
  local img = a:view(2, 3, 2, 1)
  return F.smooth_l1_loss(a, b) + F.huber_loss(a, b, { delta = 0.5 }) +
         F.kl_div(tide.log_softmax(a, 2), tide.softmax(b, 2), { reduction = "batchmean" }) +
         F.margin_ranking_loss(a:select(2, 1), b:select(2, 1), y) +
         F.hinge_embedding_loss(a:select(2, 2), y) + F.soft_margin_loss(a:select(2, 3), y) +
         F.multi_margin_loss(a, I({ 1, 3 }):to(a.device)) + F.cosine_embedding_loss(a, b, y) +
         F.triplet_margin_loss(a, b, b * 0.5) + F.binary_cross_entropy(tide.sigmoid(a), tide.sigmoid(b)) +
         F.cosine_similarity(a, b):sum() + F.normalize(a):sum() + F.pairwise_distance(a, b):sum() +
         F.grid_sample(img, grid):sum() + F.adaptive_max_pool2d(img, 1):sum() +
         F.bilinear(a, b, w):sum() +
         F.ctc_loss(lp, I({ { 2, 3 }, { 3, 3 } }), { 4, 4 }, { 2, 2 })
end

H.test("jit: the losses, grid_sample and ctc_loss as eager", function()
  local f = tide.jit(loss_bundle)
  for rep = 1, 3 do
    local a, b = tide.randn(2, 6), tide.randn(2, 6)
    local y = tide.tensor({ 1, -1 })
    local lp = tide.log_softmax(tide.randn(4, 2, 3), 3)
    local grid = tide.rand(2, 3, 3, 2) * 2 - 1
    local w = tide.randn(3, 6, 6)
    -- the same ops in the same order: equal up to the fusion of elementwise chains (float32)
    H.near(f(a, b, y, lp, grid, w):item(), loss_bundle(a, b, y, lp, grid, w):item(), 1e-4, "rep " .. rep)
  end
  H.eq(f:stats().fallbacks, 0, "no fallback to eager")
end)

H.test("vulkan: the same values as the CPU", function()
  if not tide.vulkan.available() then
    print("test_nn_extra.lua: no Vulkan device, skipped")
    return
  end
  local x = tide.randn(2, 4, 3, 5)
  local xv = x:to("vulkan")
  local ops = {
    function(t) return F.group_norm(t, 2) end,
    function(t) return F.instance_norm(t) end,
    function(t) return F.interpolate(t, { size = { 5, 8 }, mode = "bilinear", align_corners = true }) end,
    function(t) return F.interpolate(t, { scale_factor = 2 }) end,
    function(t) return F.pad(t, { 2, 1, 1, 2 }, "reflect") end,
    function(t) return F.pad(t, { 2, 1, 1, 2 }, "circular") end,
    function(t) return F.pixel_unshuffle(F.pixel_shuffle(t, 2), 2) end,
    function(t) return F.smooth_l1_loss(t, t * 0.5) end,
    function(t) return F.grid_sample(t, tide.full({ 2, 2, 3, 2 }, 0.3, { device = t.device })) end,
  }
  local a, b = tide.randn(2, 6), tide.randn(2, 6)
  local args = { a, b, tide.tensor({ 1, -1 }), tide.log_softmax(tide.randn(4, 2, 3), 3),
                 tide.rand(2, 3, 3, 2) * 2 - 1, tide.randn(3, 6, 6) }
  local vargs = {}
  for i, t in ipairs(args) do vargs[i] = t:to("vulkan") end
  H.near(loss_bundle(table.unpack(vargs)):to("cpu"):item(), loss_bundle(table.unpack(args)):item(),
         1e-4, "losses, grid_sample, ctc_loss")
  for i, op in ipairs(ops) do
    -- float32 reductions on another device add in another order: ~1e-6 relative
    H.values(op(xv):to("cpu"), op(x):totable(), 1e-5, "op " .. i)
  end
end)

H.test("modules", function()
  local gn = nn.GroupNorm(2, 4)
  local x = tide.randn(2, 4, 3, 3)
  H.values(gn(x), F.group_norm(x, 2):totable(), 1e-6, "GroupNorm")
  H.eq(#gn:parameters(), 2)
  local inn = nn.InstanceNorm2d(4, { affine = true, track_running_stats = true })
  local y = inn(x)
  H.values(y, F.instance_norm(x):totable(), 1e-5, "InstanceNorm2d training")
  local m = x:mean({ 3, 4 }):mean(1)
  H.values(inn.running_mean, (m * 0.1):totable(), 1e-6, "running_mean moved 10% of the way")
  inn:eval()
  H.values(inn(x), tide.batch_norm(x, inn.running_mean, inn.running_var, nil, nil, false, 0.1,
                                   1e-5):totable(), 1e-5, "InstanceNorm2d eval")
  H.eq(nn.InstanceNorm1d(3)(tide.randn(2, 3, 5)):size(), { 2, 3, 5 })
  H.eq(nn.Upsample({ scale_factor = 2, mode = "bilinear" })(x):size(), { 2, 4, 6, 6 })
  H.eq(nn.PixelShuffle(2)(x):size(), { 2, 1, 6, 6 })
  H.eq(nn.PixelUnshuffle(3)(x):size(), { 2, 36, 1, 1 })
  H.values(nn.ZeroPad2d(1)(tide.ones(1, 1, 1, 1)), { { { { 0, 0, 0 }, { 0, 1, 0 }, { 0, 0, 0 } } } }, 0)
  H.values(nn.ConstantPad2d({ 1, 0, 0, 0 }, 7)(tide.ones(1, 1, 1, 1)), { { { { 7, 1 } } } }, 0)
  H.values(nn.ReflectionPad2d({ 2, 0, 0, 0 })(tide.tensor({ { { { 1, 2, 3 } } } })), { { { { 3, 2, 1, 2, 3 } } } }, 0)
  H.values(nn.ReplicationPad2d({ 0, 2, 0, 0 })(tide.tensor({ { { { 1, 2 } } } })), { { { { 1, 2, 2, 2 } } } }, 0)
  local d = nn.Dropout2d(0.5)
  local o = d(tide.ones(4, 8, 2, 2))
  for n = 1, 4 do
    for c = 1, 8 do
      local ch = o[n][c]
      H.ok(tide.equal(ch, ch:mul(0)) or tide.equal(ch, ch:mul(0) + 2), "whole channels dropped")
    end
  end
  d:eval()
  H.ok(tide.equal(d(x), x), "Dropout2d eval is the identity")
  local amp = nn.AdaptiveMaxPool2d({ 1, 1 }, true)
  local v, i = amp(tide.tensor({ { { { 1, 5 }, { 3, 2 } } } }))
  H.values(v, { { { { 5 } } } }, 0)
  H.values(i, { { { { 2 } } } }, 0)
  H.values(nn.CosineSimilarity()(tide.tensor({ { 1, 0 } }), tide.tensor({ { 1, 1 } })), { math.sqrt(0.5) }, 1e-6)
  H.values(nn.PairwiseDistance()(tide.tensor({ { 3, 0 } }), tide.tensor({ { 0, 4 } })), { 5 }, 1e-5)
  H.eq(nn.Unflatten(2, { 2, 3 })(tide.zeros(4, 6)):size(), { 4, 2, 3 })
  local md = nn.ModuleDict({ b = nn.Linear(2, 3), a = nn.ReLU() })
  H.eq(md:keys(), { "a", "b" })
  H.eq(#md, 2)
  H.eq(#md:parameters(), 2)
  H.eq(md.b.out_features, 3)
  local bl = nn.Bilinear(3, 2, 4)
  local x1, x2 = tide.randn(5, 3), tide.randn(5, 2)
  H.values(bl(x1, x2), F.bilinear(x1, x2, bl.weight, bl.bias):totable(), 1e-6, "Bilinear")
  local eb = nn.EmbeddingBag(10, 3, { mode = "sum" })
  local w = eb.weight:detach()
  local bags = eb(I({ 1, 2, 4, 5, 4, 3, 2 }), I({ 1, 3 }))
  H.values(bags, { (w[1] + w[2]):totable(), (w[4] + w[5] + w[4] + w[3] + w[2]):totable() }, 1e-5, "sum")
  eb.mode = "mean"
  H.values(eb(I({ { 1, 2 }, { 3, 3 } })), { ((w[1] + w[2]) / 2):totable(), w[3]:totable() }, 1e-6, "mean")
  eb.mode = "max"
  H.values(eb(I({ 1, 2, 3 }), I({ 1, 2 })), { w[1]:totable(), tide.maximum(w[2], w[3]):totable() }, 0, "max")
  eb.mode = "mean"
  H.values(eb(I({ 1, 2, 3 }), I({ 1, 4 })), { ((w[1] + w[2] + w[3]) / 3):totable(), { 0, 0, 0 } }, 1e-6,
           "an empty bag")
  local losses = {
    { nn.SmoothL1Loss(), F.smooth_l1_loss }, { nn.HuberLoss(), F.huber_loss },
    { nn.MarginRankingLoss({ margin = 0.1 }), F.margin_ranking_loss, 3 },
    { nn.TripletMarginLoss(), F.triplet_margin_loss, 3 },
  }
  local a, b, c = tide.randn(4, 5), tide.randn(4, 5), tide.randn(4, 5)
  for k, l in ipairs(losses) do
    local got = l[3] and l[1](a, b, c) or l[1](a, b)
    local want = l[3] and l[2](a, b, c, l[1].opts) or l[2](a, b)
    H.near(got:item(), want:item(), 1e-6, "loss module " .. k)
  end
  local p = tide.rand(4, 5) * 0.8 + 0.1
  H.near(nn.BCELoss()(p, p):item(), F.binary_cross_entropy(p, p):item(), 1e-6, "BCELoss")
  local lp = tide.log_softmax(tide.randn(4, 5), 2)
  H.near(nn.KLDivLoss({ reduction = "batchmean" })(lp, lp:exp()):item(), 0, 1e-6, "KLDivLoss of equal")
  local ctc = nn.CTCLoss({ reduction = "sum" })
  local lps = tide.log_softmax(tide.randn(4, 1, 3), 3)
  H.ok(ctc(lps, I({ { 2 } }), { 4 }, { 1 }):item() > 0, "CTCLoss")
end)

H.test("errors name the op, the shapes and the dtypes", function()
  local x = tide.randn(2, 4, 3, 3)
  H.raises(function() return F.group_norm(x, 3) end, "group_norm", "4 channels", "3 groups", "[2, 4, 3, 3]")
  H.raises(function() return F.group_norm(x:long(), 2) end, "group_norm", "int64")
  H.raises(function() return F.group_norm(x, 2, tide.ones(3)) end, "group_norm", "weight", "[3]")
  H.raises(function() return F.instance_norm(tide.randn(4, 3)) end, "instance_norm", "[4, 3]")
  H.raises(function() return F.interpolate(x, { size = { 2, 2 }, mode = "linear" }) end,
           "interpolate", "linear", "bilinear")
  H.raises(function() return F.interpolate(x, { size = 2, scale_factor = 2 }) end, "interpolate", "exactly one")
  H.raises(function() return F.interpolate(x, { size = 2, scale = 2 }) end, "interpolate", "unknown option 'scale'")
  H.raises(function() return F.interpolate(x:long(), { size = 2 }) end, "interpolate", "int64")
  H.raises(function() return F.interpolate(tide.randn(3, 3), { size = 2 }) end, "interpolate", "3, 3")
  H.raises(function() return F.interpolate(x, { size = 2, align_corners = true }) end, "align_corners")
  H.raises(function() return F.pad(x, { 3, 3 }, "reflect") end, "pad", "reflect", "(3, 3)", "dim -1 of size 3",
           "[2, 4, 3, 3]")
  H.raises(function() return F.pad(x, { 4, 0 }, "circular") end, "pad", "circular")
  H.raises(function() return F.pad(x, { 1 }, "replicate") end, "pad", "even")
  H.raises(function() return F.pad(x, { 1, 1 }, "mirror") end, "pad: mode", "reflect", "mirror")
  H.raises(function() return F.pixel_shuffle(x, 3) end, "pixel_shuffle", "divisible", "[2, 4, 3, 3]")
  H.raises(function() return F.pixel_unshuffle(x, 2) end, "pixel_unshuffle", "divisible")
  H.raises(function() return F.pixel_shuffle(tide.ones(4, 4), 2) end, "pixel_shuffle", "3 dims")
  H.raises(function() return F.smooth_l1_loss(x, tide.randn(2, 4)) end, "smooth_l1_loss", "[2, 4, 3, 3]", "[2, 4]")
  H.raises(function() return F.huber_loss(x, x, { reduction = "avg" }) end, "huber_loss", "avg")
  H.raises(function() return F.kl_div(x, x, { bogus = 1 }) end, "kl_div", "bogus")
  H.raises(function() return F.multi_margin_loss(tide.randn(3, 4), I({ 1, 2 })) end, "multi_margin_loss",
           "[3, 4]", "[2]")
  H.raises(function() return F.ctc_loss(tide.randn(3, 4), I({ 1 }), { 3 }, { 1 }) end, "ctc_loss", "[T, N, C]")
  H.raises(function() return F.ctc_loss(tide.randn(3, 1, 4), I({ { 1 } }), { 5 }, { 1 }) end, "ctc_loss",
           "input length 5")
  H.raises(function() return F.ctc_loss(tide.randn(3, 1, 4), I({ { 1 } }), { 3 }, { 1 }, { blank = 5 }) end,
           "ctc_loss", "blank 5")
  H.raises(function() return F.grid_sample(x, tide.randn(2, 3, 3, 3)) end, "grid_sample", "[2, 3, 3, 3]")
  H.raises(function() return F.grid_sample(x, tide.randn(2, 3, 3, 2):double()) end, "grid_sample", "float64")
  H.raises(function() return F.grid_sample(x, tide.randn(2, 3, 3, 2), { mode = "area" }) end, "grid_sample",
           "mode", "area")
  H.raises(function() return F.grid_sample(x, tide.randn(2, 3, 3, 2), { padding_mode = "wrap" }) end,
           "grid_sample", "padding_mode", "wrap")
  H.raises(function() return F.grid_sample(x, tide.randn(2, 3, 3, 2), { align = true }) end, "grid_sample",
           "unknown option 'align'")
  H.raises(function() return F.adaptive_max_pool2d(tide.randn(3), 2) end, "adaptive_max_pool2d", "[3]")
  H.raises(function() return F.bilinear(tide.randn(2, 3), tide.randn(2, 3), tide.randn(4, 3, 2)) end,
           "bilinear", "[4, 3, 2]")
  H.raises(function() return F.dropout2d(tide.randn(3, 3)) end, "dropout2d", "[3, 3]")
  H.raises(function() return nn.GroupNorm(3, 4) end, "GroupNorm", "divisible")
  H.raises(function() return nn.EmbeddingBag(3, 2, { mode = "median" }) end, "EmbeddingBag", "median")
end)

H.done()
