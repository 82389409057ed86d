-- tide.distributed — collectives between the processes of an MPI launch (torch.distributed's
-- names; docs/distributed.md). Ranks are numbered from 0, as mpirun numbers them.
--
--   local dist = tide.distributed
--   dist.init{timeout = 60}                 -- reads mpirun's environment; world of 1 without it
--   dist.all_reduce(t)                      -- in place: the sum over the ranks ("mean", "max", ...)
--   local w = dist.all_reduce(t, "sum", {async_op = true}); ...; w:wait()
--   dist.broadcast(t, 0)                    -- in place: rank 0's values
--   local parts = dist.all_gather(t)        -- a table of world_size tensors
--   local mine = dist.reduce_scatter(t)     -- t [world * n, ...] -> this rank's [n, ...], summed
--
-- CPU tensors go to MPI as they are; tensors on other devices are staged through host memory.
-- Every rank must call the same collectives in the same order with the same dtypes and shapes;
-- otherwise each rank gets an error (never a hang). A rank that waits longer than the timeout
-- for the others gets an error naming it; after that the group cannot be used again.
local tide = require "tide"

local dist = {}

-- Calls a C collective, so that its error points at the caller's line, not this file's.
local function call(level, fn, ...)
  local ok, r = pcall(fn, ...)
  if not ok then
    error((tostring(r):gsub("^[^:]*distributed%.lua:%d+: ", "")), level + 1)
  end
  return r
end

local ops = { sum = 0, mean = 1, max = 2, min = 3, prod = 4 }
dist.ReduceOp = { SUM = "sum", MEAN = "mean", AVG = "mean", MAX = "max", MIN = "min",
                  PRODUCT = "prod" }

local function reduce_op(name, fn, level)
  local code = ops[name == nil and "sum" or name]
  if not code then
    error(("%s: op must be one of \"sum\", \"mean\", \"max\", \"min\", \"prod\", got %s")
      :format(fn, tostring(name)), level + 1)
  end
  return code
end

-- The options table of a collective: {async_op = bool}.
local function async_opt(opts, fn, level)
  if opts == nil then return false end
  if type(opts) ~= "table" then
    error(("%s: options must be a table such as {async_op = true}, got %s"):format(fn, type(opts)),
      level + 1)
  end
  for k in pairs(opts) do
    if k ~= "async_op" then
      error(("%s: unknown option %q (async_op)"):format(fn, tostring(k)), level + 1)
    end
  end
  return opts.async_op == true
end

-- init([{timeout = seconds}]): joins the ranks; returns rank, world_size. Idempotent.
function dist.init(opts)
  opts = opts or {}
  if type(opts) ~= "table" then
    error("distributed.init: options must be a table such as {timeout = 60}", 2)
  end
  local timeout = opts.timeout
  if timeout ~= nil and (type(timeout) ~= "number" or timeout <= 0) then
    error("distributed.init: timeout must be a positive number of seconds", 2)
  end
  call(2, tide._dist_init, timeout)
  return tide._dist_rank(), tide._dist_world_size()
end
dist.init_process_group = dist.init

function dist.is_available() return tide._dist_available() end
function dist.is_initialized() return tide._dist_is_initialized() end

local function need_init(fn)
  if not tide._dist_is_initialized() then
    error(fn .. ": call tide.distributed.init() first", 3)
  end
end

function dist.rank() need_init("distributed.rank") return tide._dist_rank() end
function dist.world_size() need_init("distributed.world_size") return tide._dist_world_size() end
dist.get_rank, dist.get_world_size = dist.rank, dist.world_size
function dist.barrier() call(2, tide._dist_barrier) end
function dist.set_timeout(seconds) tide._dist_set_timeout(seconds) end
-- abort([code]): ends every rank now (for a rank that failed while others wait for it).
function dist.abort(code) tide._dist_abort(code or 1) end

-- all_reduce(t [, op] [, {async_op}]): t in place; returns t, or a work whose wait() returns t.
function dist.all_reduce(t, op, opts)
  if type(op) == "table" then op, opts = nil, op end
  return call(2, tide._all_reduce, t, reduce_op(op, "all_reduce", 2),
    async_opt(opts, "all_reduce", 2))
end

-- broadcast(t [, src = 0] [, {async_op}]): t in place becomes rank src's t.
function dist.broadcast(t, src, opts)
  if type(src) == "table" then src, opts = nil, src end
  src = src or 0
  if math.type(src) ~= "integer" then
    error("broadcast: src must be a rank (an integer from 0), got " .. tostring(src), 2)
  end
  return call(2, tide._broadcast, t, src, async_opt(opts, "broadcast", 2))
end

-- all_gather_into_tensor(t [, {async_op}]): every rank's t, one after another along dim 1.
function dist.all_gather_into_tensor(t, opts)
  return call(2, tide._all_gather, t, 0, async_opt(opts, "all_gather", 2))
end

-- all_gather(t): a table of world_size tensors, rank r's t at [r + 1] (views of one tensor).
function dist.all_gather(t, opts)
  if async_opt(opts, "all_gather", 2) then
    error("all_gather: for a non-blocking gather use all_gather_into_tensor(t, {async_op = true})", 2)
  end
  local all = call(2, tide._all_gather, t, 0, false)
  local parts = {}
  local n = t:dim() == 0 and 1 or t.shape[1]
  for r = 1, tide._dist_world_size() do
    local part = all:narrow(1, (r - 1) * n + 1, n)
    parts[r] = t:dim() == 0 and part:reshape({}) or part
  end
  return parts
end

-- reduce_scatter(t [, op] [, {async_op}]): t [world * n, ...] reduced; this rank's block [n, ...].
function dist.reduce_scatter(t, op, opts)
  if type(op) == "table" then op, opts = nil, op end
  return call(2, tide._reduce_scatter, t, reduce_op(op, "reduce_scatter", 2),
    async_opt(opts, "reduce_scatter", 2))
end

return dist
