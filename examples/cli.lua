-- examples/cli.lua — what the example scripts share: command-line options with one-line errors,
-- a check that an output file can be written, and the pieces of a progress line.
--
--   package.path = script_dir .. "/?.lua;" .. package.path
--   local cli = require "cli"
--   local args = cli.parse(arg, { script = "gpt.lua", usage = USAGE, options = OPTIONS,
--                                 values = { steps = 1000 }, numeric = { steps = "count" },
--                                 strings = { checkpoint = true }, flags = { quiet = true } })
--
-- Option names are written --like-this and stored like_this; --name=value and --name value both
-- work. A mistake ends the script at once: one line on stderr naming the option and the value,
-- exit status 2, no traceback.
local cli = {}

-- What each numeric kind accepts, and how the error message says it.
local wanted = {
  count = "a positive integer",         -- an integer >= 1
  natural = "an integer >= 0",
  integer = "an integer",
  positive = "a finite number > 0",
  nonnegative = "a finite number >= 0",
}

function cli.fail(script, msg)
  io.stderr:write(script .. ": " .. msg .. " (--help for the usage)\n")
  os.exit(2)
end

local function accepts(kind, v)
  if v == nil then return false end
  if kind == "count" then return v >= 1 end
  if kind == "natural" then return v >= 0 end
  if kind == "positive" then return v > 0 and v < math.huge end
  if kind == "nonnegative" then return v >= 0 and v < math.huge end
  return true
end

-- The value of a numeric option, or a usage error naming the option and the value.
local function numeric_value(spec, key, val)
  local kind, v = spec.numeric[key], tonumber(val)
  if v and kind ~= "positive" and kind ~= "nonnegative" then
    v = math.tointeger(v) -- 2.0 is the integer 2; 2.5 is not an integer
  end
  if not accepts(kind, v) then
    cli.fail(spec.script, ("--%s must be %s, got '%s'"):format(key:gsub("_", "-"), wanted[kind],
                                                               val))
  end
  return v
end

-- cli.parse(argv, spec) -> the table spec.values, with the options given filled in. spec: script
-- (its name in messages), usage and options (the --help text), values (the defaults), numeric
-- ({key = kind}), strings ({key = true}: options taking any text), flags ({key = true}).
function cli.parse(argv, spec)
  local args = spec.values or {}
  local numeric, strings, flags = spec.numeric or {}, spec.strings or {}, spec.flags or {}
  spec.numeric = numeric
  local i = 1
  argv = argv or {}
  while i <= #argv do
    local a = argv[i]
    local key, val = a:match("^%-%-([%w%-]+)=(.*)$")
    key = key or a:match("^%-%-([%w%-]+)$")
    if not key then
      cli.fail(spec.script, "unexpected argument '" .. a .. "'")
    end
    key = key:gsub("%-", "_")
    if key == "help" then
      print(spec.usage .. "\n" .. spec.options)
      os.exit(0)
    elseif flags[key] then
      args[key] = true
    elseif numeric[key] or strings[key] then
      if not val then
        i = i + 1
        val = argv[i]
      end
      if val == nil then
        cli.fail(spec.script, "--" .. key:gsub("_", "-") .. " needs a value")
      end
      args[key] = numeric[key] and numeric_value(spec, key, val) or val
    else
      cli.fail(spec.script, "unknown option '" .. a .. "'")
    end
    i = i + 1
  end
  return args
end

-- Ends the script (status 2) unless path can be written: found out before a long run rather
-- than after it. An existing file is left as it is ("a" mode); a new one is made, then removed.
-- nil when path can be written, else io.open's reason.
local function unwritable(path)
  local existed = io.open(path, "r")
  if existed then existed:close() end
  local f, err = io.open(path, "a")
  if not f then return err end
  f:close()
  if not existed then os.remove(path) end
  return nil
end

local function refuse_checkpoint(script, option, err)
  io.stderr:write(("%s: cannot write the checkpoint (%s): %s\n"):format(script, option, err))
  os.exit(2)
end

function cli.check_writable(script, path, option)
  local err = unwritable(path)
  if err then refuse_checkpoint(script, option, err) end
end

-- "1m05s" from 65 seconds, "4.2s" under a minute.
function cli.fmt_time(s)
  if s >= 60 then
    return ("%dm%02ds"):format(math.floor(s / 60), math.floor(s % 60))
  end
  return ("%.1fs"):format(s)
end

