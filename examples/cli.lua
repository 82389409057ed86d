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
function cli.check_writable(script, path, option)
  local existed = io.open(path, "r")
  if existed then existed:close() end
  local f, err = io.open(path, "a")
  if not f then
    io.stderr:write(("%s: cannot write the checkpoint (%s): %s\n"):format(script, option, err))
    os.exit(2)
  end
  f:close()
  if not existed then os.remove(path) end
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

return cli
