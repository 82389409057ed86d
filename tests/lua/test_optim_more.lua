-- test_optim_more.lua — RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam and LBFGS against
-- PyTorch 1.13 on a fixed small problem (tests/lua/data/optim_fixture.lua, from
-- scripts/gen_optim_fixture.py), plus defaults, state_dict round trips and errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local optim = require "tide.optim"

local here = arg[0]:match("(.*/)") or "./"
local FIX = dofile(here .. "data/optim_fixture.lua")

local function det(shape, seed, scale)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 0, n - 1 do v[i + 1] = math.sin(1.3 * seed + 0.71 * i) * (scale or 0.5) end
  return tide.tensor(v, { dtype = "float64" }):reshape(shape)
end

local X, Y = det({ 4, 3 }, 1, 1.0), det({ 4, 2 }, 2, 1.0)

local function loss_of(W, b)
  local r = X:matmul(W) + b - Y
  return (r * r):mean() + (W * W * W * W):sum() * 0.1
end

local function fresh()
  return det({ 3, 2 }, 3):requires_grad_(true), det({ 2 }, 4):requires_grad_(true)
end

local function run(name, opts, steps, opt_in)
  local W, b = fresh()
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  local opt = opt_in and opt_in(W, b) or optim[name]({ W, b }, o)
  local losses = {}
  for s = 1, steps do
    local loss = opt:step(function()
      opt:zero_grad()
      local l = loss_of(W, b)
      l:backward()
      return l
    end)
    losses[s] = loss:item()
  end
  return W, b, opt, losses
end

local function max_diff(t, want)
  local got = t:detach():reshape(-1):totable()
  local worst = 0
  for i = 1, #want do worst = math.max(worst, math.abs(got[i] - want[i])) end
  return worst
end

-- Same formulas in float64, a few steps: the differences are rounding (~1e-16 per op) in a
-- different order of operations; LBFGS's line search compares losses, which can amplify that
-- only where a test sits on an edge, which these cases do not. So 1e-12.
local TOL = 1e-12
-- NAdam: PyTorch keeps mu_product in a float32 tensor (torch.tensor(1.)), tide in a double, so
-- its step sizes differ by ~6e-8 relative; over these steps (each moving W by < 0.05) that is
-- < 1e-8.
local TOL_OF = { NAdam = 1e-8 }

