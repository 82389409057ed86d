-- test_optim.lua — tide.optim against updates computed by hand in Lua doubles (PyTorch's
-- formulas): SGD (momentum, dampening, nesterov, weight decay, maximize), Adam (amsgrad), AdamW;
-- parameter groups, opt.lr, state_dict round trips (also through tide.save), schedulers.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local optim = require "tide.optim"

local P0 = { 0.5, -1.25, 2.0 }
local C = { 0.3, -0.7, 1.1 }

-- loss(p) = sum(c * p) + 0.5 * sum(p^2) * k: grad = c + k * p (changes as p moves)
local K = 0.8
local function loss_of(p)
  local c = tide.tensor(C, { dtype = "float64" })
  return (p * c):sum() + (p * p):sum() * (0.5 * K)
end
local function grad_ref(p)
  local g = {}
  for i = 1, #p do g[i] = C[i] + K * p[i] end
  return g
end

-- Runs `steps` steps of opt_ctor on a float64 copy of P0; returns the parameter.
local function run(ctor, opts, steps)
  local p = tide.tensor(P0, { dtype = "float64", requires_grad = true })
  local opt = ctor({ p }, opts)
  for _ = 1, steps do
    opt:zero_grad()
    loss_of(p):backward()
    opt:step()
  end
  return p, opt
end

local function sgd_ref(o, steps)
  local p = { table.unpack(P0) }
  local buf
  for _ = 1, steps do
    local g = grad_ref(p)
    if o.maximize then for i = 1, #g do g[i] = -g[i] end end
    for i = 1, #p do g[i] = g[i] + (o.weight_decay or 0) * p[i] end
    if (o.momentum or 0) ~= 0 then
      if not buf then
        buf = { table.unpack(g) }
      else
        for i = 1, #p do buf[i] = o.momentum * buf[i] + (1 - (o.dampening or 0)) * g[i] end
      end
      for i = 1, #p do
        g[i] = o.nesterov and g[i] + o.momentum * buf[i] or buf[i]
      end
    end
    for i = 1, #p do p[i] = p[i] - o.lr * g[i] end
  end
  return p
end

local function adam_ref(o, steps, decoupled)
  local p = { table.unpack(P0) }
  local m, v, vmax = { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 }
  local b1, b2 = table.unpack(o.betas or { 0.9, 0.999 })
  local eps, wd = o.eps or 1e-8, o.weight_decay or (decoupled and 1e-2 or 0)
  for t = 1, steps do
    local g = grad_ref(p)
    for i = 1, #p do
      if decoupled then
        p[i] = p[i] * (1 - o.lr * wd)
      else
        g[i] = g[i] + wd * p[i]
      end
      m[i] = b1 * m[i] + (1 - b1) * g[i]
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i]
      vmax[i] = math.max(vmax[i], v[i])
      local vv = o.amsgrad and vmax[i] or v[i]
      local bc1, bc2 = 1 - b1 ^ t, 1 - b2 ^ t
      p[i] = p[i] - (o.lr / bc1) * m[i] / (math.sqrt(vv) / math.sqrt(bc2) + eps)
    end
  end
  return p
end

