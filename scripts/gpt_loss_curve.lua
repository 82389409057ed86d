-- tide's side of the GPT loss-curve comparison (issue 21, Deliver 5): replays the run that
-- scripts/gpt_loss_curve.py recorded with PyTorch — the same initial weights, batches and
-- learning rates, read from its file, so no seed is shared — with tide.models.gpt and the
-- training step under tide.jit, and compares the two loss curves step by step:
--
--   /usr/bin/python3 scripts/gpt_loss_curve.py /tmp/curve.safetensors      # PyTorch's run
--   tide scripts/gpt_loss_curve.lua /tmp/curve.safetensors [--eager]       # tide's, compared
--
-- The target: every step's loss within 2% of PyTorch's (exit status 1 otherwise). Both runs
-- are float32 with their own summation orders, so they drift apart a little as training
-- amplifies rounding differences; the curves must stay together.
local tide = require "tide"
local gpt = require "tide.models.gpt"
local nn = require "tide.nn"

local path = arg[1]
local eager = arg[2] == "--eager"
if not path then
  io.stderr:write("usage: tide scripts/gpt_loss_curve.lua CURVE.safetensors [--eager]\n")
  os.exit(2)
end
local TOL, CLIP = 0.02, 1.0

local f, meta = tide.load(path)
local cfg = {}
for _, k in ipairs({ "vocab_size", "block_size", "n_layer", "n_head", "n_embd" }) do
  cfg[k] = math.tointeger(tonumber(meta[k]))
end
local model = gpt.GPT(cfg)
local init = {}
for name, t in pairs(f) do
  local p = name:match("^init%.(.*)$")
  if p then init[p] = t end
end
model:load_state_dict(init, { from = "pytorch" })
local opt = model:configure_optimizer({ lr = 1e-3, weight_decay = 0.1, betas = { 0.9, 0.95 },
                                        eps = 1e-8 })
local batches, lrs, want = f.batches + 1, f.lrs:totable(), f.losses:totable()
local steps, T = batches:size(1), batches:size(3) - 1

local function train_step(x, y)
  opt:zero_grad()
  local loss = model:loss(x, y)
  loss:backward()
  nn.utils.clip_grad_norm_(model:parameters(), CLIP)
  opt:step()
  return loss
end
if not eager then train_step = tide.jit(train_step) end

print(("%s preset, %d parameters, %d steps of %d x %d, %s"):format(meta.preset,
  model:num_parameters(), steps, batches:size(2), T, eager and "eager" or "tide.jit"))
local worst, worst_step = 0, 0
local t0 = os.time()
for s = 1, steps do
  opt.lr = lrs[s]
  local b = batches:select(1, s)
  local loss = train_step(b:narrow(2, 1, T):contiguous(), b:narrow(2, 2, T):contiguous()):item()
  local rel = math.abs(loss - want[s]) / want[s]
  if not (rel <= worst) then worst, worst_step = rel, s end
  if s % 20 == 1 or s == steps then
    print(("step %4d  tide %.4f  torch %.4f  rel %.2e"):format(s, loss, want[s], rel))
    io.stdout:flush()
  end
end
print(("worst relative difference %.3e at step %d (target <= %g); %d s"):format(worst,
  worst_step, TOL, os.time() - t0))
os.exit(worst <= TOL and 0 or 1)