for i, case in ipairs(FIX) do
  local label = ("%s #%d %s"):format(case.optim, i, H.show((function()
    local keys = {}
    for k in pairs(case.opts) do keys[#keys + 1] = k end
    table.sort(keys)
    return keys
  end)()))
  H.test("PyTorch 1.13: " .. label, function()
    local W, b, _, losses = run(case.optim, case.opts, case.steps)
    local dw, db = max_diff(W, case.W), max_diff(b, case.b)
    local tol = TOL_OF[case.optim] or TOL
    H.ok(dw < tol and db < tol, ("%s: max |tide - torch| W %.2e, b %.2e"):format(label, dw, db))
    for s = 1, case.steps do H.near(losses[s], case.losses[s], tol, "loss " .. s) end
  end)
end

H.test("defaults are PyTorch's", function()
  local p = tide.zeros(2):requires_grad_(true)
  local want = {
    RMSprop = { lr = 1e-2, alpha = 0.99, eps = 1e-8, momentum = 0, centered = false },
    Adagrad = { lr = 1e-2, lr_decay = 0, eps = 1e-10, initial_accumulator_value = 0 },
    Adadelta = { lr = 1.0, rho = 0.9, eps = 1e-6 },
    Adamax = { lr = 2e-3, eps = 1e-8 },
    NAdam = { lr = 2e-3, eps = 1e-8, momentum_decay = 4e-3 },
    RAdam = { lr = 1e-3, eps = 1e-8 },
    LBFGS = { lr = 1, max_iter = 20, max_eval = 25, tolerance_grad = 1e-7,
              tolerance_change = 1e-9, history_size = 100 },
  }
  for name, d in pairs(want) do
    local g = optim[name]({ p }).param_groups[1]
    for k, v in pairs(d) do H.eq(g[k], v, name .. "." .. k) end
    if name ~= "LBFGS" then H.eq(g.weight_decay, 0, name .. ".weight_decay") end
  end
end)

-- Three steps, a state_dict into a fresh optimizer (through tide.save for the tensor states),
-- two more steps: the same as five steps straight.
H.test("state_dict / load_state_dict resume the same trajectory", function()
  local cases = { RMSprop = { momentum = 0.9, centered = true }, Adagrad = { lr_decay = 0.1 },
                  Adadelta = {}, Adamax = {}, NAdam = {}, RAdam = {} }
  for name, opts in pairs(cases) do
    local W5, b5 = run(name, opts, 5)
    local W, b, opt = run(name, opts, 3)
    local path = os.tmpname()
    tide.save(path, opt:state_dict())
    local tensors, meta = tide.load(path)
    os.remove(path)
    local opt2 = optim[name]({ W, b }, opts)
    opt2:load_state_dict(tensors, meta)
    for _ = 1, 2 do
      opt2:zero_grad()
      loss_of(W, b):backward()
      opt2:step()
    end
    H.ok(max_diff(W, W5:reshape(-1):totable()) < 1e-15, name .. ": W after resuming")
    H.ok(max_diff(b, b5:reshape(-1):totable()) < 1e-15, name .. ": b after resuming")
  end
end)

-- A traced training step (tide.jit) against eager: the step-dependent factors (bias
-- corrections, NAdam's mu, RAdam's rectification and its branch) are Lua numbers that a plan
-- takes at run time, so the same float64 arithmetic: equal.
H.test("tide.jit: traced steps follow eager's trajectory", function()
  for _, name in ipairs({ "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam" }) do
    local res = {}
    for _, traced in ipairs({ false, true }) do
      local W, b = fresh()
      local opt = optim[name]({ W, b }, { lr = 0.05, lr_decay = name == "Adagrad" and 0.1 or nil })
      local function step()
        opt:zero_grad()
        local l = loss_of(W, b)
        l:backward()
        opt:step()
        return l
      end
      local f = traced and tide.jit(step) or step
      for _ = 1, 8 do f() end -- RAdam switches to the rectified update at step 6
      res[#res + 1] = W:detach():clone()
    end
    H.eq((res[1] - res[2]):abs():max():item(), 0, name .. ": traced vs eager")
  end
end)

-- LBFGS's state (flat vectors over both parameters, lists of them) in memory and through a file.
H.test("LBFGS: state_dict / load_state_dict resume the same trajectory", function()
  local opts = { max_iter = 3, history_size = 4 }
  local W5, b5 = run("LBFGS", opts, 4)
  for _, via_file in ipairs({ false, true }) do
    local W, b, opt = run("LBFGS", opts, 2)
    local sd, meta = opt:state_dict(), nil
    if via_file then
      local path = os.tmpname()
      tide.save(path, sd)
      sd, meta = tide.load(path)
      os.remove(path)
    end
    local opt2 = optim.LBFGS({ W, b }, opts)
    opt2:load_state_dict(sd, meta)
    for _ = 1, 2 do
      opt2:step(function()
        opt2:zero_grad()
        local l = loss_of(W, b)
        l:backward()
        return l
      end)
    end
    local what = via_file and " (through a file)" or ""
    H.ok(max_diff(W, W5:reshape(-1):totable()) < 1e-15, "W after resuming" .. what)
    H.ok(max_diff(b, b5:reshape(-1):totable()) < 1e-15, "b after resuming" .. what)
  end
end)

H.test("LBFGS reaches the minimum of a quadratic; state in memory carries over", function()
  local A = tide.tensor({ { 3, 1 }, { 1, 2 } }, { dtype = "float64" })
  local c = tide.tensor({ 1, -1 }, { dtype = "float64" })
  local x = tide.zeros(2, { dtype = "float64" }):requires_grad_(true)
  local opt = optim.LBFGS({ x }, { line_search_fn = "strong_wolfe" })
  local function closure()
    opt:zero_grad()
    local l = (x * A:matmul(x)):sum() * 0.5 - (c * x):sum()
    l:backward()
    return l
  end
  opt:step(closure)
  -- A x = c: x = (3/5, -4/5); it stops at |grad| <= tolerance_grad (1e-7) or a loss change
  -- below tolerance_change (1e-9), so x is within ~1e-7 / (A's smallest eigenvalue, 1.38)
  H.values(x:detach(), { 0.6, -0.8 }, 1e-6)
  H.ok(opt.state[x].func_evals >= 2, "counts evaluations")
  H.ok(opt.state[x].n_iter >= 1, "counts iterations")
  H.raises(function() opt:step() end, "LBFGS", "closure")
end)

H.test("errors name the optimizer and the option", function()
  local p = tide.zeros(2):requires_grad_(true)
  H.raises(function() optim.RMSprop({ p }, { beta = 0.9 }) end, "RMSprop", "unknown option 'beta'")
  H.raises(function() optim.RMSprop({ p }, { momentum = -1 }) end, "RMSprop", "momentum", ">= 0")
  H.raises(function() optim.Adagrad({ p }, { lr_decay = -1 }) end, "Adagrad", "lr_decay")
  H.raises(function() optim.Adadelta({ p }, { rho = 1.5 }) end, "Adadelta", "rho")
  H.raises(function() optim.Adamax({ p }, { betas = { 1.0, 0.9 } }) end, "Adamax", "betas")
  H.raises(function() optim.NAdam({ p }, { momentum_decay = -1 }) end, "NAdam", "momentum_decay")
  H.raises(function() optim.RAdam({ p }, { lr = -1 }) end, "RAdam", "lr")
  H.raises(function() optim.LBFGS({ p }, { line_search_fn = "backtracking" }) end,
           "LBFGS", "strong_wolfe")
  local q = tide.zeros(2):requires_grad_(true)
  local opt = optim.LBFGS({ { params = { p } }, { params = { q } } })
  H.raises(function() opt:step(function() return 0 end) end, "LBFGS", "parameter groups")
end)

H.done()
