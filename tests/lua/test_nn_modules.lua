-- test_nn_modules.lua — tide.nn modules and tide.nn.functional against plain Lua references:
-- forward of every layer, PyTorch's default initialization bounds, parameter naming,
-- train/eval, zero_grad, state_dict round trips and their errors.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"

local function rnd_table(shape)
  return H.build(shape, function() return H.rnd() end)
end

-- Writes values into a parameter (outside autograd).
local function set(p, values)
  tide.no_grad(function() p:copy_(tide.tensor(values, { dtype = p.dtype })) end)
end

H.test("require paths: tide.nn is the module's field and a preloaded module", function()
  H.ok(tide.nn == nn, "tide.nn == require 'tide.nn'")
  H.ok(tide.nn.functional == F and nn.functional == F, "functional")
  H.ok(tide.optim == require "tide.optim", "tide.optim")
  H.ok(tide.data == require "tide.data", "tide.data")
  H.eq(tide.no_such_field, nil)
end)

H.test("Linear forward against x W^T + b", function()
  local X, W, B = rnd_table({ 3, 4 }), rnd_table({ 2, 4 }), { 0.5, -0.25 }
  local lin = nn.Linear(4, 2)
  set(lin.weight, W)
  set(lin.bias, B)
  local want = H.build({ 3, 2 }, function(i, o)
    local s = B[o]
    for k = 1, 4 do s = s + X[i][k] * W[o][k] end
    return s
  end)
  H.values(lin(tide.tensor(X)), want, 1e-5)
  local nb = nn.Linear(4, 2, { bias = false })
  H.eq(nb.bias, nil)
  H.eq(#nb:parameters(), 1)
  H.eq(tostring(lin), "Linear(in_features=4, out_features=2, bias=true)")
  H.raises(function() nn.Linear(4, 0) end, "Linear", "out_features", "positive")
  H.raises(function() nn.Linear(4, 2, { biass = true }) end, "unknown option 'biass'")
  -- errors point at the caller's line, not inside tide/nn.lua
  local err = H.raises(function() local y = lin(tide.zeros(3, 5)); return y end, "linear", "[3, 5]")
  H.ok(err:find("test_nn_modules.lua:%d+: linear") and not err:find("tide/nn.lua", 1, true), err)
  err = H.raises(function() local y = nn.Sequential(nn.ReLU(), lin)(tide.zeros(3)); return y end,
                 "linear")
  H.ok(err:find("test_nn_modules.lua:%d+: linear"), err)
  err = H.raises(function() local m = nn.Linear(4); return m end, "out_features")
  H.ok(err:find("test_nn_modules.lua:%d+: Linear"), err)
end)

H.test("default init: kaiming_uniform(a=sqrt 5) weights and uniform biases, seeded", function()
  tide.manual_seed(7)
  local lin = nn.Linear(400, 300)
  local bound = 1 / math.sqrt(400)
  local w = lin.weight:double()
  H.ok(w:abs():max():item() <= bound, "weights within +-1/sqrt(fan_in)")
  H.ok(w:abs():max():item() > 0.98 * bound, "weights reach the bound")
  -- the std of U(-b, b) is b / sqrt(3)
  local std = math.sqrt((w * w):mean():item())
  H.near(std, bound / math.sqrt(3), 0.02, "weight std")
  H.ok(lin.bias:abs():max():item() <= bound, "bias bound")
  H.ok(lin.weight.requires_grad and lin.weight.is_leaf, "a leaf that requires grad")
  tide.manual_seed(7)
  local again = nn.Linear(400, 300)
  H.ok(tide.equal(again.weight, lin.weight), "same seed, same weights")
  local conv = nn.Conv2d(3, 8, 5)
  local cb = 1 / math.sqrt(3 * 5 * 5)
  H.ok(conv.weight:abs():max():item() <= cb and conv.weight:abs():max():item() > 0.9 * cb,
       "conv weight bound 1/sqrt(C*kh*kw)")
  H.ok(conv.bias:abs():max():item() <= cb, "conv bias bound")
  H.eq(conv.weight:size(), { 8, 3, 5, 5 })
end)

H.test("nn.init helpers", function()
  local t = tide.empty(20, 30)
  nn.init.constant_(t, 3)
  H.eq(t:min():item(), 3)
  nn.init.zeros_(t)
  H.eq(t:abs():max():item(), 0)
  local fi, fo = nn.init.calculate_fan_in_and_fan_out(tide.empty(8, 3, 5, 5))
  H.eq({ fi, fo }, { 75, 200 })
  nn.init.xavier_uniform_(t)
  H.ok(t:abs():max():item() <= math.sqrt(6 / 50), "xavier bound")
  H.near(nn.init.calculate_gain("relu"), math.sqrt(2), 1e-12)
end)

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

H.test("Conv2d forward with stride and padding; F.conv2d options", function()
  local X, W, B = rnd_table({ 2, 3, 6, 5 }), rnd_table({ 4, 3, 3, 3 }), { 0.1, -0.2, 0.3, 0 }
  local conv = nn.Conv2d(3, 4, 3, { stride = 2, padding = 1 })
  set(conv.weight, W)
  set(conv.bias, B)
  H.values(conv(tide.tensor(X)), conv_ref(X, W, B, 2, 1), 1e-4)
  H.values(F.conv2d(tide.tensor(X), tide.tensor(W), nil, { padding = 1 }),
           conv_ref(X, W, nil, 1, 1), 1e-4)
  H.values(F.conv2d(tide.tensor(X), tide.tensor(W)), conv_ref(X, W, nil, 1, 0), 1e-4)
  H.eq(tostring(conv), "Conv2d(3, 4, kernel_size=3, stride=2, padding=1)")
  local g = nn.Conv2d(4, 6, 1, { groups = 2, bias = false })
  H.eq(g.weight:size(), { 6, 2, 1, 1 })
  H.raises(function() nn.Conv2d(3, 4, 3, { groups = 2 }) end, "divisible by groups")
end)

H.test("pooling modules against references", function()
  local X = rnd_table({ 1, 2, 4, 6 })
  local x = tide.tensor(X)
  local function pool_ref(k, s, reduce)
    local oh, ow = (4 - k) // s + 1, (6 - k) // s + 1
    return H.build({ 1, 2, oh, ow }, function(n, c, i, j)
      local acc = reduce == "max" and -math.huge or 0
      for u = 1, k do
        for v = 1, k do
          local val = X[n][c][(i - 1) * s + u][(j - 1) * s + v]
          if reduce == "max" then acc = math.max(acc, val) else acc = acc + val / (k * k) end
        end
      end
      return acc
    end)
  end
  H.values(nn.MaxPool2d(2)(x), pool_ref(2, 2, "max"), 1e-6)
  H.values(nn.MaxPool2d(3, 1)(x), pool_ref(3, 1, "max"), 1e-6)
  H.values(nn.MaxPool2d(3, { stride = 1 })(x), pool_ref(3, 1, "max"), 1e-6)
  H.values(nn.AvgPool2d(2)(x), pool_ref(2, 2, "avg"), 1e-5)
  H.values(F.max_pool2d(x, 2), pool_ref(2, 2, "max"), 1e-6)
  H.values(F.avg_pool2d(x, 3, { stride = 1 }), pool_ref(3, 1, "avg"), 1e-5)
  local mean = H.build({ 1, 2, 1, 1 }, function(_, c)
    local s = 0
    for i = 1, 4 do for j = 1, 6 do s = s + X[1][c][i][j] end end
    return s / 24
  end)
  H.values(nn.AdaptiveAvgPool2d(1)(x), mean, 1e-5)
  local _, idx = F.max_pool2d(tide.arange(16, { dtype = "float32" }):view(1, 1, 4, 4), 2,
                              { return_indices = true })
  H.eq(idx:totable(), { { { { 6, 8 }, { 14, 16 } } } })
end)

H.test("activations and softmax modules against math", function()
  local A = rnd_table({ 2, 5 })
  for i = 1, 2 do for j = 1, 5 do A[i][j] = A[i][j] * 3 end end
  local x = tide.tensor(A, { dtype = "float64" })
  local function each(f) return H.map(A, f) end
  H.values(nn.ReLU()(x), each(function(v) return math.max(v, 0) end), 1e-12)
  H.values(nn.Sigmoid()(x), each(function(v) return 1 / (1 + math.exp(-v)) end), 1e-12)
  H.values(nn.Tanh()(x), each(function(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end),
           1e-12)
  H.values(nn.SiLU()(x), each(function(v) return v / (1 + math.exp(-v)) end), 1e-12)
  H.values(nn.GELU({ approximate = "tanh" })(x), each(function(v)
    return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)))
  end), 1e-10)
  -- exact GELU: x * Phi(x); compare with a series-free check through symmetry and known values
  local g = nn.GELU()(tide.tensor({ 0, 1, -1 }, { dtype = "float64" }))
  H.values(g, { 0, 0.8413447460685429, -0.15865525393145707 }, 1e-12)
  H.values(nn.LeakyReLU(0.1)(x), each(function(v) return v > 0 and v or 0.1 * v end), 1e-12)
  local sm = H.build({ 2, 5 }, function(i, j)
    local s = 0
    for k = 1, 5 do s = s + math.exp(A[i][k]) end
    return math.exp(A[i][j]) / s
  end)
  H.values(nn.Softmax(2)(x), sm, 1e-12)
  H.values(nn.LogSoftmax(-1)(x), H.map(sm, math.log), 1e-12)
  H.raises(function() nn.Softmax() end, "dim is required")
  H.eq(nn.Flatten()(tide.zeros(2, 3, 4, 5)):size(), { 2, 60 })
  H.eq(nn.Flatten(1)(tide.zeros(2, 3, 4)):size(), { 24 })
  H.eq(nn.Identity()(x), x)
