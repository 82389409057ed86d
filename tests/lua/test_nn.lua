-- test_nn.lua — the neural-network ops from Lua against plain Lua references: conv2d, pooling
-- (1-based max indices), softmax/log_softmax, losses with 1-based class targets, linear,
-- layer_norm, batch_norm, dropout.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local function conv_ref(X, W, bias, stride, pad)
  local N, C, Hh, Ww = #X, #X[1], #X[1][1], #X[1][1][1]
  local O, kh, kw = #W, #W[1][1], #W[1][1][1]
  local oh = (Hh + 2 * pad - kh) // stride + 1
  local ow = (Ww + 2 * pad - kw) // stride + 1
  return H.build({ N, O, oh, ow }, function(n, o, i, j)
    local s = bias and bias[o] or 0
    for c = 1, C do
      for u = 1, kh do
        for v = 1, kw do
          local y = (i - 1) * stride - pad + u
          local x = (j - 1) * stride - pad + v
          if y >= 1 and y <= Hh and x >= 1 and x <= Ww then
            s = s + X[n][c][y][x] * W[o][c][u][v]
          end
        end
      end
    end
    return s
  end)
end

H.test("conv2d with bias, stride and padding", function()
  local X = H.build({ 2, 3, 5, 6 }, function() return H.rnd() end)
  local W = H.build({ 4, 3, 3, 3 }, function() return H.rnd() end)
  local bias = { 0.1, -0.2, 0.3, 0.0 }
  local x, w, b = tide.tensor(X), tide.tensor(W), tide.tensor(bias)
  H.values(tide.conv2d(x, w), conv_ref(X, W, nil, 1, 0), 1e-4)
  H.values(tide.conv2d(x, w, b, 2, 1), conv_ref(X, W, bias, 2, 1), 1e-4)
  H.values(tide.conv2d(x, w, b, { stride = 2, padding = 1 }), conv_ref(X, W, bias, 2, 1), 1e-4)
  H.values(tide.conv2d(x, w, nil, 1, "same"), conv_ref(X, W, nil, 1, 1), 1e-4)
end)

H.test("max_pool2d returns 1-based indices; avg and adaptive pools", function()
  local x = tide.arange(16, { dtype = "float32" }):view(1, 1, 4, 4)
  local y, idx = tide.max_pool2d(x, 2, 2, 0, true)
  H.values(y, { { { { 5, 7 }, { 13, 15 } } } })
  H.eq(idx:totable(), { { { { 6, 8 }, { 14, 16 } } } })
  H.values(tide.max_pool2d(x, 2), { { { { 5, 7 }, { 13, 15 } } } })
  H.values(tide.avg_pool2d(x, 2), { { { { 2.5, 4.5 }, { 10.5, 12.5 } } } })
  H.values(tide.adaptive_avg_pool2d(x, 1), { { { { 7.5 } } } })
end)

H.test("softmax and log_softmax along a 1-based dim", function()
  local A = H.build({ 2, 3 }, function() return H.rnd() * 2 end)
  local x = tide.tensor(A)
  local want = H.build({ 2, 3 }, function(i, j)
    local s = 0
    for k = 1, 3 do s = s + math.exp(A[i][k]) end
    return math.exp(A[i][j]) / s
  end)
  H.values(x:softmax(2), want, 1e-5)
  H.values(tide.softmax(x, -1), want, 1e-5)
  H.values(x:log_softmax(2), H.map(want, math.log), 1e-5)
  H.values(x:softmax(1):sum(1), { 1, 1, 1 }, 1e-5)
end)

H.test("cross_entropy and nll_loss with 1-based targets", function()
  local A = { { 1.0, 2.0, 0.5 }, { 0.1, 0.2, 3.0 } }
  local target = { 2, 3 }
  local function ce(i)
    local s = 0
    for k = 1, 3 do s = s + math.exp(A[i][k]) end
    return math.log(s) - A[i][target[i]]
  end
  local x, t = tide.tensor(A), tide.tensor(target)
  H.values(tide.cross_entropy(x, t), (ce(1) + ce(2)) / 2, 1e-5)
  H.values(tide.cross_entropy(x, t, { reduction = "sum" }), ce(1) + ce(2), 1e-5)
  H.values(tide.cross_entropy(x, t, "none"), { ce(1), ce(2) }, 1e-5)
  H.values(tide.cross_entropy(x, tide.tensor({ 2, -5 }), { ignore_index = -5 }), ce(1), 1e-5)
  H.values(tide.nll_loss(x:log_softmax(2), t), (ce(1) + ce(2)) / 2, 1e-5)
end)

H.test("mse_loss and binary_cross_entropy_with_logits", function()
  local a, b = tide.tensor({ 1.0, 2.0, 4.0 }), tide.tensor({ 1.5, 2.0, 3.0 })
  H.values(tide.mse_loss(a, b), (0.25 + 0 + 1) / 3, 1e-6)
  H.values(tide.mse_loss(a, b, "sum"), 1.25, 1e-6)
  local z, y = tide.tensor({ 0.0, 2.0 }), tide.tensor({ 1.0, 0.0 })
  local function bce(zv, yv)
    local p = 1 / (1 + math.exp(-zv))
    return -(yv * math.log(p) + (1 - yv) * math.log(1 - p))
  end
  H.values(tide.binary_cross_entropy_with_logits(z, y), (bce(0, 1) + bce(2, 0)) / 2, 1e-5)
end)

H.test("linear, layer_norm, batch_norm, dropout", function()
  local x = tide.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } })
  local w = tide.tensor({ { 1.0, 0.0 }, { 1.0, 1.0 }, { 0.5, -1.0 } })
  local b = tide.tensor({ 0.0, 1.0, 2.0 })
  H.values(tide.linear(x, w, b), { { 1, 4, 0.5 }, { 3, 8, -0.5 } }, 1e-6)
  H.values(tide.linear(x, w), { { 1, 3, -1.5 }, { 3, 7, -2.5 } }, 1e-6)
  local ln = tide.layer_norm(x, { 2 })
  H.values(ln, { { -1, 1 }, { -1, 1 } }, 1e-3)
  H.values(tide.layer_norm(x, 2, tide.tensor({ 2.0, 2.0 }), tide.tensor({ 1.0, 1.0 })),
    { { -1, 3 }, { -1, 3 } }, 1e-3)
  local rm, rv = tide.zeros(2), tide.ones(2)
  H.values(tide.batch_norm(x, rm, rv), { { 1, 2 }, { 3, 4 } }, 1e-4, "eval uses running stats")
  local bn = tide.batch_norm(x, rm, rv, nil, nil, true, 0.1)
  H.values(bn, { { -1, -1 }, { 1, 1 } }, 1e-3)
  H.values(rm, { 0.2, 0.3 }, 1e-5, "running mean updated in place")
  H.values(tide.dropout(x, 0.0), x:totable())
  H.values(tide.dropout(x, 0.5, false), x:totable())
  local d = tide.dropout(tide.ones(1000), 0.5)
  local kept = d:gt(0):sum():item()
  H.ok(kept > 350 and kept < 650, "about half kept")
  H.values(d:max(), 2.0, 1e-6, "kept values are scaled by 1/(1-p)")
end)

H.done()
