-- test_autocast.lua — mixed precision: tide.autocast (which ops change dtype, nesting, the state
-- restored after errors), gradients through autocast equal to the same computation with the
-- casts written by hand (bitwise: the same ops on the same rounded operands), the same jitted
-- function inside and outside autocast against eager in each mode (bitwise, one compile per
-- mode), and tide.amp.GradScaler's values (PyTorch's rules).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local F = require "tide.nn.functional"
local optim = require "tide.optim"

local function bitwise(got, want, what)
  H.eq(got.dtype, want.dtype, what .. " dtype")
  H.eq(got:double():totable(), want:double():totable(), what)
end

H.test("autocast: the ops it lowers and the ops it keeps in float32", function()
  tide.manual_seed(1)
  local x, w = tide.randn(4, 8), tide.randn(3, 8)
  local img, k = tide.randn(2, 3, 6, 6), tide.randn(4, 3, 3, 3)
  local q = tide.randn(2, 5, 8)
  local h = tide.randn(4, 8):bfloat16()
  local target = tide.tensor({ 1, 2, 3, 1 })
  tide.autocast("bfloat16", function()
    H.eq(tide.get_autocast(), "bfloat16")
    H.eq(x:matmul(w:t()).dtype, "bfloat16", "matmul")
    H.eq(F.linear(x, w, tide.randn(3)).dtype, "bfloat16", "linear with a float32 bias")
    H.eq(F.conv2d(img, k, tide.randn(4)).dtype, "bfloat16", "conv2d")
    H.eq(F.scaled_dot_product_attention(q, q, q, { is_causal = true }).dtype, "bfloat16", "sdpa")
    H.eq(x:double():matmul(w:double():t()).dtype, "float64", "float64 is left alone")
    H.eq((x + x).dtype, "float32", "elementwise ops are not autocast")
    H.eq(F.softmax(h, -1).dtype, "float32", "softmax")
    H.eq(F.log_softmax(h, -1).dtype, "float32", "log_softmax")
    H.eq(tide.logsumexp(h, -1).dtype, "float32", "logsumexp")
    H.eq(F.layer_norm(h, { 8 }, tide.ones(8), tide.zeros(8)).dtype, "float32", "layer_norm")
    H.eq(F.cross_entropy(h:narrow(2, 1, 3), target).dtype, "float32", "cross_entropy")
    H.eq(F.mse_loss(h, x).dtype, "float32", "mse_loss")
    H.eq(F.binary_cross_entropy_with_logits(h, x:sigmoid()).dtype, "float32", "bce")
  end)
  H.eq(tide.get_autocast(), nil, "off again after")
  H.eq(x:matmul(w:t()).dtype, "float32", "off: matmul in float32")
  H.eq(F.softmax(h, -1).dtype, "bfloat16", "off: softmax keeps bfloat16")
  tide.autocast("float16", function()
    H.eq(x:matmul(h:t()).dtype, "float16", "bfloat16 and float32 operands both go to float16")
  end)
end)

H.test("autocast: results, nesting, off inside, restored after an error", function()
  local r1, r2 = tide.autocast("half", function(a, b) return a + b, tide.get_autocast() end, 1, 2)
  H.eq(r1, 3)
  H.eq(r2, "float16")
  tide.autocast("bfloat16", function()
    tide.autocast("float16", function() H.eq(tide.get_autocast(), "float16") end)
    H.eq(tide.get_autocast(), "bfloat16", "inner restored the outer")
    tide.autocast(nil, function() H.eq(tide.get_autocast(), nil, "nil turns it off") end)
    tide.autocast("float32", function() H.eq(tide.get_autocast(), nil, "float32 too") end)
    local ok, err = pcall(tide.autocast, "float16", function() error("boom") end)
    H.ok(not ok and tostring(err):find("boom", 1, true), "the error goes through")
    H.eq(tide.get_autocast(), "bfloat16", "restored after the error")
  end)
  H.eq(tide.get_autocast(), nil)
  local ok, err = pcall(tide.autocast, "int32", function() end)
  H.ok(not ok and tostring(err):find("autocast: the dtype must be", 1, true), tostring(err))
  ok, err = pcall(tide.autocast, "bfloat16", 5)
  H.ok(not ok and tostring(err):find("expected a function", 1, true), tostring(err))
end)

