-- test_nn_rnn.lua — nn.RNN / nn.LSTM / nn.GRU and the cells against PyTorch 1.13 on fixed weights
-- (tests/lua/data/rnn_fixture.lua, from scripts/gen_rnn_fixture.py): outputs, final states and
-- gradients in float64; variable lengths, pack/pad, central-difference gradients, tide.jit vs
-- eager, parameter names, shapes and initialization, and the errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"

local here = arg[0]:match("(.*/)") or "./"
local FIX = dofile(here .. "data/rnn_fixture.lua")

-- The fixture's det(): sin(1.3 * seed + 0.71 * i) * 0.5 for i = 0.. in row-major order.
local function det(shape, seed)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 0, n - 1 do v[i + 1] = math.sin(1.3 * seed + 0.71 * i) * 0.5 end
  return tide.tensor(v, { dtype = "float64" }):reshape(shape)
end

local function max_diff(t, want)
  local got = t:contiguous():view(-1):totable()
  if #got ~= #want then error(("%d values, expected %d"):format(#got, #want), 2) end
  local worst = 0
  for i = 1, #got do worst = math.max(worst, math.abs(got[i] - want[i])) end
  return worst
end

-- The same arithmetic as PyTorch's in float64 up to the order of sums: 1e-12 absolute covers it
-- (values and gradients here are below 10; float64 rounding per op is ~1e-16).
local TOL = 1e-12

local function build(spec)
  local opts = { dtype = "float64", bias = spec.bias }
  if not spec.mode:find("Cell") then
    opts.num_layers, opts.batch_first = spec.num_layers, spec.batch_first
    opts.bidirectional, opts.nonlinearity = spec.bidirectional, spec.nonlinearity
  elseif spec.nonlinearity then
    opts.nonlinearity = spec.nonlinearity
  end
  local m = nn[spec.mode](spec.input_size, spec.hidden_size, opts)
  local k = 0
  tide.no_grad(function()
    for _, p in m:named_parameters() do
      p:copy_(det(p:size(), 10 + k))
      k = k + 1
    end
  end)
  return m
end

-- Runs a fixture case: the results by name, the input and the initial states.
local function run_case(spec, m, fwd)
  fwd = fwd or function(mod, ...) return mod(...) end
  local B, Hs = spec.B, spec.hidden_size
  if spec.mode:find("Cell") then
    local x = det({ B, spec.input_size }, 1):requires_grad_(true)
    local h0 = det({ B, Hs }, 2):requires_grad_(true)
    if spec.mode == "LSTMCell" then
      local c0 = det({ B, Hs }, 3):requires_grad_(true)
      local h, c = fwd(m, x, { h0, c0 })
      return { h_n = h, c_n = c }, x, { h0, c0 }
    end
    return { h_n = fwd(m, x, h0) }, x, { h0 }
  end
  local T, dirs = spec.T, spec.bidirectional and 2 or 1
  local x = det(spec.batch_first and { B, T, spec.input_size } or { T, B, spec.input_size }, 1)
  x:requires_grad_(true)
  local states, hx = {}, nil
  if spec.h0 then
    local shape = { (spec.num_layers or 1) * dirs, B, Hs }
    states[1] = det(shape, 2):requires_grad_(true)
    if spec.mode == "LSTM" then states[2] = det(shape, 3):requires_grad_(true) end
    hx = spec.mode == "LSTM" and states or states[1]
  end
  local out, hn = fwd(m, x, hx, spec.lengths and { lengths = spec.lengths } or nil)
  local res = { output = out }
  if spec.mode == "LSTM" then
    res.h_n, res.c_n = hn[1], hn[2]
  else
    res.h_n = hn
  end
  return res, x, states
end

