-- test_jit_random.lua — random programs run eagerly and through tide.jit must leave the same
-- values everywhere: in what they return and in the argument tensors they write in place.
-- Each program is a seeded random sequence of out-of-place ops, views (narrow, select, t,
-- unsqueeze+expand), reductions, in-place writes into arguments or into views of them, and
-- reads back into Lua (graph breaks) whose values steer later ops. Each is called three times
-- on the same arguments (a compile, then cache hits), so a write that a later call must see is
-- checked too. Only exact float32 ops are used (no transcendental functions), so eager and jit
-- must agree bit for bit. A failure prints the program. Then symbolic dims: programs met with
-- arguments of several sizes (R x C, R and C from 4 to 11), each size twice, so a plan made
-- symbolic by one size serves the next ones (jit/README.md).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local PROGRAMS = tonumber(os.getenv("TIDE_JIT_RANDOM_PROGRAMS")) or 150
local STEPS = 12

-- a program is a list of steps; each step is {text, fn(env)} where env holds the values
local function gen(rng)
  local steps = {}
  local nvals = 2 -- values 1, 2 are the arguments a, b (R x C float32, R and C at least 4)
  local function pick() return rng(1, nvals) end
  local function add(text, fn, makes_value)
    steps[#steps + 1] = { text = text, fn = fn }
    if makes_value then nvals = nvals + 1 end
  end
  for _ = 1, STEPS do
    local r = rng(1, 13)
    local i, j = pick(), pick()
    local k = nvals + 1
    if r == 1 then
      add(("v%d = v%d + v%d"):format(k, i, j), function(v) v[k] = v[i] + v[j] end, true)
    elseif r == 2 then
      add(("v%d = v%d * v%d - 0.5"):format(k, i, j), function(v) v[k] = v[i] * v[j] - 0.5 end, true)
    elseif r == 3 then
      add(("v%d = where(v%d > v%d, v%d, -v%d)"):format(k, i, j, i, j),
        function(v) v[k] = tide.where(v[i]:gt(v[j]), v[i], -v[j]) end, true)
    elseif r == 4 then
      add(("v%d = relu(v%d) * 2"):format(k, i), function(v) v[k] = v[i]:relu() * 2 end, true)
    elseif r == 5 then
      add(("v%d = v%d:sum(2, true) (broadcast back)"):format(k, i),
        function(v) v[k] = v[i]:sum(2, true) + v[i] * 0 end, true)
    elseif r == 6 then
      add(("v%d = v%d:t():t()"):format(k, i), function(v) v[k] = v[i]:t():t() end, true)
    elseif r == 7 then
      local dst = rng(1, 2)
      add(("a%d:add_(v%d)"):format(dst, i), function(v) v[dst]:add_(v[i]) end)
    elseif r == 8 then
      local dst = rng(1, 2)
      add(("a%d:copy_(v%d * 0.5 + 1)"):format(dst, i), function(v) v[dst]:copy_(v[i] * 0.5 + 1) end)
    elseif r == 9 then
      local dst, row = rng(1, 2), rng(1, 4)
      add(("a%d:select(1, %d):mul_(3)"):format(dst, row), function(v) v[dst]:select(1, row):mul_(3) end)
    elseif r == 10 then
      local dst, c0 = rng(1, 2), rng(1, 3)
      add(("a%d:narrow(2, %d, 2):copy_(v%d:narrow(2, 1, 2))"):format(dst, c0, i),
        function(v) v[dst]:narrow(2, c0, 2):copy_(v[i]:narrow(2, 1, 2)) end)
    elseif r == 11 then
      add(("if v%d:sum():item() > 0 then v%d = v%d - 1 else v%d = v%d + 1 end"):format(i, k, j, k, j),
        function(v)
          if v[i]:sum():item() > 0 then v[k] = v[j] - 1 else v[k] = v[j] + 1 end
        end, true)
    elseif r == 12 then
      add(("v%d = v%d:narrow(1, 2, 2):sum(1, true):expand(R, C) + v%d"):format(k, i, j),
        function(v)
          v[k] = v[i]:narrow(1, 2, 2):sum(1, true):expand(v[1]:size(1), v[1]:size(2)) + v[j]
        end, true)
    else
      local dst = rng(1, 2)
      add(("a%d:sub_(v%d:max(2, true))"):format(dst, i),
        function(v) v[dst]:sub_((v[i]:max(2, true))) end)
    end
  end
  return steps, nvals
end

local function run_program(steps, nvals)
  return function(a, b)
    local v = { a, b }
    for _, s in ipairs(steps) do s.fn(v) end
    -- the last three values, as fresh tensors (a returned argument is compared below anyway)
    local out = {}
    for k = math.max(3, nvals - 2), nvals do out[#out + 1] = v[k] * 1 end
    return table.unpack(out)
  end
end

local function bits_equal(x, y)
  if x:dim() ~= y:dim() or x:numel() ~= y:numel() then return false end
  local fx, fy = H.flatten(x:totable()), H.flatten(y:totable())
  for i = 1, #fx do
    local u, w = fx[i], fy[i]
    if u ~= w and not (u ~= u and w ~= w) then return false end
  end
  return true
end

local seed_rng = 12345
local function lcg_rng()
  -- a small deterministic generator (the same programs on every Lua build)
  return function(lo, hi)
    seed_rng = (seed_rng * 1103515245 + 12345) % 2147483648
    return lo + seed_rng % (hi - lo + 1)
  end
end

H.test(("%d random programs: jit equals eager, in results and in written arguments"):format(PROGRAMS),
  function()
    local rng = lcg_rng()
    tide.manual_seed(7)
    local bad = 0
    for p = 1, PROGRAMS do
      local steps, nvals = gen(rng)
      local fn = run_program(steps, nvals)
      local a0, b0 = tide.randn(4, 5), tide.randn(4, 5)
      local ae, be = a0:clone(), b0:clone()
      local aj, bj = a0:clone(), b0:clone()
      local f = tide.jit(fn)
      local why
      for call = 1, 3 do
        local re, rj = { fn(ae, be) }, { f(aj, bj) }
        for k = 1, #re do
          if not bits_equal(re[k], rj[k]) then why = ("call %d, result %d"):format(call, k) end
        end
        if not bits_equal(ae, aj) then why = ("call %d, argument a"):format(call) end
        if not bits_equal(be, bj) then why = ("call %d, argument b"):format(call) end
        if why then break end
      end
      if why then
        bad = bad + 1
        local lines = {}
        for _, s in ipairs(steps) do lines[#lines + 1] = "  " .. s.text end
        print(("program %d differs (%s):\n%s"):format(p, why, table.concat(lines, "\n")))
      end
    end
    H.eq(bad, 0, "programs where jit and eager differ")
  end)

H.test("random programs met with several sizes: symbolic plans equal eager", function()
  local rng = lcg_rng()
  tide.manual_seed(8)
  local sizes = { { 4, 5 }, { 6, 5 }, { 4, 9 }, { 7, 11 }, { 5, 5 }, { 9, 6 }, { 11, 4 } }
  local bad, compiles, calls = 0, 0, 0
  for p = 1, PROGRAMS // 3 do
    local steps, nvals = gen(rng)
    local fn = run_program(steps, nvals)
    local f = tide.jit(fn)
    local why
    for _, rc in ipairs(sizes) do
      local a0, b0 = tide.randn(rc[1], rc[2]), tide.randn(rc[1], rc[2])
      local ae, be, aj, bj = a0:clone(), b0:clone(), a0:clone(), b0:clone()
      for call = 1, 2 do
        local re, rj = { fn(ae, be) }, { f(aj, bj) }
        calls = calls + 1
        local at = ("size %dx%d call %d"):format(rc[1], rc[2], call)
        for k = 1, #re do
          if not bits_equal(re[k], rj[k]) then why = at .. (", result %d"):format(k) end
        end
        if not bits_equal(ae, aj) then why = at .. ", argument a" end
        if not bits_equal(be, bj) then why = at .. ", argument b" end
        if why then break end
      end
      if why then break end
    end
    local st = f:stats()
    compiles = compiles + st.compiles
    if st.fallbacks > 0 then why = why or "fell back to eager" end
    if why then
      bad = bad + 1
      local lines = {}
      for _, s in ipairs(steps) do lines[#lines + 1] = "  " .. s.text end
      print(("program %d differs (%s):\n%s"):format(p, why, table.concat(lines, "\n")))
    end
  end
  H.eq(bad, 0, "programs where jit and eager differ over sizes")
  -- segments per program: a few plans each, not one per size (calls counts every call)
  H.ok(compiles < calls / 2, ("compiles %d over %d calls"):format(compiles, calls))
  print(("symbolic random programs: %d compiles over %d calls"):format(compiles, calls))
end)

H.done()