-- A bar of width characters filled to fraction (0..1): "=====>    ".
function cli.bar(fraction, width)
  width = width or 30
  local fill = math.max(0, math.min(width, math.floor(width * fraction)))
  local head = fill < width and ">" or ""
  return string.rep("=", fill) .. head .. string.rep(" ", width - fill - #head)
end

-- ---- --ddp: data-parallel training over the ranks of an MPI launch -----------------------------

-- The CPUs of the machine (/sys's online list), or nil where that cannot be read.
local function online_cpus()
  local f = io.open("/sys/devices/system/cpu/online", "r")
  if not f then return nil end
  local line = f:read("l") or ""
  f:close()
  local n = 0
  for a, b in line:gmatch("(%d+)%-?(%d*)") do
    n = n + (b ~= "" and tonumber(b) - tonumber(a) + 1 or 1)
  end
  return n > 0 and n or nil
end

-- The launcher's processes on this machine: Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, else
-- MPICH's MPI_LOCALNRANKS, else every rank (one machine).
local function local_ranks(world)
  local n = tonumber(os.getenv("OMPI_COMM_WORLD_LOCAL_SIZE") or os.getenv("MPI_LOCALNRANKS") or "")
  return (n and n >= 1) and math.tointeger(n) or world
end

local Single = {}
Single.__index = Single
function Single:mean(x) return x end
function Single:rank0_says(flag) return flag end
function Single:barrier() end
function Single:check_writable(script, path, option) cli.check_writable(script, path, option) end
function Single:describe() return "" end

local Ranks = setmetatable({}, { __index = Single })
Ranks.__index = Ranks

-- The mean over the ranks of the number x (every rank calls it, in the same order).
function Ranks:mean(x)
  local t = self.tide.tensor({ x }, { dtype = "float64" })
  self.dist.all_reduce(t, "mean")
  return t[1]:item()
end

-- Rank 0's flag on every rank: decisions that must agree (stop now?) follow rank 0's clock.
function Ranks:rank0_says(flag)
  local t = self.tide.tensor({ flag and 1 or 0 }, { dtype = "int32" })
  self.dist.broadcast(t, 0)
  return t[1]:item() ~= 0
end

function Ranks:barrier() self.dist.barrier() end

-- Rank 0 (which writes the files) checks the path; every rank learns the outcome and all of
-- them end with status 2 together, rather than the others waiting for a rank that left.
function Ranks:check_writable(script, path, option)
  local err = self.main and unwritable(path) or nil
  local t = self.tide.tensor({ err and 1 or 0 }, { dtype = "int32" })
  self.dist.broadcast(t, 0)
  if t[1]:item() ~= 0 then
    if self.main then refuse_checkpoint(script, option, err) end
    os.exit(2)
  end
end

-- ", DDP over 2 ranks (64 samples a rank a step)" for the header line (unit: what a batch holds)
function Ranks:describe(unit)
  return (", DDP over %d rank%s (%d %s a rank a step)"):format(self.world,
    self.world == 1 and "" or "s", self.local_batch, unit)
end

-- cli.distributed(script, args) -> the data-parallel context of a run. Without args.ddp: one
-- process (rank 0 of 1), whose mean and rank0_says return their argument and whose other
-- methods do what the script did alone; nothing else is touched. With args.ddp: joins the ranks
-- (tide.distributed.init; a world of one without mpirun or without an MPI build), checks that
-- --batch-size (the global batch) divides among them (else status 2 on every rank), and sets
-- each rank's threads (unless TIDE_NUM_THREADS says): the CPUs of the machine shared among its
-- ranks (OMPI_COMM_WORLD_LOCAL_SIZE), and never more than the CPUs the launcher lets this rank
-- run on (mpirun binds each of 2 ranks to one core unless told --bind-to none). Fields: rank,
-- world, main (rank 0: the one that prints and writes files), local_batch, ddp.
function cli.distributed(script, args, tide)
  if not args.ddp then
    return setmetatable({ rank = 0, world = 1, main = true, local_batch = args.batch_size,
                          ddp = false }, Single)
  end
  local dist = tide.distributed
  local ok, rank, world = pcall(dist.init)
  if not ok then
    io.stderr:write(("%s: --ddp: %s\n"):format(script, tostring(rank)))
    os.exit(1)
  end
  local self = setmetatable({ rank = rank, world = world, main = rank == 0, ddp = true,
                              tide = tide, dist = dist }, Ranks)
  if args.batch_size % world ~= 0 then
    if self.main then
      io.stderr:write(("%s: --batch-size %d (the global batch) must be a multiple of the %d "
        .. "ranks (--help for the usage)\n"):format(script, args.batch_size, world))
    end
    os.exit(2)
  end
  self.local_batch = args.batch_size // world
  local env = tonumber(os.getenv("TIDE_NUM_THREADS") or "")
  if not (env and env > 0) then
    local allowed = tide.get_num_threads() -- the CPUs this process may run on
    local share = (online_cpus() or allowed) // local_ranks(world)
    tide.set_num_threads(math.max(1, math.min(allowed, share)))
  end
  return self
end

return cli