local function loss_of(res)
  local names = {}
  for k in pairs(res) do names[#names + 1] = k end
  table.sort(names) -- R in sorted-name order, as the fixture script
  local loss
  for k, name in ipairs(names) do
    local term = (res[name] * det(res[name]:size(), 20 + k - 1)):sum()
    loss = loss and loss + term or term
  end
  return loss
end

local CASE_NAMES = {}
for name in pairs(FIX) do CASE_NAMES[#CASE_NAMES + 1] = name end
table.sort(CASE_NAMES)

for _, name in ipairs(CASE_NAMES) do
  H.test("PyTorch 1.13 fixture: " .. name, function()
    local case = FIX[name]
    local m = build(case.spec)
    local res, x, states = run_case(case.spec, m)
    for key, t in pairs(res) do
      local d = max_diff(t, case[key])
      H.ok(d < TOL, ("%s %s: max |tide - torch| = %.2e"):format(name, key, d))
    end
    loss_of(res):backward()
    for pname, p in m:named_parameters() do
      local want = case.grad[pname]
      H.ok(want ~= nil, name .. ": PyTorch has no parameter " .. pname)
      local d = max_diff(p.grad, want)
      H.ok(d < TOL, ("%s grad %s: max diff %.2e"):format(name, pname, d))
    end
    H.ok(max_diff(x.grad, case.grad.input) < TOL, name .. ": input gradient")
    for i, s in ipairs(states) do
      local key = i == 1 and "h_0" or "c_0"
      H.ok(max_diff(s.grad, case.grad[key]) < TOL, name .. ": gradient of " .. key)
    end
  end)
end

H.test("parameter names, shapes and PyTorch's uniform(-1/sqrt(H), 1/sqrt(H)) init", function()
  local m = nn.LSTM(5, 8, { num_layers = 2, bidirectional = true })
  local want = {
    { "weight_ih_l0", { 32, 5 } }, { "weight_hh_l0", { 32, 8 } }, { "bias_ih_l0", { 32 } },
    { "bias_hh_l0", { 32 } }, { "weight_ih_l0_reverse", { 32, 5 } },
    { "weight_hh_l0_reverse", { 32, 8 } }, { "bias_ih_l0_reverse", { 32 } },
    { "bias_hh_l0_reverse", { 32 } }, { "weight_ih_l1", { 32, 16 } },
  }
  local got = {}
  for n, p in m:named_parameters() do got[#got + 1] = { n, p:size() } end
  H.eq(#got, 16, "parameter count")
  local bound = 1 / math.sqrt(8)
  for i, w in ipairs(want) do
    H.eq(got[i][1], w[1])
    H.eq(got[i][2], w[2])
  end
  for _, p in ipairs(m:parameters()) do
    H.ok(p:abs():max():item() <= bound, "within the bound")
    H.ok(p:abs():max():item() > bound * 0.5, "spread over the bound")
  end
  H.eq(#nn.GRU(3, 4, { bias = false }):parameters(), 2)
  H.eq(nn.GRUCell(3, 4).weight_ih:size(), { 12, 3 })
  H.eq(tostring(nn.LSTM(3, 4, { num_layers = 2 })), "LSTM(3, 4, num_layers=2)")
end)

-- Variable lengths: each sequence alone (length n, batch 1) must give the batched run's output
-- at its valid steps, zeros past them, and its h_n.
H.test("lengths: each sequence as if run alone; padded steps output zeros", function()
  local m = nn.GRU(3, 4, { bidirectional = true, dtype = "float64" })
  local x = det({ 6, 3, 3 }, 5)
  local lengths = { 2, 6, 4 }
  local out, hn = m(x, nil, { lengths = lengths })
  local out2 = m(x, nil, { lengths = tide.tensor(lengths, { dtype = "int64" }) })
  H.ok(max_diff(out2, out:contiguous():view(-1):totable()) == 0, "lengths as a tensor")
  for b, n in ipairs(lengths) do
    local xb = x:narrow(2, b, 1):narrow(1, 1, n)
    local ob, hb = m(xb)
    H.ok(max_diff(out:narrow(2, b, 1):narrow(1, 1, n), ob:view(-1):totable()) < 1e-14,
         "output of sequence " .. b)
    H.ok(max_diff(hn:narrow(2, b, 1), hb:view(-1):totable()) < 1e-14, "h_n of sequence " .. b)
    if n < 6 then
      H.eq(out:narrow(2, b, 1):narrow(1, n + 1, 6 - n):abs():sum():item(), 0, "padding")
    end
  end
end)

H.test("pack_padded_sequence / pad_packed_sequence", function()
  local rnn = nn.utils.rnn
  local m = nn.LSTM(2, 3, { batch_first = true, dtype = "float64" })
  local x = det({ 3, 4, 2 }, 6)
  local packed = rnn.pack_padded_sequence(x, { 4, 2, 1 }, { batch_first = true })
  local out, hc = m(packed)
  local padded, lens = rnn.pad_packed_sequence(out, { batch_first = true, total_length = 5 })
  H.eq(padded:size(), { 3, 5, 3 })
  H.eq(lens:totable(), { 4, 2, 1 })
  local direct = m(x, nil, { lengths = { 4, 2, 1 } })
  H.ok(max_diff(padded:narrow(2, 1, 4), direct:contiguous():view(-1):totable()) == 0, "same")
  H.eq(padded:narrow(2, 5, 1):abs():sum():item(), 0)
  H.eq(hc[1]:size(), { 1, 3, 3 })
  H.raises(function() rnn.pack_padded_sequence(x, { 1, 2, 4 }, { batch_first = true }) end,
           "sorted in decreasing order")
  local filled = rnn.pad_packed_sequence(packed, { batch_first = true, padding_value = -1 })
  H.eq(filled[{ 3, 2, 1 }]:item(), -1)
end)

-- Central differences through an LSTM with lengths and h0 (float64, h = 1e-6: truncation
-- ~h^2 |f'''| ~1e-12, rounding ~1e-16 / h ~1e-10; so 1e-7).
H.test("gradcheck: LSTM with lengths, central differences", function()
  local m = nn.LSTM(2, 3, { num_layers = 2, bidirectional = true, dtype = "float64" })
  local x = det({ 4, 2, 2 }, 7):requires_grad_(true)
  local h0 = det({ 4, 2, 3 }, 8):requires_grad_(true)
  local function loss()
    local out, hc = m(x, { h0, h0 * 0.5 }, { lengths = { 4, 3 } })
    return (out * det(out:size(), 9)):sum() + (hc[1] * hc[2]):sum()
  end
  loss():backward()
  local h, worst = 1e-6, 0
  local function check(t, grad)
    local flat, gflat = t:view(-1), grad:view(-1)
    for i = 1, flat:numel(), 3 do
      local v = flat[i]:item()
      local fp, fm
      tide.no_grad(function()
        flat[i] = v + h; fp = loss():item()
        flat[i] = v - h; fm = loss():item()
        flat[i] = v
      end)
      worst = math.max(worst, math.abs((fp - fm) / (2 * h) - gflat[i]:item()))
    end
  end
  check(x, x.grad)
  check(h0, h0.grad)
  for _, p in ipairs(m:parameters()) do check(p, p.grad) end
  H.ok(worst < 1e-7, ("worst |numeric - autograd| = %.2e"):format(worst))
end)

-- The traced step (forward, loss, backward) against eager: the same arithmetic in the same
-- order, so bitwise; one plan per sequence length, reused by a second call of the same length.
H.test("tide.jit: the time loop traced, values and gradients as eager", function()
  local m = nn.LSTM(3, 4, { num_layers = 2, dtype = "float64" })
  local function step(x)
    for _, p in ipairs(m:parameters()) do p.grad = nil end
    local out, hc = m(x, nil, { lengths = { x:size(1), 2 } })
    local loss = (out * out):sum() + hc[2]:sum()
    loss:backward()
    return loss, m.weight_hh_l1.grad, m.weight_ih_l0.grad
  end
  -- dynamic = false: a plan per shape (a symbolic T would leave stack over T steps untraced)
  local f = tide.jit(step, { dynamic = false })
  -- 40 steps: the hidden weight's gradient is joined from two products (36 uses each at most)
  for _, T in ipairs({ 5, 5, 7, 40 }) do
    local x = det({ T, 2, 3 }, T)
    local l1, g1, g2 = step(x)
    l1, g1, g2 = l1:item(), g1:clone(), g2:clone()
    local l2, j1, j2 = f(x)
    H.eq(l2:item(), l1, "loss")
    H.ok(max_diff(j1, g1:view(-1):totable()) == 0, "weight_hh_l1 grad")
    H.ok(max_diff(j2, g2:view(-1):totable()) == 0, "weight_ih_l0 grad")
  end
  H.eq(f:stats().compiles, 3, "one plan per length")
end)

H.test("batch_first, unbatched input, RNN relu, cells without a state", function()
  local m = nn.RNN(2, 3, { nonlinearity = "relu", dtype = "float64" })
  local x = det({ 4, 2 }, 3)
  local out, hn = m(x) -- unbatched [T, in]
  H.eq(out:size(), { 4, 3 })
  H.eq(hn:size(), { 1, 3 })
  local ob = m(x:unsqueeze(2))
  H.ok(max_diff(out, ob:view(-1):totable()) == 0, "as batch 1")
  H.ok(out:min():item() >= 0, "relu")
  local c = nn.LSTMCell(2, 3)
  local h1, c1 = c(tide.randn(5, 2))
  H.eq(h1:size(), { 5, 3 })
  H.eq(c1:size(), { 5, 3 })
end)

-- float32 on both devices: the products sum <= 7 terms per output in another order and the
-- device's sigmoid/tanh differ by a few ulps; over 5 steps on values ~1, 1e-4 bounds it.
H.test("vulkan: LSTM and GRU with lengths, values and gradients as the CPU's", function()
  if not tide.vulkan.available() then
    print("test_nn_rnn.lua: no Vulkan device, skipped")
    return
  end
  for _, mode in ipairs({ "LSTM", "GRU" }) do
    local m = nn[mode](3, 4, { bidirectional = true })
    local x = det({ 5, 2, 3 }, 4):float()
    local function run(dev)
      m:to(dev)
      m:zero_grad()
      local out = m(x:to(dev), nil, { lengths = { 5, 3 } })
      local loss = (out * out):sum()
      loss:backward()
      return out:to("cpu"), m.weight_hh_l0_reverse.grad:to("cpu")
    end
    local want, gwant = run("cpu")
    local got, ggot = run("vulkan")
    H.ok(max_diff(got, want:view(-1):totable()) < 1e-4, mode .. " vulkan output")
    H.ok(max_diff(ggot, gwant:reshape(-1):totable()) < 1e-4, mode .. " vulkan gradient")
    m:to("cpu")
  end
end)

H.test("errors name the layer, shapes and options", function()
  H.raises(function() nn.LSTM(3, 4, { proj_size = 2 }) end, "LSTM", "proj_size")
  H.raises(function() nn.RNN(3, 4, { nonlinearity = "gelu" }) end, "RNN", "nonlinearity")
  H.raises(function() nn.GRU(3, 4, { nonlinearity = "relu" }) end, "GRU", "nonlinearity")
  H.raises(function() nn.GRU(3, 4, { dropout = 2 }) end, "dropout")
  H.raises(function() nn.LSTM(3, 4, { layers = 2 }) end, "unknown option 'layers'")
  local m = nn.LSTM(3, 4)
  H.raises(function() m(tide.zeros(5, 2, 6)) end, "LSTM", "[5, 2, 6]", "input_size=3")
  H.raises(function() m(tide.zeros(5, 2, 3), { tide.zeros(2, 2, 4), tide.zeros(1, 2, 4) }) end,
           "h_0 has shape [2, 2, 4], expected [1, 2, 4]")
  H.raises(function() m(tide.zeros(5, 2, 3), tide.zeros(1, 2, 4)) end, "pair {h_0, c_0}")
  H.raises(function() m(tide.zeros(5, 2, 3), nil, { lengths = { 5, 6 } }) end,
           "length 2 is 6", "[1, 5]")
  H.raises(function() m(tide.zeros(5, 2, 3), nil, { length = { 5, 5 } }) end,
           "LSTM", "unknown option 'length'")
  H.raises(function() m(tide.zeros(5, 2, 3), nil, { lengths = tide.ones(2) }) end,
           "lengths must be a 1-D integer tensor")
  H.raises(function() m(tide.zeros(5, 2, 3), nil, { lengths = { 5 } }) end,
           "one length per sequence (2)")
  H.raises(function() m(tide.zeros(5, 2, 3, { dtype = "int64" })) end, "floating-point")
  H.raises(function() nn.GRUCell(3, 4)(tide.zeros(2, 5)) end, "GRUCell", "[2, 5]")
end)

H.done()
