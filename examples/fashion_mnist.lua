-- fashion_mnist.lua — trains a classifier on the real Fashion-MNIST training set (60000 images)
-- and reports the test-set accuracy (10000 images); saves a checkpoint and reloads it.
--
--   build/lua/tide examples/fashion_mnist.lua [options]
--   LUA_CPATH="build/lua/?.so;;" lua5.4 examples/fashion_mnist.lua [options]
--
--   mpirun -np 2 build/lua/tide examples/fashion_mnist.lua --ddp [options]   -- data-parallel
--
-- Options: `--help` prints them (USAGE and OPTIONS below). A bad option value ends the script at
-- once with a one-line message naming the option and the value, and exit status 2.
--
-- --ddp: every rank of the launch trains the same model (nn.parallel.DistributedDataParallel:
-- rank 0's initial weights, gradients averaged over the ranks) on its own share of each epoch's
-- shuffled training set (data.DistributedSampler, the same seed on every rank), --batch-size /
-- ranks samples a step, so an epoch over all ranks reads the training set once. The losses
-- reported are means over the ranks; the test set is split among the ranks and their counts
-- summed (the BatchNorm statistics are rank 0's). Only rank 0 prints and writes files.
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"
local optim = require "tide.optim"
local data = require "tide.data"
local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local cli = require "cli" -- option parsing, the writability check, progress pieces

local SCRIPT = "fashion_mnist.lua"

-- ---- options ---------------------------------------------------------------------------------

local USAGE = "usage: fashion_mnist.lua [--model mlp|cnn] [--epochs N] [--batch-size N] [--lr X] "
  .. "[--device cpu] [--limit N] [--test-limit N] [--checkpoint PATH] [--export PATH] [--seed N] "
  .. "[--data DIR] [--autocast float32|bfloat16] [--eager] [--quiet] [--ddp] [--help]"
local OPTIONS = [[
  --model mlp|cnn    MLP 784-512-256-10 (default) or a small CNN (2 conv+BN+pool, 2 linear)
  --epochs N         passes over the training set, N >= 1 (default 5 for the MLP, 3 for the CNN)
  --batch-size N     N >= 1 (default 128)
  --lr X             SGD learning rate, X > 0 (momentum 0.9, cosine schedule; default 0.05);
                     a warning says when the loss diverges, a NaN loss ends the run
  --device NAME      where tensors live (default cpu)
  --limit N          train on the first N >= 1 training samples only (tests, quick looks)
  --test-limit N     evaluate on the first N >= 1 test samples only
  --checkpoint PATH  where the model's state_dict goes (default fashion_mnist_<model>.safetensors);
                     checked to be writable before training starts
  --export PATH      also write the trained model's forward pass (eval mode, logits) as a
                     compiled graph file with a dynamic batch dim, for examples/embed
  --seed N           RNG seed, an integer (default 0)
  --data DIR         dataset folder (default /usr/share/datasets/fashion-mnist)
  --autocast DTYPE   float32 (default) or bfloat16: the training forward pass under
                     tide.autocast (bf16 convolutions and products, float32 weights);
                     evaluation stays float32
  --eager            run train_step eagerly (no tide.jit)
  --quiet            no per-epoch progress output
  --ddp              data-parallel over the ranks of an MPI launch (mpirun -np N ... --ddp):
                     --batch-size is the global batch, split evenly among the ranks (it must
                     divide); each rank reads its share of every epoch and uses the machine's
                     CPUs / its ranks threads (unless TIDE_NUM_THREADS); rank 0 prints and
                     writes the checkpoint. Without mpirun: a world of one
  --help             this text]]
local function usage_error(msg)
  cli.fail(SCRIPT, msg)
end
-- The numeric kinds (examples/cli.lua): "count" an integer >= 1, "positive" a finite number
-- > 0, "integer" any integer.
local args = cli.parse(arg, {
  script = SCRIPT, usage = USAGE, options = OPTIONS,
  values = { model = "mlp", batch_size = 128, device = "cpu", seed = 0, eager = false,
             data = data.FASHION_MNIST_ROOT, autocast = "float32" },
  numeric = { epochs = "count", batch_size = "count", lr = "positive", limit = "count",
              test_limit = "count", seed = "integer" },
  strings = { model = true, device = true, checkpoint = true, data = true, autocast = true,
              export = true },
  flags = { eager = true, quiet = true, ddp = true },
})
if args.model ~= "mlp" and args.model ~= "cnn" then
  usage_error("--model must be mlp or cnn, got '" .. args.model .. "'")
end
if args.autocast ~= "float32" and args.autocast ~= "bfloat16" then
  usage_error("--autocast must be float32 or bfloat16, got '" .. args.autocast .. "'")
end
args.epochs = args.epochs or (args.model == "mlp" and 5 or 3)
args.lr = args.lr or 0.05
args.checkpoint = args.checkpoint or ("fashion_mnist_" .. args.model .. ".safetensors")
if args.ddp and args.seed < 0 then -- DistributedSampler's seeds are >= 0
  usage_error("--seed must be >= 0 with --ddp, got '" .. args.seed .. "'")
end
-- --ddp: joins the ranks, checks the batch divides, sets the threads (examples/cli.lua); without
-- it a world of one whose collectives do nothing. Only rank 0 (D.main) prints.
local D = cli.distributed(SCRIPT, args, tide)
local print = D.main and print or function() end
do -- the device must exist: a clear error now rather than in the middle of training
  local ok, err = pcall(tide.zeros, 1, { device = args.device })
  if not ok then
    io.stderr:write(("fashion_mnist.lua: --device %s: %s\n"):format(args.device, tostring(err)))
    os.exit(2)
  end
end
-- the checkpoint is written after training: find out now that it can be written
D:check_writable(SCRIPT, args.checkpoint, "--checkpoint")
if args.export then D:check_writable(SCRIPT, args.export, "--export") end

tide.manual_seed(args.seed)
local tty = D.main and tide.isatty(io.stdout)

-- ---- data --------------------------------------------------------------------------------------

local t0 = tide.clock()
local ok, train_raw, test_raw = pcall(function()
  return data.FashionMNIST(args.data, { train = true, limit = args.limit }),
    data.FashionMNIST(args.data, { train = false, limit = args.test_limit })
end)
if not ok then
  io.stderr:write("fashion_mnist.lua: " .. tostring(train_raw) .. "\n(the Debian package "
                  .. "dataset-fashion-mnist installs the data; scripts/setup.sh does that)\n")
  os.exit(1)
end
-- uint8 [N, 28, 28] -> float32 in [0, 1], normalized with the training set's mean and std
local MEAN, STD = 0.2860, 0.3530
local function prepare(images)
  local x = (images:float() / 255 - MEAN) / STD
  if args.model == "mlp" then
    return x:reshape(images:size(1), 28 * 28)
  end
  return x:reshape(images:size(1), 1, 28, 28)
end
local train_set = data.TensorDataset(prepare(train_raw.images), train_raw.labels)
local test_x = prepare(test_raw.images)
local test_set = data.TensorDataset(test_x, test_raw.labels)
local loader, sampler
if D.ddp then
  -- this rank's share of each epoch's permutation (from seed + epoch - 1, as DataLoader's seed
  -- gives it alone: a world of one reads the same batches as a run without --ddp)
  sampler = data.DistributedSampler(train_set, { num_replicas = D.world, rank = D.rank,
                                                 shuffle = true, seed = args.seed })
  loader = data.DataLoader(train_set, { batch_size = D.local_batch, sampler = sampler })
else
  loader = data.DataLoader(train_set, { batch_size = args.batch_size, shuffle = true,
                                        seed = args.seed })
end
local test_loader = data.DataLoader(test_set, { batch_size = 1000 })
-- --ddp: this rank's slice of the test set (rank r scores images lo + 1 .. hi)
local my_test_loader = test_loader
if D.world > 1 then
  local n = #test_set
  local lo, hi = n * D.rank // D.world, n * (D.rank + 1) // D.world
  my_test_loader = hi > lo and data.DataLoader(data.TensorDataset(
    test_x:narrow(1, lo + 1, hi - lo), test_raw.labels:narrow(1, lo + 1, hi - lo)),
    { batch_size = 1000 }) or nil
end
print(("Fashion-MNIST: %d training and %d test images (read in %.2f s)"):format(
  #train_set, #test_set, tide.clock() - t0))

-- ---- model, loss, optimizer -----------------------------------------------------------------

local function make_model()
  if args.model == "mlp" then
    return nn.Sequential(
      nn.Linear(784, 512), nn.ReLU(),
      nn.Linear(512, 256), nn.ReLU(),
      nn.Linear(256, 10))
  end
  return nn.Sequential(
    nn.Conv2d(1, 16, 3, { padding = 1 }), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2), -- 16x14x14
    nn.Conv2d(16, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2), -- 32x7x7
    nn.Flatten(),
    nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
    nn.Linear(128, 10))
end

local function on_device(m)
  if args.device ~= "cpu" then
    m:to(args.device)
  end
  return m
end
local function to_device(t)
  if args.device ~= "cpu" then
    return t:to(args.device)
  end
  return t
end

local model = on_device(make_model())
-- net: what the training step calls (with --ddp the wrapper, whose backward averages the
-- gradients over the ranks); model: the module itself, evaluated and saved
local net = D.ddp and nn.parallel.DistributedDataParallel(model) or model
local opt = optim.SGD(model:parameters(), { lr = args.lr, momentum = 0.9 })
local sched = optim.CosineAnnealingLR(opt, args.epochs)
print(("model (%d parameters):\n%s"):format(model:num_parameters(), tostring(model)))
print(("optimizer: SGD lr %g momentum 0.9, cosine schedule over %d epochs; batch %d%s; "
  .. "%d threads; autocast %s"):format(args.lr, args.epochs, args.batch_size,
  D:describe("samples"), tide.get_num_threads(), args.autocast))

-- One training step: forward, loss, backward, optimizer step. tide.jit traces it into one graph,
-- compiled and then replayed: the first step (creating the momentum buffers), the steady step,
-- and the partial last batch, whose new size makes the batch dim symbolic; --eager runs it op by
-- op.
local function forward_loss(x, y) return F.cross_entropy(net(x), y) end
local function train_step(x, y)
  opt:zero_grad()
  local loss = tide.autocast(args.autocast, forward_loss, x, y)
  loss:backward()
  opt:step()
  return loss
end
if not args.eager then train_step = tide.jit(train_step) end

-- The test accuracy of m. With --ddp (and not alone) every rank scores its slice of the test
-- set with rank 0's BatchNorm statistics (each rank's own drift from its batches) and the counts
-- are summed over the ranks; alone: this rank scores the whole test set.
local function evaluate(m, alone)
  local split = D.world > 1 and not alone
  m:eval()
  local correct, total = 0, 0
  tide.no_grad(function()
    if split then
      for _, b in ipairs(m:buffers()) do tide.distributed.broadcast(b, 0) end
    end
    local l = split and my_test_loader or test_loader
    for x, y in (l and l:iter() or function() end) do
      x, y = to_device(x), to_device(y)
      local pred = m(x):argmax(2)
      correct = correct + pred:eq(y):sum():item()
      total = total + y:numel()
    end
  end)
  m:train()
  if split then
    local counts = tide.tensor({ correct, total }, { dtype = "float64" })
    tide.distributed.all_reduce(counts, "sum")
    correct, total = counts[1]:item(), counts[2]:item()
  end
  return correct / total
end

-- ---- progress ----------------------------------------------------------------------------------

local fmt_time = cli.fmt_time

local function progress(epoch, b, nb, loss, elapsed, done_samples, final)
  if args.quiet then return end
  local rate = elapsed > 0 and done_samples / elapsed or 0
  local eta = b > 0 and elapsed / b * (nb - b) or 0
  if tty then
    local bar = cli.bar(b / nb)
    io.stdout:write(("\repoch %d/%d [%s] %d/%d loss %.4f %7.0f samples/s %s %s\27[K"):format(
      epoch, args.epochs, bar, b, nb, loss, rate, final and "in" or "ETA",
      fmt_time(final and elapsed or eta)))
    if final then io.stdout:write("\n") end
    io.stdout:flush()
  elseif final or b % math.max(1, nb // 4) == 0 then
    print(("epoch %d/%d batch %d/%d loss %.4f %.0f samples/s %s %s"):format(
      epoch, args.epochs, b, nb, loss, rate, final and "time" or "ETA",
      fmt_time(final and elapsed or eta)))
  end
end

-- ---- training --------------------------------------------------------------------------------

-- Divergence: a batch's loss that is infinite or more than DIVERGED times the very first batch's
-- loss. At the start the loss is about ln(10) = 2.3 (10 classes, near-uniform predictions), and
-- a run that learns only lowers it; 10 times that means confidently wrong predictions, which
-- comes from steps that overshoot. One warning, then training goes on (a NaN loss ends the run).
local DIVERGED = 10
local first_loss, warned_divergence = nil, false
local function check_divergence(loss, epoch, b)
  first_loss = first_loss or loss
  if warned_divergence or (loss < math.huge and loss <= DIVERGED * first_loss) then return end
  warned_divergence = true
  if not D.main then return end -- the losses are the ranks' means: the same on every rank
  io.stderr:write(("fashion_mnist.lua: warning: the loss is diverging (%.4g at epoch %d batch %d, "
    .. "the first batch's was %.4g): try a lower --lr than %g\n"):format(loss, epoch, b,
                                                                      first_loss, args.lr))
end

local t_train = tide.clock()
local nb = #loader
for epoch = 1, args.epochs do
  local t_epoch = tide.clock()
  local sum, count, samples = 0, 0, 0
  local last_draw = -1
  local b = 0
  if sampler then sampler:set_epoch(epoch - 1) end
  for x, y in loader:iter() do
    -- with --ddp the mean over the ranks: the global batch's loss, and the same on every rank,
    -- so that they take the decisions below together
    local loss = D:mean(train_step(to_device(x), to_device(y)):item())
    if loss ~= loss then
      if D.main then
        io.stderr:write(("fashion_mnist.lua: the loss became NaN at epoch %d batch %d "
          .. "(lower --lr)\n"):format(epoch, b + 1))
      end
      os.exit(1)
    end
    b = b + 1
    check_divergence(loss, epoch, b)
    sum, count, samples = sum + loss, count + 1, samples + y:numel() * D.world
    local now = tide.clock()
    if b < nb and (not tty or now - last_draw >= 0.1) then
      progress(epoch, b, nb, sum / count, now - t_epoch, samples, false)
      last_draw = now
    end
  end
  progress(epoch, nb, nb, sum / math.max(count, 1), tide.clock() - t_epoch, samples, true)
  sched:step()
  if not args.quiet then
    print(("epoch %d: train loss %.4f, test accuracy %.2f%%"):format(epoch, sum / math.max(count, 1),
                                                                   100 * evaluate(model)))
  end
end
local train_time = tide.clock() - t_train
local acc = evaluate(model)
if not D.main then return end -- the rest (reports, files) is rank 0's alone
print(("test accuracy %.2f%% after %d epochs (%s model, %.1f s of training, %d samples/s)")
  :format(100 * acc, args.epochs, args.model, train_time,
          math.floor(args.epochs * #train_set / train_time)))
if not args.eager then
  local st = train_step:stats()
  local n, bs = sampler and sampler:len() or #train_set, D.local_batch
  local last = n % bs
  print(("jit: %d compiles, %d hits, %d fallbacks (last batch %d)"):format(st.compiles, st.hits,
    st.fallbacks, last == 0 and bs or last))
end

-- ---- checkpoint ------------------------------------------------------------------------------

local state = {}
for name, t in pairs(model:state_dict()) do
  state[name] = args.device ~= "cpu" and t:to("cpu") or t -- files are written from the CPU
end
-- accuracy was measured on the first test_samples test images (examples/embed compares with it)
tide.save(args.checkpoint, state, { model = args.model, epochs = args.epochs,
                                    accuracy = ("%.4f"):format(acc), test_samples = #test_set })
local restored = on_device(make_model())
local tensors, meta = tide.load(args.checkpoint)
restored:load_state_dict(tensors)
local same = true
for name, t in pairs(model:state_dict()) do
  same = same and tide.equal(t, restored:state_dict()[name])
end
local acc2 = evaluate(restored, true)
print(("checkpoint %s (%s model): reloaded, %s, test accuracy %.2f%%"):format(
  args.checkpoint, meta.model, same and "same weights" or "WEIGHTS DIFFER", 100 * acc2))
if not same then
  os.exit(1)
end

-- ---- export ----------------------------------------------------------------------------------

-- The forward pass in eval mode (BatchNorm with its running statistics) as one compiled graph
-- with its weights, its batch dim dynamic: examples/embed runs it from C with no Lua and checks
-- the accuracy recorded here.
if args.export then
  model:eval()
  local example = to_device(test_x:narrow(1, 1, 2):contiguous()) -- any batch of 2 or more
  tide.export(function(x) return model(x) end, { example }, args.export,
              { dynamic = { [1] = { 1 } }, input_names = { "images" }, output_names = { "logits" },
                metadata = { model = args.model, accuracy = ("%.4f"):format(acc),
                             test_samples = #test_set } })
  print(("exported %s: the %s model's forward pass with its weights"):format(args.export,
                                                                           args.model))
end