end)

H.test("BatchNorm1d: batch statistics, running stats (unbiased), eval mode", function()
  local X = rnd_table({ 6, 3 })
  local bn = nn.BatchNorm1d(3, { momentum = 0.2 })
  local y = bn(tide.tensor(X, { dtype = "float32" }))
  local mean, var, uvar = {}, {}, {}
  for c = 1, 3 do
    local s = 0
    for i = 1, 6 do s = s + X[i][c] end
    mean[c] = s / 6
    local q = 0
    for i = 1, 6 do q = q + (X[i][c] - mean[c]) ^ 2 end
    var[c], uvar[c] = q / 6, q / 5
  end
  H.values(y, H.build({ 6, 3 }, function(i, c)
    return (X[i][c] - mean[c]) / math.sqrt(var[c] + 1e-5)
  end), 1e-4)
  H.values(bn.running_mean, { 0.2 * mean[1], 0.2 * mean[2], 0.2 * mean[3] }, 1e-5)
  H.values(bn.running_var, { 0.8 + 0.2 * uvar[1], 0.8 + 0.2 * uvar[2], 0.8 + 0.2 * uvar[3] }, 1e-5)
  H.eq(bn.num_batches_tracked:item(), 1)
  bn:eval()
  H.eq(bn.training, false)
  local rm, rv = bn.running_mean:totable(), bn.running_var:totable()
  H.values(bn(tide.tensor(X)), H.build({ 6, 3 }, function(i, c)
    return (X[i][c] - rm[c]) / math.sqrt(rv[c] + 1e-5)
  end), 1e-4)
  H.eq(bn.num_batches_tracked:item(), 1, "eval does not count batches")
  H.raises(function() bn(tide.zeros(4, 5)) end, "BatchNorm1d", "expected 3 channels")
  local keys = {}
  for k in pairs(bn:state_dict()) do keys[#keys + 1] = k end
  table.sort(keys)
  H.eq(keys, { "bias", "num_batches_tracked", "running_mean", "running_var", "weight" })
end)

H.test("BatchNorm2d normalizes over N, H, W", function()
  local X = rnd_table({ 2, 2, 3, 3 })
  local bn = nn.BatchNorm2d(2)
  set(bn.weight, { 2, 0.5 })
  set(bn.bias, { 0.1, -0.1 })
  local y = bn(tide.tensor(X))
  local want = H.build({ 2, 2, 3, 3 }, function(n, c, i, j)
    local s, q = 0, 0
    for a = 1, 2 do for u = 1, 3 do for v = 1, 3 do s = s + X[a][c][u][v] end end end
    local m = s / 18
    for a = 1, 2 do for u = 1, 3 do for v = 1, 3 do q = q + (X[a][c][u][v] - m) ^ 2 end end end
    local w, b = ({ 2, 0.5 })[c], ({ 0.1, -0.1 })[c]
    return (X[n][c][i][j] - m) / math.sqrt(q / 18 + 1e-5) * w + b
  end)
  H.values(y, want, 1e-4)
  H.raises(function() bn(tide.zeros(2, 2)) end, "BatchNorm2d", "4-dim")
end)

H.test("LayerNorm, Dropout, Embedding", function()
  local X = rnd_table({ 3, 4 })
  local ln = nn.LayerNorm(4)
  set(ln.weight, { 1, 2, 3, 4 })
  set(ln.bias, { 0, 0.5, 0, -0.5 })
  H.values(ln(tide.tensor(X)), H.build({ 3, 4 }, function(i, j)
    local s, q = 0, 0
    for k = 1, 4 do s = s + X[i][k] end
    for k = 1, 4 do q = q + (X[i][k] - s / 4) ^ 2 end
    return (X[i][j] - s / 4) / math.sqrt(q / 4 + 1e-5) * j + ({ 0, 0.5, 0, -0.5 })[j]
  end), 1e-4)
  H.values(F.layer_norm(tide.tensor(X), { 4 }), H.build({ 3, 4 }, function(i, j)
    local s, q = 0, 0
    for k = 1, 4 do s = s + X[i][k] end
    for k = 1, 4 do q = q + (X[i][k] - s / 4) ^ 2 end
    return (X[i][j] - s / 4) / math.sqrt(q / 4 + 1e-5)
  end), 1e-4)

  local d = nn.Dropout(0.25)
  local ones = tide.ones(200, 100)
  local y = d(ones)
  local zeros = y:eq(0):sum():item()
  H.ok(zeros > 0.2 * 20000 and zeros < 0.3 * 20000, "about a quarter dropped: " .. zeros)
  H.near(y:max():item(), 1 / 0.75, 1e-6, "survivors scaled by 1/(1-p)")
  d:eval()
  H.eq(d(ones), ones, "identity in eval mode")
  H.raises(function() nn.Dropout(1.5) end, "probability")

  local emb = nn.Embedding(5, 3)
  local Wt = rnd_table({ 5, 3 })
  set(emb.weight, Wt)
  H.values(emb(tide.tensor({ { 1, 5 }, { 3, 3 } })), { { Wt[1], Wt[5] }, { Wt[3], Wt[3] } }, 1e-6)
  H.raises(function() emb(tide.tensor({ 6 })) end, "embedding")
end)

-- A custom module with nested children: names are dotted paths.
local Net = nn.Module:extend("Net")
function Net:__init()
  nn.Module.__init(self)
  self:add_module("layers", nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
  self:add_module("norm", nn.BatchNorm1d(2))
  self:register_parameter("scale", nn.Parameter(tide.ones(1)))
  self:register_buffer("count", tide.zeros(1), false) -- not persistent: not in state_dict
end
function Net:forward(x)
  return self.norm(self.layers(x)) * self.scale
end

H.test("Sequential, ModuleList and custom modules: naming, order, #, ipairs", function()
  local net = Net()
  local names = {}
  for name, p in net:named_parameters() do
    names[#names + 1] = name
    H.ok(tide.is_tensor(p), name)
  end
  H.eq(names, { "scale", "layers.1.weight", "layers.1.bias", "layers.3.weight",
                "layers.3.bias", "norm.weight", "norm.bias" })
  H.eq(#net:parameters(), 7)
  H.eq(net:num_parameters(), 1 + 12 + 4 + 8 + 2 + 2 + 2)
  local sd = net:state_dict()
  local keys = {}
  for k in pairs(sd) do keys[#keys + 1] = k end
  table.sort(keys)
  H.eq(keys, { "layers.1.bias", "layers.1.weight", "layers.3.bias", "layers.3.weight",
               "norm.bias", "norm.num_batches_tracked", "norm.running_mean", "norm.running_var",
               "norm.weight", "scale" })
  H.eq(#net.layers, 3)
  H.ok(net.layers[1].weight == sd["layers.1.weight"], "state_dict shares the tensors")
  local y = net(tide.randn(5, 3))
  H.eq(y:size(), { 5, 2 })
  net:eval()
  H.eq(net.layers[2].training, false)
  H.eq(net.norm.training, false)
  net:train()
  H.eq(net.norm.training, true)

  local seq = nn.Sequential({ nn.Linear(2, 2), nn.Tanh() })
  seq:append(nn.Linear(2, 1))
  H.eq(#seq, 3)
  H.eq(seq[3].out_features, 1)
  local ml = nn.ModuleList({ nn.Linear(2, 2) })
  ml:append(nn.Linear(2, 3))
  local outs = {}
  for i, m in ipairs(ml) do outs[i] = m.out_features end
  H.eq(outs, { 2, 3 })
  H.eq(#ml:parameters(), 4)
  H.raises(function() ml(tide.zeros(1)) end, "ModuleList", "no forward")
  H.ok(tostring(seq):find("(3): Linear(in_features=2, out_features=1, bias=true)", 1, true),
       tostring(seq))
  H.raises(function() nn.Sequential(nn.ReLU(), 5) end, "must be a module")
end)

H.test("zero_grad after backward; parameters shared between modules count once", function()
  local lin = nn.Linear(3, 2)
  local seq = nn.Sequential(lin, nn.ReLU(), lin)
  H.eq(#seq:parameters(), 0 + 2, "a module used twice: its parameters once")
  local model = nn.Sequential(nn.Linear(3, 2))
  local loss = model(tide.randn(4, 3)):sum()
  loss:backward()
  H.ok(model[1].weight.grad ~= nil, "grad after backward")
  H.values(model[1].bias.grad, { 4, 4 }, 1e-6)
  model:zero_grad()
  H.eq(model[1].weight.grad, nil)
  loss = model(tide.randn(4, 3)):sum()
  loss:backward()
  model:zero_grad(false)
  H.values(model[1].bias.grad, { 0, 0 })
end)

H.test("state_dict / load_state_dict round trip and errors", function()
  tide.manual_seed(1)
  local a = Net()
  tide.manual_seed(2)
  local b = Net()
  local x = tide.randn(4, 3)
  a:eval()
  b:eval()
  H.ok(not tide.allclose(a(x), b(x)), "different seeds differ")
  tide.no_grad(function() a.norm.running_mean:copy_(tide.tensor({ 0.5, -0.5 })) end)
  local missing, unexpected = b:load_state_dict(a:state_dict())
  H.eq(#missing + #unexpected, 0)
  H.ok(tide.equal(a(x), b(x)), "same outputs after loading")
  H.ok(tide.equal(b.norm.running_mean, a.norm.running_mean), "buffers loaded")
  H.ok(b.layers[1].weight.requires_grad and b.layers[1].weight.is_leaf, "still a leaf param")
  H.ok(not b.layers[1].weight:shares_storage(a.layers[1].weight), "copied, not shared")

  local sd = a:state_dict()
  local partial = {}
  for k, v in pairs(sd) do partial[k] = v end
  partial["layers.1.weight"] = nil
  partial["extra.weight"] = tide.zeros(1)
  H.raises(function() b:load_state_dict(partial) end, "missing keys: layers.1.weight",
           "unexpected keys: extra.weight")
  local m, u = b:load_state_dict(partial, false)
  H.eq(m, { "layers.1.weight" })
  H.eq(u, { "extra.weight" })
  local wrong = {}
  for k, v in pairs(sd) do wrong[k] = v end
  wrong["layers.3.weight"] = tide.zeros(3, 4)
  H.raises(function() b:load_state_dict(wrong) end, "size mismatch for 'layers.3.weight'",
           "{3, 4}", "{2, 4}")
end)

H.test("Module:double() converts parameters and buffers; grads flow in float64", function()
  local net = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)):double()
  H.eq(net[1].weight.dtype, "float64")
  H.eq(net[2].running_var.dtype, "float64")
  H.ok(net[1].weight.requires_grad, "requires_grad kept")
  local y = net(tide.randn(4, 3, { dtype = "float64" }))
  H.eq(y.dtype, "float64")
  y:sum():backward()
  H.eq(net[1].weight.grad.dtype, "float64")
  local w = net[1].weight
  net:to("cpu")
  H.ok(net[1].weight == w, "to the device it is on: the same tensors")
  net:to({ dtype = "float32", device = "cpu" })
  H.eq(net[1].weight.dtype, "float32")
  H.ok(net[1].weight.is_leaf and net[1].weight.requires_grad, "a leaf again")
  H.raises(function() net:to(5) end, "expected a dtype name")
end)

H.test("losses: F.cross_entropy with label smoothing, nll, mse, l1; loss modules", function()
  local Z = { { 1.0, 2.0, 0.5 }, { -1.0, 0.0, 3.0 } }
  local T = { 2, 3 }
  local logits, target = tide.tensor(Z, { dtype = "float64" }), tide.tensor(T)
  local function lse(r) local s = 0 for _, v in ipairs(r) do s = s + math.exp(v) end return math.log(s) end
  local ce, smooth = 0, 0
  for i = 1, 2 do
    local l = lse(Z[i])
    ce = ce + (l - Z[i][T[i]]) / 2
    local mean_nll = 0
    for c = 1, 3 do mean_nll = mean_nll + (l - Z[i][c]) / 3 end
    smooth = smooth + (0.9 * (l - Z[i][T[i]]) + 0.1 * mean_nll) / 2
  end
  H.near(F.cross_entropy(logits, target):item(), ce, 1e-12)
  H.near(nn.CrossEntropyLoss()(logits, target):item(), ce, 1e-12)
  H.near(F.cross_entropy(logits, target, { label_smoothing = 0.1 }):item(), smooth, 1e-12)
  H.near(F.cross_entropy(logits, target, { reduction = "sum" }):item(), 2 * ce, 1e-12)
  H.near(F.nll_loss(F.log_softmax(logits, 2), target):item(), ce, 1e-12)
  local a = tide.tensor({ 1, 2, 3 }, { dtype = "float64" })
  local b = tide.tensor({ 1.5, 1, 3 }, { dtype = "float64" })
  H.near(F.mse_loss(a, b):item(), (0.25 + 1) / 3, 1e-12)
  H.near(nn.L1Loss()(a, b):item(), 0.5, 1e-12)
  H.near(F.l1_loss(a, b, "sum"):item(), 1.5, 1e-12)
  H.raises(function() F.cross_entropy(logits, tide.tensor({ 0, 1 })) end, "cross_entropy")
end)

H.done()
