-- test_pytorch_checkpoint.lua — state dicts saved by PyTorch load into the same tide model with
-- {from = "pytorch"} (load_state_dict and tide.load) and compute PyTorch's values; tide writes
-- PyTorch's names with state_dict({to = "pytorch"}); mismatches are errors naming keys and
-- shapes. The fixtures in data/ were written by scripts/make_torch_fixtures.py with Debian's
-- python3-torch (1.13): each model's state_dict() as PyTorch names it, and a fixed input with
-- the outputs PyTorch computed from it.
--
-- Tolerance: |tide - torch| <= 1e-5 * (1 + |torch|). Both compute in float32 with their own
-- summation orders (a conv's 18-term and a Linear's 48-term dot products, batch and layer
-- statistics); the outputs are O(1), where one float32 ulp is 1.2e-7, so the few dozen ulps
-- that reordering can cost stay well inside 1e-5, while a misplaced or transposed tensor
-- moves the outputs by 1e-2 or more.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"

local DATA = (arg[0]:match("(.*/)") or "./") .. "data/"
local TOL = 1e-5

-- The tide twin of sequential_model() in scripts/make_torch_fixtures.py.
local function sequential_model()
  return nn.Sequential(
    nn.Sequential(nn.Conv2d(2, 3, 3, { padding = 1 }), nn.BatchNorm2d(3), nn.ReLU()),
    nn.Flatten(),
    nn.Linear(3 * 4 * 4, 8),
    nn.BatchNorm1d(8),
    nn.ReLU(),
    nn.Sequential(nn.Linear(8, 6), nn.LayerNorm(6), nn.Tanh(), nn.Linear(6, 3)))
end

-- The tide twin of EmbedNet.
local EmbedNet = nn.Module:extend("EmbedNet")
function EmbedNet:__init()
  nn.Module.__init(self)
  self:add_module("embed", nn.Embedding(10, 6))
  self:add_module("blocks", nn.ModuleList({ nn.Sequential(nn.Linear(6, 6), nn.GELU()),
                                            nn.Sequential(nn.Linear(6, 6), nn.GELU()) }))
  self:add_module("head", nn.Linear(6, 2))
end
function EmbedNet:forward(idx)
  local x = self.embed(idx)
  for _, block in ipairs(self.blocks:children()) do
    x = x + block(x)
  end
  return self.head(x)
end