local sgd_cases = {
  { lr = 0.1 },
  { lr = 0.1, momentum = 0.9 },
  { lr = 0.05, momentum = 0.9, dampening = 0.3 },
  { lr = 0.05, momentum = 0.8, nesterov = true },
  { lr = 0.1, momentum = 0.5, weight_decay = 0.01 },
  { lr = 0.1, weight_decay = 0.1, maximize = true },
}
for _, o in ipairs(sgd_cases) do
  local keys = {}
  for k, v in pairs(o) do keys[#keys + 1] = k .. "=" .. tostring(v) end
  table.sort(keys)
  H.test("SGD " .. table.concat(keys, " ") .. ": 5 steps against hand-computed updates", function()
    local p = run(optim.SGD, o, 5)
    H.values(p, sgd_ref(o, 5), 1e-12)
  end)
end

H.test("Adam: 6 steps against hand-computed updates (plain, weight decay, amsgrad)", function()
  local o = { lr = 0.01 }
  H.values(run(optim.Adam, o, 6), adam_ref(o, 6, false), 1e-12)
  o = { lr = 0.05, betas = { 0.8, 0.99 }, eps = 1e-6, weight_decay = 0.1 }
  H.values(run(optim.Adam, o, 6), adam_ref(o, 6, false), 1e-12)
  o = { lr = 0.05, amsgrad = true }
  local p, opt = run(optim.Adam, o, 6)
  H.values(p, adam_ref(o, 6, false), 1e-12)
  local st = opt.state[p]
  H.ok(tide.is_tensor(st.step) and st.step:dim() == 0, "the step count is a 0-dim tensor")
  H.eq(st.step:item(), 6)
  -- float32 parameters: the float64 step tensor does not widen them
  local q = tide.tensor(P0, { dtype = "float32", requires_grad = true })
  local opt32 = optim.Adam({ q }, { lr = 0.01 })
  for _ = 1, 6 do
    opt32:zero_grad()
    loss_of(q:double()):backward()
    opt32:step()
  end
  H.eq(q.dtype, "float32")
  H.values(q, adam_ref({ lr = 0.01 }, 6, false), 1e-6)
end)

H.test("AdamW: decoupled weight decay (default 1e-2 and 0.2)", function()
  local o = { lr = 0.01 }
  H.values(run(optim.AdamW, o, 6), adam_ref(o, 6, true), 1e-12)
  o = { lr = 0.02, weight_decay = 0.2 }
  H.values(run(optim.AdamW, o, 6), adam_ref(o, 6, true), 1e-12)
end)

H.test("float32 parameters stay float32; a parameter without grad is skipped", function()
  local p = tide.tensor({ 1, 2 }, { dtype = "float32", requires_grad = true })
  local q = tide.tensor({ 3, 4 }, { dtype = "float32", requires_grad = true })
  local opt = optim.SGD({ p, q }, { lr = 0.5 })
  ;(p * p):sum():backward()
  opt:step()
  H.eq(p.dtype, "float32")
  H.values(p, { 0, 0 }, 1e-7)
  H.values(q, { 3, 4 })
  H.ok(p.is_leaf and p.requires_grad, "still a leaf that requires grad")
end)

H.test("parameter groups, opt.lr and errors", function()
  local a = tide.tensor({ 1.0 }, { dtype = "float64", requires_grad = true })
  local b = tide.tensor({ 1.0 }, { dtype = "float64", requires_grad = true })
  local opt = optim.SGD({ { params = { a } }, { params = { b }, lr = 0.5 } }, { lr = 0.1 })
  H.eq(opt.param_groups[1].lr, 0.1)
  H.eq(opt.param_groups[2].lr, 0.5)
  H.eq(opt.lr, 0.1)
  ;(a * 2 + b * 2):sum():backward()
  opt:step()
  H.values(a, { 0.8 }, 1e-12)
  H.values(b, { 0.0 }, 1e-12)
  opt.lr = 0.25
  H.eq(opt.param_groups[2].lr, 0.25)
  opt:zero_grad()
  H.eq(a.grad, nil)
  H.raises(function() optim.SGD({ a }, { lr = 0.1, momentun = 0.9 }) end, "unknown option 'momentun'")
  H.raises(function() optim.SGD({ a }, { lr = 0.1, nesterov = true }) end, "nesterov")
  H.raises(function() optim.SGD({ a, 3 }) end, "parameter 2", "not a tensor")
  H.raises(function() optim.SGD({}) end, "empty parameter list")
  H.raises(function() optim.Adam({ a }, { betas = { 1.5, 0.9 } }) end, "betas")
  H.raises(function() optim.SGD({ a, a }) end, "more than once")
  H.raises(function() optim.SGD({ tide.tensor({ 1, 2 }) }) end, "floating-point")
end)

H.test("state_dict round trip: a resumed run matches an uninterrupted one (also via tide.save)",
       function()
  for _, ctor in ipairs({ optim.SGD, optim.Adam }) do
    local opts = ctor == optim.SGD and { lr = 0.05, momentum = 0.9 } or { lr = 0.02 }
    local full = run(ctor, opts, 6)
    local p, opt = run(ctor, opts, 3)
    local sd = opt:state_dict()
    H.ok(sd.state[1] ~= nil and sd.param_groups[1].params[1] == 1, "1-based positions")
    -- through a file: tensors and metadata
    local path = os.tmpname()
    tide.save(path, sd)
    local tensors, meta = tide.load(path)
    os.remove(path)
    local q = tide.tensor(p:totable(), { dtype = "float64", requires_grad = true })
    local opt2 = ctor({ q }, { lr = 0.5 }) -- the lr comes back from the state
    opt2:load_state_dict(tensors, meta)
    H.eq(opt2.lr, opts.lr)
    for _ = 1, 3 do
      opt2:zero_grad()
      loss_of(q):backward()
      opt2:step()
    end
    H.values(q, full:totable(), 1e-12)
    -- and directly from the nested table
    local r = tide.tensor(p:totable(), { dtype = "float64", requires_grad = true })
    local opt3 = ctor({ r }, opts)
    opt3:load_state_dict(opt:state_dict())
    for _ = 1, 3 do
      opt3:zero_grad()
      loss_of(r):backward()
      opt3:step()
    end
    H.values(r, full:totable(), 1e-12)
  end
  local a = tide.tensor({ 1.0 }, { requires_grad = true })
  local opt = optim.SGD({ a }, { lr = 0.1 })
  H.raises(function() opt:load_state_dict({ state = {}, param_groups = {} }) end,
           "parameter groups")
end)

H.test("StepLR and CosineAnnealingLR", function()
  local p = tide.tensor({ 1.0 }, { requires_grad = true })
  local opt = optim.SGD({ p }, { lr = 0.1 })
  local s = optim.StepLR(opt, 2, { gamma = 0.5 })
  local lrs = { opt.lr }
  for _ = 1, 5 do
    s:step()
    lrs[#lrs + 1] = opt.lr
  end
  H.values(tide.tensor(lrs, { dtype = "float64" }), { 0.1, 0.1, 0.05, 0.05, 0.025, 0.025 }, 1e-15)
  H.eq(s:get_last_lr(), { opt.lr })

  local opt2 = optim.SGD({ p }, { lr = 1.0 })
  local c = optim.lr_scheduler.CosineAnnealingLR(opt2, 4, { eta_min = 0.2 })
  local got = { opt2.lr }
  for _ = 1, 4 do
    c:step()
    got[#got + 1] = opt2.lr
  end
  local want = {}
  for e = 0, 4 do want[#want + 1] = 0.2 + 0.8 * (1 + math.cos(math.pi * e / 4)) / 2 end
  H.values(tide.tensor(got, { dtype = "float64" }), want, 1e-14)
  -- state_dict round trip
  local sd = c:state_dict()
  H.eq(sd.last_epoch, 4)
  local opt3 = optim.SGD({ p }, { lr = 1.0 })
  local c3 = optim.CosineAnnealingLR(opt3, 4, { eta_min = 0.2 })
  c3:load_state_dict(sd)
  H.near(opt3.lr, 0.2, 1e-14)
  H.raises(function() optim.StepLR(opt, 0) end, "step_size")
  H.raises(function() optim.StepLR({}, 1) end, "expected an optimizer")
end)

H.done()
