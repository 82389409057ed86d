-- test_api_coverage.lua — how much of PyTorch's everyday API tide has, measured.
--
-- tests/lua/data/api_coverage.lua (written by scripts/gen_api_coverage.py from PyTorch 1.13)
-- lists four sets of names: torch.*, torch.nn.functional, torch.nn modules and torch.optim.
-- Each name comes with one small call and PyTorch's answer. A name counts as covered when it
-- exists in tide (tide.X or a tensor method, F.X, nn.X, optim.X) and its call gives PyTorch's
-- dtype, shape and values. A name that exists but answers wrongly (or errors) fails the test;
-- a missing name is counted and listed. Each list's coverage must stay at or above its floor
-- below (all four lists are complete: a name that goes missing fails).
--
-- Tolerance: the inputs are float64 and each call is a few ops, so tide and PyTorch agree to
-- a few ulps of the result's scale: 1e-9 relative to max(1, |expected|) is far above that and
-- far below any real mistake. "loose" entries (LBFGS: iterations whose line search amplifies
-- rounding) use 1e-6. "shape" entries are random draws: only the dtype and shape are compared.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = H.tide
local nn, F, optim = tide.nn, tide.nn.functional, tide.optim

local FLOORS = { torch = 1.0, functional = 1.0, nn = 1.0, optim = 1.0 }
local TOLERANCE = { value = 1e-9, loose = 1e-6 }

local fixture = dofile((arg[0]:match("(.*/)") or "./") .. "data/api_coverage.lua")

-- The k-th parameter by name gets 0.5 sin(i + k), i = 0, 1, ... (as the generator's fill()).
local function fill(m)
  m = m:double()
  local params = {}
  for name, p in m:named_parameters() do
    params[#params + 1] = { name, p }
  end
  table.sort(params, function(a, b) return a[1] < b[1] end)
  tide.no_grad(function()
    for k, e in ipairs(params) do
      local p = e[2]
      local v = tide.sin(tide.arange(p:numel(), { dtype = "float64" }) + k) * 0.5
      p:copy_(v:reshape(p.shape))
    end
  end)
  return m
end

-- Steps of an optimizer on the generator's fixed function of three parameters; the end point.
local function opt_run(make, steps, closure_opt)
  local p = tide.tensor({ 1.0, -2.0, 0.5 }, { dtype = "float64", requires_grad = true })
  local opt = make({ p })
  local target = tide.tensor({ 0.5, 0.25, -1.0 }, { dtype = "float64" })
  local weight = tide.tensor({ 1.0, 2.0, 0.5 }, { dtype = "float64" })
  local function closure()
    opt:zero_grad()
    local loss = (tide.pow(p - target, 2) * weight):sum() + tide.pow(p, 4):sum() * 0.1
    loss:backward()
    return loss
  end
  for _ = 1, steps or 5 do
    if closure_opt then
      opt:step(closure)
    else
      closure()
      opt:step()
    end
  end
  return p:detach()
end

local env = setmetatable({ tide = tide, nn = nn, F = F, optim = optim, fill = fill,
                           opt_run = opt_run }, { __index = _G })
for name, spec in pairs(fixture.inputs) do
  env[name] = tide.tensor(spec.v, { dtype = spec.dtype })
end

local function exists(list, name)
  if list == "torch" then
    return tide[name] ~= nil or getmetatable(env.A).__index(env.A, name) ~= nil
  end
  local where = ({ functional = F, nn = nn, optim = optim })[list]
  return where[name] ~= nil
end

-- Compares one result with PyTorch's; returns nil or what differs.
local function compare(got, want, mode)
  if want.scalar ~= nil then
    if tide.is_tensor(got) and got:numel() == 1 then got = got:item() end
    local same = got == want.scalar
    if type(want.scalar) == "number" and type(got) == "number" then
      same = math.abs(got - want.scalar) <= 1e-9 * math.max(1, math.abs(want.scalar))
    end
    if not same then return ("%s, expected %s"):format(tostring(got), tostring(want.scalar)) end
    return nil
  end
  if want.dtype == nil then -- a tuple
    if type(got) ~= "table" or tide.is_tensor(got) then return "expected a list of results" end
    for i, w in ipairs(want) do
      local why = compare(got[i], w, mode)
      if why then return ("result %d: %s"):format(i, why) end
    end
    return nil
  end
  if not tide.is_tensor(got) then return ("a %s, expected a tensor"):format(type(got)) end
  if got.dtype ~= want.dtype then return ("dtype %s, expected %s"):format(got.dtype, want.dtype) end
  local shape = got.shape
  if #shape ~= #want.shape then
    return ("shape {%s}, expected {%s}"):format(table.concat(shape, ","), table.concat(want.shape, ","))
  end
  for i = 1, #shape do
    if shape[i] ~= want.shape[i] then
      return ("shape {%s}, expected {%s}"):format(table.concat(shape, ","), table.concat(want.shape, ","))
    end
  end
  if mode == "shape" then return nil end
  local flat = got:reshape(-1)
  local tol = TOLERANCE[mode]
  for i, w in ipairs(want.v) do
    local g = flat[i]:item()
    local bad
    if type(w) == "boolean" then
      bad = g ~= w
    elseif w ~= w then
      bad = g == g
    elseif w == math.huge or w == -math.huge then
      bad = g ~= w
    else
      bad = not (math.abs(g - w) <= tol * math.max(1, math.abs(w)))
    end
    if bad then return ("element %d is %s, expected %s"):format(i, tostring(g), tostring(w)) end
  end
  return nil
end

local function evaluate(lua)
  local chunk = load("return " .. lua, "=" .. lua, "t", env) or load(lua, "=" .. lua, "t", env)
  local out = table.pack(chunk())
  return out.n > 1 and { table.unpack(out, 1, out.n) } or out[1]
end

local counts, missing = {}, {}
for _, e in ipairs(fixture.entries) do
  local list, name, lua, mode, want = e[1], e[2], e[3], e[4], e[5]
  counts[list] = counts[list] or { total = 0, covered = 0 }
  local c = counts[list]
  c.total = c.total + 1
  if not exists(list, name) then
    missing[list] = missing[list] or {}
    table.insert(missing[list], name)
  else
    H.test(("%s.%s: %s"):format(list, name, lua), function()
      local got = evaluate(lua)
      if want.dtype == nil and want.scalar == nil and type(got) == "table" and not tide.is_tensor(got)
         and #got == 1 and #want > 1 then
        got = got[1]
      end
      if (want.dtype ~= nil or want.scalar ~= nil) and type(got) == "table" and not tide.is_tensor(got) then
        got = got[1] -- a single expected result: the first of several returns
      end
      local why = compare(got, want, mode)
      if why then error(why, 0) end
      c.covered = c.covered + 1
    end)
  end
end

for _, list in ipairs({ "torch", "functional", "nn", "optim" }) do
  local c = counts[list]
  local share = c.covered / c.total
  print(("coverage %s: %d of %d (%.1f%%)%s"):format(list, c.covered, c.total, 100 * share,
        missing[list] and ("; missing: " .. table.concat(missing[list], " ")) or ""))
  H.test("coverage floor of " .. list, function()
    if share + 1e-12 < FLOORS[list] then
      error(("%.3f below the floor %.3f"):format(share, FLOORS[list]), 0)
    end
  end)
end

H.done()
