-- test_nn_norm_clip.lua — nn.RMSNorm / F.rms_norm against a plain Lua loop (values, default eps,
-- gradients by central differences in float64), nn.utils.clip_grad_norm_ against norms computed
-- in Lua, a jit-vs-eager training step using both, and their errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"
local optim = require "tide.optim"

local function rnd_table(shape, scale)
  return H.build(shape, function() return H.rnd() * (scale or 1) end)
end

local function set(p, values)
  tide.no_grad(function() p:copy_(tide.tensor(values, { dtype = p.dtype })) end)
end

-- RMSNorm of rows x[i][j][.] over the last dim (k = 1) or of x[i] over the last two (k = 2).
local function rms_ref(X, W, eps, k)
  local out = {}
  for i = 1, #X do
    local sq, n = 0, 0
    for j = 1, #X[i] do
      if k == 1 then sq, n = 0, 0 end
      for l = 1, #X[i][j] do sq, n = sq + X[i][j][l] ^ 2, n + 1 end
      if k == 1 then
        out[i] = out[i] or {}
        out[i][j] = {}
        for l = 1, #X[i][j] do
          out[i][j][l] = X[i][j][l] / math.sqrt(sq / n + eps) * (W and W[l] or 1)
        end
      end
    end
    if k == 2 then
      out[i] = {}
      for j = 1, #X[i] do
        out[i][j] = {}
        for l = 1, #X[i][j] do
          out[i][j][l] = X[i][j][l] / math.sqrt(sq / n + eps) * (W and W[j][l] or 1)
        end
      end
    end
  end
  return out
end