local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do
    out[#out + 1] = k
  end
  table.sort(out)
  return out
end

local function close(got, want, what)
  H.values(got, want:totable(), TOL, what)
end

H.test("a nested PyTorch Sequential loads with {from = \"pytorch\"} and gives PyTorch's outputs",
       function()
  local sd, meta = tide.load(DATA .. "pytorch_sequential.safetensors")
  H.eq(meta.torch ~= nil, true, "the fixture records the torch version")
  H.ok(sd["0.0.weight"] and sd["5.3.bias"], "the file has PyTorch's names")
  local model = sequential_model()
  local missing, unexpected = model:load_state_dict(sd, { from = "pytorch" })
  H.eq(#missing + #unexpected, 0)
  -- Every tensor landed in its twin, at every nesting level.
  H.ok(tide.equal(model[1][1].weight, sd["0.0.weight"]), "conv weight [3, 2, 3, 3]")
  H.ok(tide.equal(model[1][2].running_var, sd["0.1.running_var"]), "BatchNorm2d running_var")
  H.ok(tide.equal(model[3].weight, sd["2.weight"]), "Linear weight [out, in]")
  H.ok(tide.equal(model[6][2].weight, sd["5.1.weight"]), "LayerNorm weight")
  H.ok(tide.equal(model[6][4].bias, sd["5.3.bias"]), "the last Linear's bias")
  local io = tide.load(DATA .. "pytorch_sequential_io.safetensors")
  model:eval()
  close(model(io.input), io.output_eval, "eval output (running statistics)")
end)

H.test("BatchNorm's num_batches_tracked: PyTorch's int64 loads; training continues as PyTorch's",
       function()
  local sd = tide.load(DATA .. "pytorch_sequential.safetensors")
  H.eq(sd["0.1.num_batches_tracked"].dtype, "int64", "PyTorch stores it as int64")
  H.eq(sd["0.1.num_batches_tracked"]:item(), 3)
  local model = sequential_model()
  model:load_state_dict(sd, { from = "pytorch" })
  local bn = model[1][2]
  H.eq(bn.num_batches_tracked.dtype, "int64")
  H.eq(bn.num_batches_tracked:item(), 3, "loaded, not left at 0")
  H.eq(model[4].num_batches_tracked:item(), 3, "BatchNorm1d too")
  -- One training-mode pass: batch statistics in the output, running statistics updated with
  -- momentum 0.1 and the unbiased variance, the counter at 4: all as PyTorch computed them.
  local io = tide.load(DATA .. "pytorch_sequential_io.safetensors")
  model:train()
  local y
  tide.no_grad(function() y = model(io.input) end)
  close(y, io.output_train, "train output (batch statistics)")
  close(bn.running_mean, io.bn_running_mean_after, "running_mean after the pass")
  close(bn.running_var, io.bn_running_var_after, "running_var after the pass")
  H.eq(bn.num_batches_tracked:item(), io.bn_num_batches_tracked_after:item(), "counter")
  H.eq(bn.num_batches_tracked:item(), 4)
end)

H.test("a custom module with an Embedding and a ModuleList of Sequentials", function()
  local sd = tide.load(DATA .. "pytorch_embednet.safetensors")
  H.eq(sorted_keys(sd), { "blocks.0.0.bias", "blocks.0.0.weight", "blocks.1.0.bias",
                          "blocks.1.0.weight", "embed.weight", "head.bias", "head.weight" })
  local model = EmbedNet()
  model:load_state_dict(sd, { from = "pytorch" })
  H.ok(tide.equal(model.blocks[2][1].weight, sd["blocks.1.0.weight"]), "blocks.1.0 -> 2.1")
  H.ok(tide.equal(model.embed.weight, sd["embed.weight"]), "same [num, dim] layout")
  local io = tide.load(DATA .. "pytorch_embednet_io.safetensors")
  -- PyTorch's indices count from 0, tide's from 1: the same rows, indices one higher.
  close(model:eval()(io.input + 1), io.output, "output")
end)

H.test("tide.load(path, {from = \"pytorch\"}) gives tide's names", function()
  local path = DATA .. "pytorch_sequential.safetensors"
  local sd = tide.load(path, { from = "pytorch" })
  local model = sequential_model()
  H.eq(sorted_keys(sd), sorted_keys(model:state_dict()))
  model:load_state_dict(sd) -- already renamed: no option
  local io = tide.load(DATA .. "pytorch_sequential_io.safetensors")
  close(model:eval()(io.input), io.output_eval, "eval output")
  H.eq(sorted_keys(tide.load(path, { from = "tide" })), sorted_keys(tide.load(path)))
  -- The rule, on names no model has: whole-number components but the last gain one.
  local tmp = os.tmpname()
  local one = tide.ones(1)
  tide.save(tmp, { ["blocks.0.0.weight"] = one, ["x.9.y"] = one, ["params.0"] = one,
                   ["007.w"] = one, ["a.10.b.99.c"] = one, plain = one })
  local got = tide.load(tmp, { from = "pytorch" })
  os.remove(tmp)
  H.eq(sorted_keys(got), { "007.w", "a.11.b.100.c", "blocks.1.1.weight", "params.0", "plain",
                           "x.10.y" })
end)

H.test("state_dict({to = \"pytorch\"}) writes PyTorch's names and tensors", function()
  local file = tide.load(DATA .. "pytorch_sequential.safetensors")
  local model = sequential_model()
  model:load_state_dict(file, { from = "pytorch" })
  local sd = model:state_dict({ to = "pytorch" })
  H.eq(sorted_keys(sd), sorted_keys(file))
  local tmp = os.tmpname()
  tide.save(tmp, sd)
  local back = tide.load(tmp)
  os.remove(tmp)
  for name, t in pairs(file) do
    H.eq(back[name].dtype, t.dtype, name)
    H.ok(tide.equal(back[name], t), name)
  end
  H.eq(sorted_keys(EmbedNet():state_dict({ to = "pytorch" })),
       sorted_keys(tide.load(DATA .. "pytorch_embednet.safetensors")))
  H.eq(sorted_keys(model:state_dict({ to = "tide" })), sorted_keys(model:state_dict()))
end)

H.test("mismatching state dicts: errors name the keys, the shapes and the fix", function()
  local file = tide.load(DATA .. "pytorch_sequential.safetensors")
  local model = sequential_model()
  -- PyTorch's names without the option: the message says so.
  H.raises(function() model:load_state_dict(file) end,
           "load_state_dict: missing keys: 1.1.bias", "unexpected keys: 0.0.bias",
           "pass {from = \"pytorch\"}")
  -- tide's names with the option (renamed twice): the message says so too.
  H.raises(function() model:load_state_dict(model:state_dict(), { from = "pytorch" }) end,
           "load_state_dict (from = \"pytorch\"): missing keys: 0.0.bias",
           "leave out from = \"pytorch\"")
  -- A different model: PyTorch's key and tide's, both shapes.
  local wider = nn.Sequential(
    nn.Sequential(nn.Conv2d(2, 3, 3, { padding = 1 }), nn.BatchNorm2d(3), nn.ReLU()),
    nn.Flatten(), nn.Linear(48, 9), nn.BatchNorm1d(8), nn.ReLU(),
    nn.Sequential(nn.Linear(8, 6), nn.LayerNorm(6), nn.Tanh(), nn.Linear(6, 3)))
  H.raises(function() wider:load_state_dict(file, { from = "pytorch" }) end,
           "size mismatch for '2.weight' (the module's '3.weight'): the checkpoint has {8, 48}, "
             .. "the module {9, 48}")
  -- A key missing and one extra, non-strict: the lists come back in PyTorch's names.
  local partial = {}
  for k, v in pairs(file) do
    partial[k] = v
  end
  partial["5.3.bias"], partial["5.9.bias"] = nil, file["5.3.bias"]
  H.raises(function() model:load_state_dict(partial, { from = "pytorch" }) end,
           "missing keys: 5.3.bias; unexpected keys: 5.9.bias")
  local missing, unexpected = model:load_state_dict(partial, { from = "pytorch", strict = false })
  H.eq(missing, { "5.3.bias" })
  H.eq(unexpected, { "5.9.bias" })
  H.ok(tide.equal(model[6][4].weight, file["5.3.weight"]), "the rest loaded")
  -- Options.
  H.raises(function() model:load_state_dict(file, { from = "keras" }) end,
           "from must be \"pytorch\" or \"tide\", got keras")
  H.raises(function() model:load_state_dict(file, { form = "pytorch" }) end,
           "unknown option 'form'")
  H.raises(function() model:state_dict({ from = "pytorch" }) end, "unknown option 'from'")
  H.raises(function() model:state_dict("pytorch") end, "expected an options table")
  local path = DATA .. "pytorch_sequential.safetensors"
  H.raises(function() tide.load(path, { from = "onnx" }) end,
           "from must be \"pytorch\" or \"tide\", got onnx")
  H.raises(function() tide.load(path, { strict = true }) end, "unknown option 'strict'")
  -- The metadata tide.load returns second is not taken for options.
  model:load_state_dict(tide.load(DATA .. "pytorch_sequential.safetensors", { from = "pytorch" }))
end)

H.done()
