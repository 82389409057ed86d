-- test_train.lua — a short training run on a slice of the real Fashion-MNIST (2000 training
-- images, 1000 test images): an MLP with SGD+momentum must bring the mean loss of its last epoch
-- below 0.6 and reach 70% test accuracy; an Adam-trained small CNN must lower its loss too.
-- Skipped (with the reason printed) when the dataset is absent.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"
local optim = require "tide.optim"
local data = require "tide.data"

local root = data.FASHION_MNIST_ROOT
local f = io.open(root .. "/train-images-idx3-ubyte.gz", "rb")
if not f then
  print("SKIP test_train: " .. root .. " is absent (Debian package dataset-fashion-mnist)")
  H.done()
end
f:close()

local function prepare(ds, shape)
  local x = (ds.images:float() / 255 - 0.2860) / 0.3530
  return data.TensorDataset(x:reshape(shape(ds.images:size(1))), ds.labels)
end

local function accuracy(model, ds)
  model:eval()
  local correct = 0
  tide.no_grad(function()
    for x, y in data.DataLoader(ds, { batch_size = 500 }):iter() do
      correct = correct + model(x):argmax(2):eq(y):sum():item()
    end
  end)
  model:train()
  return correct / #ds
end

local function train(model, opt, loader, epochs)
  local last
  for _ = 1, epochs do
    local sum, n = 0, 0
    for x, y in loader:iter() do
      opt:zero_grad()
      local loss = F.cross_entropy(model(x), y)
      loss:backward()
      opt:step()
      sum, n = sum + loss:item(), n + 1
    end
    last = sum / n
  end
  return last
end

H.test("MLP on 2000 Fashion-MNIST images: loss below 0.6, test accuracy above 70%", function()
  tide.manual_seed(0)
  local flat = function(n) return { n, 784 } end
  local train_set = prepare(data.FashionMNIST(root, { limit = 2000 }), flat)
  local test_set = prepare(data.FashionMNIST(root, { train = false, limit = 1000 }), flat)
  local model = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
  local opt = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
  local loader = data.DataLoader(train_set, { batch_size = 50, shuffle = true, seed = 1 })
  local first = tide.no_grad(function()
    local x, y = loader:iter()()
    return F.cross_entropy(model(x), y):item()
  end)
  H.ok(first > 1.8, "an untrained model's loss is near log(10): " .. first)
  local last = train(model, opt, loader, 4)
  print(("test_train: MLP loss %.3f -> %.3f, test accuracy %.1f%%"):format(
    first, last, 100 * accuracy(model, test_set)))
  H.ok(last < 0.6, "last epoch's mean loss " .. last)
  H.ok(accuracy(model, test_set) > 0.70, "test accuracy")
end)

H.test("small CNN with Adam on 500 images: the loss falls", function()
  tide.manual_seed(0)
  local img = function(n) return { n, 1, 28, 28 } end
  local train_set = prepare(data.FashionMNIST(root, { limit = 500 }), img)
  local model = nn.Sequential(nn.Conv2d(1, 8, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(8, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 7 * 7, 10))
  local opt = optim.Adam(model:parameters(), { lr = 3e-3 })
  local loader = data.DataLoader(train_set, { batch_size = 50, shuffle = true, seed = 1 })
  local first = train(model, opt, loader, 1)
  local last = train(model, opt, loader, 2)
  print(("test_train: CNN loss first epoch %.3f, third epoch %.3f"):format(first, last))
  H.ok(last < 0.8 and last < first, "CNN loss " .. first .. " -> " .. last)
end)

H.test("examples/fashion_mnist.lua runs end to end on a slice and writes a checkpoint", function()
  local here = arg[0]:match("(.*/)") or "./"
  local script = here .. "../../examples/fashion_mnist.lua"
  local interp = arg[-1]
  if not interp or not io.open(script, "r") then
    print("SKIP example run: interpreter or script not found")
    return
  end
  local ckpt = os.tmpname()
  local cmd = ("%q %q --limit 1000 --test-limit 500 --epochs 1 --batch-size 100 --checkpoint %q "
               .. "--eager 2>&1"):format(interp, script, ckpt)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  H.ok(ok, "the example failed:\n" .. out)
  H.ok(out:find("epoch 1/1 batch 10/10", 1, true), "plain progress lines when not a terminal:\n" .. out)
  local acc = tonumber(out:match("test accuracy ([%d.]+)%% after 1 epochs"))
  H.ok(acc and acc > 50, "accuracy line:\n" .. out)
  H.ok(out:find("reloaded, same weights, test accuracy", 1, true), out)
  local tensors, meta = tide.load(ckpt)
  os.remove(ckpt)
  H.eq(meta.model, "mlp")
  H.eq(tensors["1.weight"]:size(), { 512, 784 })
  H.eq(tensors["5.bias"]:size(), { 10 })
  local bad = assert(io.popen(("%q %q --model rnn 2>&1"):format(interp, script)))
  local msg = bad:read("a")
  H.ok(not bad:close() and msg:find("--model must be mlp or cnn", 1, true), msg)
end)

H.done()
