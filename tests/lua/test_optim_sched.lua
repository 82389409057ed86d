-- test_optim_sched.lua — LambdaLR and LinearLR against PyTorch's formulas written out, schedulers
-- acting on every parameter group, and AdamW parameter groups (weight decay in one group only)
-- against updates computed by hand in Lua doubles.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local optim = require "tide.optim"

local function param(v)
  return tide.tensor(v, { dtype = "float64", requires_grad = true })
end

local function lrs_over(sched, opt, epochs, group)
  local got = { opt.param_groups[group or 1].lr }
  for _ = 1, epochs do
    sched:step()
    got[#got + 1] = opt.param_groups[group or 1].lr
  end
  return tide.tensor(got, { dtype = "float64" })
end

H.test("LambdaLR: lr = base_lr * lr_lambda(epoch), one function or one per group", function()
  local opt = optim.SGD({ { params = { param({ 1.0 }) } },
                         { params = { param({ 2.0 }) }, lr = 0.5 } },
                        { lr = 0.1 })
  local s = optim.lr_scheduler.LambdaLR(opt, function(e) return 0.9 ^ e end)
  H.ok(optim.LambdaLR == optim.lr_scheduler.LambdaLR, "also optim.LambdaLR")
  local w1, w2 = {}, {}
  for e = 0, 4 do
    w1[#w1 + 1] = 0.1 * 0.9 ^ e
    w2[#w2 + 1] = 0.5 * 0.9 ^ e
  end
  H.values(lrs_over(s, opt, 4), w1, 1e-15)
  H.near(opt.param_groups[2].lr, w2[5], 1e-15)
  H.eq(#s:get_last_lr(), 2)
  H.near(s:get_last_lr()[2], w2[5], 1e-15)

  local opt2 = optim.SGD({ { params = { param({ 1.0 }) } }, { params = { param({ 2.0 }) } } },
                         { lr = 1.0 })
  local s2 = optim.LambdaLR(opt2, { function(e) return 1 / (e + 1) end,
                                    function(e) return e + 1 end })
  H.values(lrs_over(s2, opt2, 3, 1), { 1, 1 / 2, 1 / 3, 1 / 4 }, 1e-15)
  H.eq(opt2.param_groups[2].lr, 4)
  -- state_dict keeps the epoch, not the functions
  local sd = s2:state_dict()
  H.eq(sd.last_epoch, 3)
  H.eq(sd._lr_lambdas, nil)
end)

H.test("LinearLR: base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters)",
       function()
  local opt = optim.SGD({ param({ 1.0 }) }, { lr = 0.3 })
  local s = optim.lr_scheduler.LinearLR(opt)
  local want = {}
  for e = 0, 7 do
    want[#want + 1] = 0.3 * (1 / 3 + (1 - 1 / 3) * math.min(e, 5) / 5)
  end
  H.values(lrs_over(s, opt, 7), want, 1e-15)
  H.near(opt.lr, 0.3, 1e-15)

  local opt2 = optim.AdamW({ { params = { param({ 1.0 }) } },
                            { params = { param({ 2.0 }) }, lr = 0.2 } },
                           { lr = 0.1 })
  local s2 = optim.LinearLR(opt2, { start_factor = 1.0, end_factor = 0.25, total_iters = 3 })
  local w1, w2 = {}, {}
  for e = 0, 4 do
    local f = 1.0 + (0.25 - 1.0) * math.min(e, 3) / 3
    w1[#w1 + 1], w2[#w2 + 1] = 0.1 * f, 0.2 * f
  end
  H.values(lrs_over(s2, opt2, 4), w1, 1e-15)
  H.near(opt2.param_groups[2].lr, w2[5], 1e-15)

  H.raises(function() optim.LinearLR(opt, { start_factor = 0 }) end, "LinearLR", "start_factor")
  H.raises(function() optim.LinearLR(opt, { end_factor = 1.5 }) end, "LinearLR", "end_factor")
  H.raises(function() optim.LinearLR(opt, { total_iters = 0 }) end, "LinearLR", "total_iters")
  H.raises(function() optim.LinearLR(opt, { total = 3 }) end, "LinearLR", "unknown option 'total'")
  H.raises(function() optim.LinearLR(opt, 3) end, "LinearLR", "options must be a table")
end)

H.test("LambdaLR errors name the scheduler", function()
  local opt = optim.SGD({ { params = { param({ 1.0 }) } }, { params = { param({ 2.0 }) } } })
  H.raises(function() optim.LambdaLR(opt, 0.5) end, "LambdaLR", "lr_lambda", "2 functions")
  H.raises(function() optim.LambdaLR(opt, { function() return 1 end }) end, "LambdaLR", "1 entries")
  H.raises(function() optim.LambdaLR(opt, { function() return 1 end, 3 }) end,
           "LambdaLR", "lr_lambda 2", "not a function")
  H.raises(function() optim.LambdaLR(opt, function() return "x" end) end,
           "LambdaLR", "returned a string")
  H.raises(function() optim.LambdaLR({}, function() return 1 end) end, "LambdaLR", "optimizer")
end)

-- AdamW (PyTorch's formula) for one scalar parameter with gradient g(p) = c + p.
local function adamw_ref(p, c, lr, wd, steps)
  local m, v = 0, 0
  local b1, b2, eps = 0.9, 0.999, 1e-8
  for t = 1, steps do
    local g = c + p
    p = p * (1 - lr * wd)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    local denom = math.sqrt(v) / math.sqrt(1 - b2 ^ t) + eps
    p = p - lr / (1 - b1 ^ t) * m / denom
  end
  return p
end

H.test("AdamW parameter groups: weight decay only where the group asks", function()
  local a, b = param({ 0.5, -1.0 }), param({ 2.0 })
  local opt = optim.AdamW({ { params = { a }, weight_decay = 0.1 },
                           { params = { b }, weight_decay = 0 } },
                          { lr = 0.05 })
  H.eq(opt.param_groups[1].weight_decay, 0.1)
  H.eq(opt.param_groups[2].weight_decay, 0)
  H.eq(opt.param_groups[2].lr, 0.05)
  H.eq(opt.param_groups[1].betas[2], 0.999)
  for _ = 1, 5 do
    opt:zero_grad()
    -- loss = sum(0.3 * p + p^2 / 2): grad = 0.3 + p
    ;((a * 0.3):sum() + (a * a):sum() * 0.5 + (b * 0.3):sum() + (b * b):sum() * 0.5):backward()
    opt:step()
  end
  -- float64 throughout; a 5-step recurrence of a few ops: rounding ~1e-15
  H.values(a, { adamw_ref(0.5, 0.3, 0.05, 0.1, 5), adamw_ref(-1.0, 0.3, 0.05, 0.1, 5) }, 1e-12)
  H.values(b, { adamw_ref(2.0, 0.3, 0.05, 0, 5) }, 1e-12)
  H.ok(math.abs(adamw_ref(2.0, 0.3, 0.05, 0, 5) - adamw_ref(2.0, 0.3, 0.05, 0.1, 5)) > 1e-4,
       "the decay changes the result (the check above sees it)")
  -- the single-list form still works, with the default weight decay 1e-2
  local c = param({ 2.0 })
  local opt2 = optim.AdamW({ c }, { lr = 0.05 })
  for _ = 1, 5 do
    opt2:zero_grad()
    ;((c * 0.3):sum() + (c * c):sum() * 0.5):backward()
    opt2:step()
  end
  H.values(c, { adamw_ref(2.0, 0.3, 0.05, 1e-2, 5) }, 1e-12)
  H.raises(function() optim.AdamW({ { params = { param({ 1.0 }) }, decay = 0.1 } }) end,
           "AdamW", "unknown option 'decay'", "group 1")
end)

H.done()