-- Leaves x, w, b (float32) and the loss of f under autocast, or of f on their casts written by
-- hand: the same ops on the same rounded operands, so every value and gradient is bitwise equal.
local function grads_both_ways(make, f, cast_args)
  local function run(autocast)
    tide.manual_seed(7)
    local leaves = make()
    for _, t in ipairs(leaves) do t:requires_grad_() end
    local loss
    if autocast then
      loss = tide.autocast("bfloat16", f, table.unpack(leaves))
    else
      local cast = {}
      for i, t in ipairs(leaves) do cast[i] = cast_args[i] and t:bfloat16() or t end
      loss = f(table.unpack(cast))
    end
    loss:backward()
    return loss, leaves
  end
  local l1, p1 = run(true)
  local l2, p2 = run(false)
  bitwise(l1, l2, "loss")
  for i = 1, #p1 do
    H.eq(p1[i].grad.dtype, "float32", "grad " .. i .. " is float32")
    bitwise(p1[i].grad, p2[i].grad, "grad " .. i)
  end
end

H.test("autocast: linear + mse_loss gradients equal the hand-cast float32 computation", function()
  grads_both_ways(function() return { tide.randn(6, 8), tide.randn(5, 8), tide.randn(5), tide.randn(6, 5) } end,
    function(x, w, b, t)
      -- under autocast mse_loss casts the bfloat16 prediction up; by hand it is written out
      return F.mse_loss(F.linear(x, w, b):float(), t)
    end, { true, true, true, false })
end)

H.test("autocast: conv2d + cross_entropy gradients equal the hand-cast computation", function()
  grads_both_ways(function() return { tide.randn(2, 3, 5, 5), tide.randn(4, 3, 3, 3), tide.randn(4) } end,
    function(x, k, b)
      local y = F.conv2d(x, k, b, { padding = 1 })
      local logits = y:mean({ 3, 4 })
      return F.cross_entropy(logits:float(), tide.tensor({ 2, 4 }))
    end, { true, true, true })
end)

H.test("autocast: attention gradients equal the hand-cast computation", function()
  grads_both_ways(function() return { tide.randn(2, 4, 8), tide.randn(2, 6, 8), tide.randn(2, 6, 8) } end,
    function(q, k, v)
      local o = F.scaled_dot_product_attention(q, k, v)
      return (o:float() * o:float()):sum()
    end, { true, true, true })
end)

H.test("autocast: a matmul's gradient is the float32 product of the rounded operands, rounded", function()
  tide.manual_seed(3)
  local x = tide.randn(5, 7):requires_grad_()
  local w = tide.randn(7, 4):requires_grad_()
  local g = tide.randn(5, 4)
  local y = tide.autocast("bfloat16", function() return x:matmul(w) end)
  H.eq(y.dtype, "bfloat16")
  -- y rounded to bfloat16, so its gradient (g) reaches the product as bfloat16 too
  y:backward(g:bfloat16())
  local gb, xb, wb = g:bfloat16():float(), x:detach():bfloat16():float(), w:detach():bfloat16():float()
  bitwise(y, xb:matmul(wb):bfloat16(), "forward")
  bitwise(x.grad, gb:matmul(wb:t()):bfloat16():float(), "grad of x")
  bitwise(w.grad, xb:t():matmul(gb):bfloat16():float(), "grad of w")
end)

H.test("gelu and silu on half compute in float32 and round once (the GPT MLP under autocast)", function()
  tide.manual_seed(4)
  local x = tide.randn(3, 50) * 3
  for _, dt in ipairs({ "bfloat16", "float16" }) do
    local h = x:to(dt)
    bitwise(F.gelu(h), F.gelu(h:float()):to(dt), "gelu " .. dt)
    bitwise(F.gelu(h, { approximate = "tanh" }), F.gelu(h:float(), { approximate = "tanh" }):to(dt),
      "gelu tanh " .. dt)
    bitwise(F.silu(h), F.silu(h:float()):to(dt), "silu " .. dt)
  end
  local p = x:clone():requires_grad_()
  tide.autocast("bfloat16", function() return F.gelu(p:matmul(tide.eye(50))) end):float():sum():backward()
  H.eq(p.grad.dtype, "float32")
end)

