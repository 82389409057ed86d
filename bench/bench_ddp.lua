-- bench_ddp.lua — the Fashion-MNIST MLP (784-512-256-10, ReLU, cross-entropy, SGD with momentum)
-- trained on random data with a global batch of 128: throughput in samples/s, one process or
-- each rank of an MPI launch through DistributedDataParallel on its share of the batch. Run by
-- bench/bench_ddp.sh, which alternates 1 rank x 2 threads with 2 ranks x 1 thread:
--
--   tide bench/bench_ddp.lua [--ddp] [--eager] [--seconds S] [--batch GLOBAL] [--bucket-mb MB]
--
-- The buckets are DistributedDataParallel's default (25 MB: the whole MLP in one, as
-- examples/fashion_mnist.lua --ddp runs it) unless --bucket-mb sets them (bench_ddp.sh: 0.5 MB,
-- four buckets, for the share hidden under backward).
--
-- Prints (rank 0): `ddp_samples_per_s: N samples/s` (or `single_...`), and with --ddp --eager
-- the all_reduce time a step spends waiting after backward against the time the same buckets
-- take reduced alone: the share of the reduction hidden under backward.
local tide = require "tide"
local nn = require "tide.nn"
local F = require "tide.nn.functional"
local optim = require "tide.optim"

local use_ddp, eager, seconds, GLOBAL, bucket_mb = false, false, 3, 128, 25
for i, a in ipairs(arg) do
  if a == "--ddp" then use_ddp = true
  elseif a == "--eager" then eager = true
  elseif a == "--seconds" then seconds = tonumber(arg[i + 1])
  elseif a == "--bucket-mb" then bucket_mb = tonumber(arg[i + 1])
  elseif a == "--batch" then GLOBAL = tonumber(arg[i + 1]) end
end

local dist = tide.distributed
local rank, world = 0, 1
if use_ddp then rank, world = dist.init{ timeout = 120 } end
local batch = GLOBAL // world

tide.manual_seed(0)
local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                            nn.Linear(256, 10))
local ddp = use_ddp and nn.parallel.DistributedDataParallel(model, { bucket_cap_mb = bucket_mb }) or nil
local net = ddp or model
local opt = optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
tide.manual_seed(1 + rank)
local x = tide.randn(batch, 784)
local y = tide.randint(1, 11, { batch })
local function step()
  opt:zero_grad()
  local loss = F.cross_entropy(net(x), y)
  loss:backward()
  opt:step()
  return loss
end
if not eager then step = tide.jit(step) end

-- Every rank runs the same number of steps: rank 0 decides when the time is up.
local function run_for(s)
  local n, t0, go = 0, tide.clock(), tide.tensor(1)
  local exposed, steps_timed = 0, 0
  repeat
    step()
    n = n + 1
    if ddp and eager and ddp.timeline.wait_end then
      exposed = exposed + (ddp.timeline.wait_end - ddp.timeline.backward_end)
      steps_timed = steps_timed + 1
    end
    if n % 10 == 0 then
      go:fill_((rank ~= 0 or tide.clock() - t0 < s) and 1 or 0)
      if use_ddp then dist.broadcast(go, 0) end
    end
  until n % 10 == 0 and go:item() == 0
  return n * GLOBAL / (tide.clock() - t0), exposed / math.max(steps_timed, 1)
end

run_for(0.5) -- warm-up: compiles, caches, BLAS threads
local rate, exposed = run_for(seconds)
if rank == 0 then
  print(("%s_samples_per_s: %.0f samples/s (%d rank%s x %d thread%s, %s, global batch %d)")
    :format(use_ddp and "ddp" or "single", rate, world, world > 1 and "s" or "",
      tide.get_num_threads(), tide.get_num_threads() > 1 and "s" or "",
      eager and "eager" or "jit", GLOBAL))
end
if ddp and eager then
  -- the same buckets reduced alone, blocking, one after another
  local reps, t0 = 20, 0
  dist.barrier()
  t0 = tide.clock()
  for _ = 1, reps do
    for _, b in ipairs(ddp.buckets) do dist.all_reduce(b.buffer, "mean") end
  end
  local alone = (tide.clock() - t0) / reps
  if rank == 0 then
    print(("ddp_allreduce_alone: %.3f ms per step (%d buckets, %.2f MB)"):format(alone * 1e3,
      #ddp.buckets, model:num_parameters() * 4 / 2 ^ 20))
    print(("ddp_allreduce_exposed: %.3f ms per step (waited after backward)"):format(exposed * 1e3))
    print(("ddp_hidden_share: %.2f ratio (1 - exposed / alone)"):format(
      math.max(0, 1 - exposed / alone)))
  end
end