H.test("RMSNorm over the last dim and the last two dims against a Lua loop", function()
  local X = rnd_table({ 2, 3, 4 })
  local m = nn.RMSNorm(4, { eps = 1e-5, dtype = "float64" })
  local W = rnd_table({ 4 })
  set(m.weight, W)
  -- float64 throughout: the only error is rounding, ~1e-16 relative
  H.values(m(tide.tensor(X, { dtype = "float64" })), rms_ref(X, W, 1e-5, 1), 1e-12)
  local m2 = nn.RMSNorm({ 3, 4 }, { eps = 0.5 })
  H.eq(m2.weight:size(), { 3, 4 })
  H.eq(m2.weight.dtype, "float32")
  local W2 = rnd_table({ 3, 4 })
  set(m2.weight, W2)
  -- float32: a sum of 12 squares, a rsqrt and two products, each within a few ulps (~1e-7)
  H.values(m2(tide.tensor(X)), rms_ref(X, W2, 0.5, 2), 1e-5)
  local plain = nn.RMSNorm(4, { elementwise_affine = false })
  H.eq(plain.weight, nil)
  H.eq(#plain:parameters(), 0)
  H.values(plain(tide.tensor(X, { dtype = "float64" })), rms_ref(X, nil, 2 ^ -52, 1), 1e-12)
  H.values(F.rms_norm(tide.tensor(X, { dtype = "float64" }), { 4 }, nil, 1e-5),
           rms_ref(X, nil, 1e-5, 1), 1e-12)
  H.eq(tostring(m), "RMSNorm({4}, eps=1e-05, elementwise_affine=true)")
  H.eq(tostring(plain), "RMSNorm({4}, eps=nil, elementwise_affine=false)")
end)

H.test("RMSNorm's default eps is the machine epsilon of the input's dtype", function()
  -- inputs ~1e-8: mean(x^2) ~1e-16 is comparable to float64's eps 2^-52 (2.2e-16), so a
  -- different eps (1e-5, or float32's) would change the result by far more than the tolerance
  local X = rnd_table({ 1, 2, 3 }, 1e-8)
  local m = nn.RMSNorm(3, { elementwise_affine = false })
  H.eq(m.eps, nil)
  H.values(m(tide.tensor(X, { dtype = "float64" })), rms_ref(X, nil, 2 ^ -52, 1), 1e-12)
  local Y = rnd_table({ 1, 2, 3 }, 1e-3) -- mean(x^2) ~ 1e-7 vs float32's eps 1.19e-7
  H.values(m(tide.tensor(Y)), rms_ref(Y, nil, 2 ^ -23, 1), 1e-5)
  H.eq(F.finfo_eps.float32, 1.1920928955078125e-07)
  H.eq(F.finfo_eps.float64, 2.220446049250313e-16)
end)

H.test("RMSNorm gradients match central differences (float64)", function()
  local X = rnd_table({ 2, 3 })
  local Wv = rnd_table({ 3 })
  local Cv = rnd_table({ 2, 3 })
  local c = tide.tensor(Cv, { dtype = "float64" })
  local function loss(xt, wt)
    return (F.rms_norm(xt, 3, wt, 1e-3) * c):sum()
  end
  local x = tide.tensor(X, { dtype = "float64", requires_grad = true })
  local w = tide.tensor(Wv, { dtype = "float64", requires_grad = true })
  loss(x, w):backward()
  -- central differences with h = 1e-6: truncation ~h^2, rounding ~1e-16 / h ~ 1e-10
  local h = 1e-6
  local function fd(tbl, i, j, eval)
    local keep = j and tbl[i][j] or tbl[i]
    local function at(v)
      if j then tbl[i][j] = v else tbl[i] = v end
      return eval()
    end
    local d = (at(keep + h) - at(keep - h)) / (2 * h)
    at(keep)
    return d
  end
  local function eval()
    return loss(tide.tensor(X, { dtype = "float64" }), tide.tensor(Wv, { dtype = "float64" }))
      :item()
  end
  local gx = H.build({ 2, 3 }, function(i, j) return fd(X, i, j, eval) end)
  local gw = H.build({ 3 }, function(i) return fd(Wv, i, nil, eval) end)
  H.values(x.grad, gx, 1e-6)
  H.values(w.grad, gw, 1e-6)
end)

H.test("RMSNorm errors name the function and the shapes", function()
  local m = nn.RMSNorm({ 3, 4 })
  H.raises(function() return m(tide.zeros(2, 4, 3)) end, "rms_norm", "[3, 4]", "[2, 4, 3]")
  H.raises(function() return m(tide.zeros(4)) end, "rms_norm", "[4]")
  H.raises(function() return F.rms_norm(tide.zeros({ 2, 3 }, { dtype = "int32" }), 3) end,
           "rms_norm", "int32", "floating-point")
  H.raises(function() return F.rms_norm(3, 3) end, "rms_norm", "tensor")
  H.raises(function() return nn.RMSNorm(4, { epsilon = 1 }) end,
           "RMSNorm", "unknown option 'epsilon'")
  H.raises(function() return nn.RMSNorm(0) end, "RMSNorm", "normalized_shape", "positive")
  H.raises(function() return nn.RMSNorm({}) end, "RMSNorm", "at least one dim")
  H.raises(function() return nn.RMSNorm(4, { eps = -1 }) end, "RMSNorm", "eps")
end)

-- ---- clip_grad_norm_ ------------------------------------------------------------------------

local function with_grads(G)
  local ps = {}
  for i, g in ipairs(G) do
    ps[i] = tide.zeros(#g, { dtype = "float64", requires_grad = true })
    ps[i].grad = tide.tensor(g, { dtype = "float64" })
  end
  return ps
end

local function norm_ref(G, p)
  local s = 0
  for _, g in ipairs(G) do
    for _, v in ipairs(g) do
      if p == math.huge then s = math.max(s, math.abs(v)) else s = s + math.abs(v) ^ p end
    end
  end
  return p == math.huge and s or s ^ (1 / p)
end

H.test("clip_grad_norm_: total norm of every gradient and the scaling (2, 1, 3, inf)", function()
  local G = { { 3.0, -4.0 }, { 1.0, 2.0, -2.0 } }
  for _, p in ipairs({ 2, 1, 3, math.huge }) do
    local ps = with_grads(G)
    local total = nn.utils.clip_grad_norm_(ps, 1.5, { norm_type = p })
    local want = norm_ref(G, p)
    H.eq(total:dim(), 0)
    H.near(total:item(), want, 1e-14, "norm " .. p)
    local scale = 1.5 / (want + 1e-6) -- PyTorch's coefficient; the norms here exceed 1.5
    for i, g in ipairs(G) do
      H.values(ps[i].grad, H.map(g, function(v) return v * scale end), 1e-14, "grad " .. i)
    end
  end
  -- below max_norm: gradients unchanged (coefficient clamped to 1)
  local ps = with_grads(G)
  H.near(nn.utils.clip_grad_norm_(ps, 100):item(), math.sqrt(34), 1e-14)
  H.values(ps[1].grad, G[1], 0)
  H.values(ps[2].grad, G[2], 0)
  -- "inf" as a string, a single tensor, a parameter without grad is skipped
  ps = with_grads(G)
  local extra = tide.zeros(2, { dtype = "float64", requires_grad = true })
  H.near(nn.utils.clip_grad_norm_({ ps[1], extra, ps[2] }, 10, { norm_type = "inf" }):item(), 4)
  H.eq(extra.grad, nil)
  ps = with_grads(G)
  H.near(nn.utils.clip_grad_norm_(ps[1], 1):item(), 5, 1e-14)
  H.values(ps[1].grad, { 3 / (5 + 1e-6), -4 / (5 + 1e-6) }, 1e-14)
  H.near(nn.utils.clip_grad_norm_({ extra }, 1):item(), 0)
end)

H.test("clip_grad_norm_ errors", function()
  local ps = with_grads({ { 1.0, math.huge } })
  H.raises(function() nn.utils.clip_grad_norm_(ps, 1, { error_if_nonfinite = true }) end,
           "clip_grad_norm_", "non-finite")
  ps = with_grads({ { 0 / 0 } })
  H.raises(function() nn.utils.clip_grad_norm_(ps, 1, { error_if_nonfinite = true }) end,
           "clip_grad_norm_", "non-finite")
  ps = with_grads({ { 1.0 } })
  H.raises(function() nn.utils.clip_grad_norm_(ps, "1") end, "clip_grad_norm_", "max_norm")
  H.raises(function() nn.utils.clip_grad_norm_(ps, 1, { norm_type = 0 }) end,
           "clip_grad_norm_", "norm_type")
  H.raises(function() nn.utils.clip_grad_norm_(ps, 1, { norm = 2 }) end,
           "clip_grad_norm_", "unknown option 'norm'")
  H.raises(function() nn.utils.clip_grad_norm_({ ps[1], 3 }, 1) end,
           "clip_grad_norm_", "parameter 2", "not a tensor")
  H.raises(function() nn.utils.clip_grad_norm_(5, 1) end, "clip_grad_norm_", "number")
end)

H.test("a training step with RMSNorm and clip_grad_norm_: jit equals eager", function()
  local function make()
    tide.manual_seed(3)
    local model = nn.Sequential(nn.Linear(6, 8), nn.RMSNorm(8), nn.SiLU(), nn.Linear(8, 2))
    local opt = optim.AdamW(model:parameters(), { lr = 0.05 })
    local function step(x, y)
      opt:zero_grad()
      local loss = F.mse_loss(model(x), y)
      loss:backward()
      local total = nn.utils.clip_grad_norm_(model:parameters(), 0.1)
      opt:step()
      return loss, total
    end
    return model, step
  end
  tide.manual_seed(11)
  local x, y = tide.randn(5, 6), tide.randn(5, 2)
  local m1, eager = make()
  local m2, stepfn = make()
  local jitted = tide.jit(stepfn)
  for _ = 1, 4 do
    local l1, t1 = eager(x, y)
    local l2, t2 = jitted(x, y)
    -- the jit may fuse and reorder float32 arithmetic: a few ulps per step
    H.near(l2:item(), l1:item(), 1e-5, "loss")
    H.near(t2:item(), t1:item(), 1e-5, "total norm")
  end
  local p1, p2 = m1:parameters(), m2:parameters()
  for i = 1, #p1 do
    H.values(p2[i], p1[i]:totable(), 1e-5, "parameter " .. i)
  end
end)

H.done()