H.test("autocast: backward runs with autocast off (a loss made outside, backward inside)", function()
  local p = tide.randn(3, 3):requires_grad_()
  local loss = F.softmax(p:bfloat16(), -1):sum()
  tide.autocast("bfloat16", function() loss:backward() end)
  H.eq(p.grad.dtype, "float32")
end)

H.test("autocast under jit: each mode equals its eager result, one compile per mode", function()
  tide.manual_seed(5)
  local x, w, b = tide.randn(9, 13), tide.randn(11, 13), tide.randn(11)
  local function f(a, m, c) return F.log_softmax(F.linear(a, m, c), -1):sum(-1) end
  local jf = tide.jit(f)
  local eager_off = f(x, w, b)
  local eager_on = tide.autocast("bfloat16", f, x, w, b)
  H.eq(eager_on.dtype, "float32")
  H.ok(not tide.equal(eager_on, eager_off), "the modes differ (or the test shows nothing)")
  for rep = 1, 3 do
    bitwise(jf(x, w, b), eager_off, "jit off, call " .. rep)
    bitwise(tide.autocast("bfloat16", jf, x, w, b), eager_on, "jit bfloat16, call " .. rep)
  end
  local s = jf:stats()
  H.eq(s.compiles, 2, "one plan per mode")
  H.ok(s.hits >= 4, "later calls hit: " .. s.hits)
end)

H.test("autocast under jit: a training step (linear, gelu, layer_norm, cross_entropy, SGD) equals eager", function()
  local nn = require "tide.nn"
  local function make()
    tide.manual_seed(9)
    local m = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 5))
    local opt = optim.SGD(m:parameters(), { lr = 0.1, momentum = 0.9 })
    return m, function(x, y)
      opt:zero_grad()
      local loss = tide.autocast("bfloat16", function() return F.cross_entropy(m(x), y) end)
      loss:backward()
      opt:step()
      return loss
    end
  end
  local me, step_e = make()
  local mj, step_j = make()
  step_j = tide.jit(step_j)
  tide.manual_seed(10)
  local x, y = tide.randn(20, 12), tide.randint(1, 6, { 20 })
  for i = 1, 4 do
    bitwise(step_j(x, y), step_e(x, y), "loss " .. i)
  end
  local pe, pj = me:parameters(), mj:parameters()
  for i = 1, #pe do bitwise(pj[i], pe[i], "parameter " .. i) end
end)

-- ---- GradScaler ---------------------------------------------------------------------------

local function f32(x) return (string.unpack("f", string.pack("f", x))) end

-- p (float32 leaf) and an SGD over it with grad c * scale after scaler:scale(loss):backward().
local function setup(scaler, c, lr)
  local p = tide.tensor({ 0.5, -1.25, 2.0 }, { requires_grad = true })
  local opt = optim.SGD({ p }, { lr = lr or 0.5 })
  local loss = (p * tide.tensor(c)):sum()
  scaler:scale(loss):backward()
  return p, opt
end

H.test("GradScaler: scale and unscale_ values (a power of two and 3)", function()
  local s = tide.amp.GradScaler()
  H.eq(s:get_scale(), 65536.0)
  local c = { 0.3, -0.7, 1.1 }
  local p = setup(s, c)
  local want = {}
  for i = 1, 3 do want[i] = f32(f32(c[i]) * 65536) end
  H.eq(p.grad:double():totable(), want, "scaled grads (exact: a power of two)")
  s:unscale_(optim.SGD({ p }, { lr = 0.1 }))
  for i = 1, 3 do want[i] = f32(c[i]) end
  H.eq(p.grad:double():totable(), want, "unscaled grads")
  -- scale 3: grads are f32(c*3) times 1/3 rounded to float32, each product rounded once
  local s3 = tide.amp.GradScaler({ init_scale = 3 })
  local p3, opt3 = setup(s3, c)
  s3:unscale_(opt3)
  local inv = f32(1 / 3)
  for i = 1, 3 do want[i] = f32(f32(f32(c[i]) * 3) * inv) end
  H.eq(p3.grad:double():totable(), want, "1/3 rounded to float32, as PyTorch")
  local ok, err = pcall(s3.unscale_, s3, opt3)
  H.ok(not ok and tostring(err):find("already called", 1, true), tostring(err))
end)

H.test("GradScaler: step unscales first and steps; inf or NaN skips it and backs off", function()
  local s = tide.amp.GradScaler({ init_scale = 1024, growth_interval = 3 })
  local c = { 0.25, -0.5, 1.0 }
  local p, opt = setup(s, c, 0.5)
  s:step(opt)
  H.eq(p:double():totable(), { 0.5 - 0.125, -1.25 + 0.25, 2.0 - 0.5 }, "an SGD step on c")
  s:update()
  H.eq(s:get_scale(), 1024.0, "one good step of 3: unchanged")
  for _, bad in ipairs({ math.huge, -math.huge, 0 / 0 }) do
    local before = p:clone()
    opt:zero_grad()
    p.grad = tide.tensor({ 1, bad, 2 })
    H.eq(s:step(opt), nil, "skipped")
    H.eq(p:totable(), before:totable(), "parameters untouched by a skipped step")
    local was = s:get_scale()
    s:update()
    H.eq(s:get_scale(), was * 0.5, "backed off")
  end
  H.eq(s:get_scale(), 128.0)
end)

H.test("GradScaler: grows after growth_interval good steps in a row", function()
  local s = tide.amp.GradScaler({ init_scale = 8, growth_factor = 3, growth_interval = 2 })
  local p, opt = setup(s, { 1, 1, 1 })
  local function good_step()
    opt:zero_grad()
    s:scale((p * 1):sum()):backward()
    s:step(opt)
    s:update()
  end
  good_step()
  H.eq(s:get_scale(), 8.0)
  good_step()
  H.eq(s:get_scale(), 24.0, "grown after 2")
  good_step()
  opt:zero_grad()
  p.grad = tide.tensor({ 0 / 0, 0, 0 })
  s:step(opt)
  s:update()
  H.eq(s:get_scale(), 12.0, "a bad step resets the count and backs off")
  good_step()
  H.eq(s:get_scale(), 12.0, "counting again from 0")
  good_step()
  H.eq(s:get_scale(), 36.0)
  H.eq(s:state_dict()._growth_tracker, 0)
end)

H.test("GradScaler: a float16 autocast training loop backs off from overflow, then learns", function()
  tide.manual_seed(2)
  local nn = require "tide.nn"
  local m = nn.Linear(8, 1)
  local x = tide.randn(64, 8)
  local t = x:matmul(tide.randn(8, 1)) * 100 -- large targets: the scaled float16 grads overflow
  local opt = optim.SGD(m:parameters(), { lr = 0.01 })
  local s = tide.amp.GradScaler()
  local first, last, skipped = nil, nil, 0
  for _ = 1, 40 do
    opt:zero_grad()
    local loss = tide.autocast("float16", function() return F.mse_loss(m(x), t) end)
    H.eq(loss.dtype, "float32", "the loss is float32")
    s:scale(loss):backward()
    for _, p in ipairs(m:parameters()) do H.eq(p.grad.dtype, "float32") end
    s:step(opt)
    local before = s:get_scale()
    s:update()
    skipped = skipped + (s:get_scale() < before and 1 or 0) -- backed off: the step was skipped
    first = first or loss:item()
    last = loss:item()
  end
  H.ok(skipped > 0, "some steps overflowed and were skipped")
  H.ok(s:get_scale() < 65536, "the scale came down: " .. s:get_scale())
  H.ok(last < 0.5 * first, ("the loss fell: %g -> %g"):format(first, last))
  for _, p in ipairs(m:parameters()) do H.eq(p.dtype, "float32", "master weights stay float32") end
end)

H.test("GradScaler: disabled, and bad options", function()
  local s = tide.amp.GradScaler({ enabled = false })
  local x = tide.tensor({ 2.0 })
  H.ok(s:scale(x) == x, "scale returns its argument")
  H.eq(s:get_scale(), 1.0)
  local ok, err = pcall(tide.amp.GradScaler, { growth_factor = 0.5 })
  H.ok(not ok and tostring(err):find("growth_factor", 1, true), tostring(err))
  ok, err = pcall(tide.amp.GradScaler, { init_scal = 2 })
  H.ok(not ok and tostring(err):find("unknown option init_scal", 1, true), tostring(err))
  local s2 = tide.amp.GradScaler()
  ok, err = pcall(s2.update, s2)
  H.ok(not ok and tostring(err):find("no inf checks", 1, true), tostring(err))
end)

H.done()
