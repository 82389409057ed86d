-- doc_runner.lua — runs every code block of the user guide (docs/*.md), so the guide cannot rot.
-- Run by the tide program (ctest test_docs):
--   tide tests/doc_runner.lua DOCS_DIR SOURCE_DIR LIBTIDE_SO [SANITIZE]
--
-- Fenced blocks are tagged with a language and optional flags: ```lua, ```c run; ```text (and
-- ```output) are shown output, never run; any block can be marked ```lua norun, ```sh norun ...
-- to be shown only, and a block of another language (sh, cmake ...) must say norun: a block that
-- is neither runnable nor marked is a failure, so nothing is skipped silently.
--  - lua blocks of one page run in order in one environment (globals carry over from block to
--    block, as at the prompt; `tide` is preset), each as its own chunk; an error fails the block.
--  - c blocks are compiled against core/tide.h and libtide.so and run; a block with no main() is
--    put inside `int main(void) { ... return 0; }` with <stdio.h>, <stdlib.h>, <string.h>,
--    <tide.h>, <math.h> included. A non-zero exit status (or a compiler error) fails the block.
local docs, src, libtide, sanitize = arg[1], arg[2], arg[3], arg[4] == "ON"
if not (docs and src and libtide) then
  io.stderr:write("usage: tide doc_runner.lua DOCS_DIR SOURCE_DIR LIBTIDE_SO [SANITIZE]\n")
  os.exit(2)
end
local libdir = libtide:match("^(.*)/[^/]*$") or "."

local passed, failed = 0, 0
local function ok() passed = passed + 1 end
local function fail(where, msg)
  failed = failed + 1
  print(("FAILED %s: %s"):format(where, msg))
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- The fenced blocks of a markdown text: {lang=, flags={...}, line=, code=}.
local function blocks_of(text)
  local out, cur, n = {}, nil, 0
  for line in (text .. "\n"):gmatch("(.-)\n") do
    n = n + 1
    local fence, info = line:match("^(%s*```+)%s*(.-)%s*$")
    if cur then
      if fence and info == "" then
        out[#out + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line
      end
    elseif fence then
      local words = {}
      for w in info:gmatch("%S+") do words[#words + 1] = w end
      local flags = {}
      for i = 2, #words do flags[words[i]] = true end
      cur = { lang = words[1] or "", flags = flags, line = n + 1, lines = {} }
    end
  end
  if cur then cur.unclosed = true; out[#out + 1] = cur end
  for _, b in ipairs(out) do b.code = table.concat(b.lines, "\n") .. "\n" end
  return out
end

local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute("mkdir -p '" .. tmpdir .. "'"))
local cflags = "-std=c11 -Wall -Werror=implicit-function-declaration -I'" .. src .. "/core'"
if sanitize then cflags = cflags .. " -fsanitize=address,undefined -fno-omit-frame-pointer" end

local function run_c(where, code, idx, env)
  if not code:find("int%s+main%s*%(") then
    code = "#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <tide.h>\n" ..
           "int main(void)\n{\n" .. code .. "    return 0;\n}\n"
  end
  local base = ("%s/block%d"):format(tmpdir, idx)
  write(base .. ".c", code)
  local cmd = ("cc %s -o '%s' '%s.c' '%s' -Wl,-rpath,'%s' -lm -lpthread > '%s.log' 2>&1"):format(
    cflags, base, base, libtide, libdir, base)
  if not os.execute(cmd) then
    return fail(where, "does not compile:\n" .. read(base .. ".log"))
  end
  if not os.execute(("%s'%s' > '%s.out' 2>&1"):format(env or "", base, base)) then
    return fail(where, "exits with an error:\n" .. read(base .. ".out"))
  end
  ok()
end

-- Under the sanitizers, a page whose blocks join an MPI world (tide.distributed) runs in a tide
-- process of its own without leak checks: Open MPI keeps blocks from its init until exit in
-- components LeakSanitizer cannot name (tests/CMakeLists.txt says the same for the MPI tests).
-- Its Lua blocks run in order in one environment there too (one pass or fail for the page); its
-- C blocks run without leak checks.
local function run_page_apart(name, blocks)
  local lines = { "local env = setmetatable({ tide = require 'tide' }, { __index = _G })" }
  for _, b in ipairs(blocks) do
    if b.lang == "lua" and not b.flags.norun then
      lines[#lines + 1] = ("assert(load(%q, %q, 't', env))()"):format(b.code,
        ("=docs/%s:%d"):format(name, b.line))
    end
  end
  local script = ("%s/%s.lua"):format(tmpdir, name)
  write(script, table.concat(lines, "\n") .. "\n")
  local cmd = ("ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 '%s' '%s' > '%s.out' 2>&1"):format(
    arg[-1], script, script)
  if os.execute(cmd) then ok() else fail("docs/" .. name, read(script .. ".out")) end
end

local pages = {}
local p = io.popen("ls '" .. docs .. "'/*.md")
for path in p:lines() do pages[#pages + 1] = path end
p:close()
table.sort(pages)

local idx = 0
for _, path in ipairs(pages) do
  local name = path:match("([^/]+)$")
  local env = setmetatable({ tide = tide }, { __index = _G })
  local nblocks = 0
  local text = read(path)
  local apart = sanitize and text:find("tide.distributed", 1, true)
  if apart then
    run_page_apart(name, blocks_of(text))
    for _, b in ipairs(blocks_of(text)) do -- its C blocks, also without leak checks
      idx = idx + 1
      if b.lang == "c" and not b.flags.norun then
        run_c(("docs/%s:%d (c)"):format(name, b.line), b.code, idx,
              "ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 ")
      end
    end
  end
  for _, b in ipairs(apart and {} or blocks_of(text)) do
    idx = idx + 1
    local where = ("docs/%s:%d (%s)"):format(name, b.line, b.lang)
    if b.unclosed then
      fail(where, "unclosed code block")
    elseif b.flags.norun or b.lang == "text" or b.lang == "output" then
      -- shown only
    elseif b.lang == "lua" then
      nblocks = nblocks + 1
      local chunk, err = load(b.code, "=" .. where:gsub(" %(lua%)", ""), "t", env)
      if not chunk then
        fail(where, err)
      else
        local okrun, e = xpcall(chunk, debug.traceback)
        if okrun then ok() else fail(where, e) end
      end
    elseif b.lang == "c" then
      nblocks = nblocks + 1
      run_c(where, b.code, idx)
    else
      fail(where, ("a '%s' block must be marked norun (or be lua, c, text)"):format(b.lang))
    end
  end
  print(("%s: %d blocks run"):format(name, nblocks))
  tide.collect()
end
os.execute("rm -rf '" .. tmpdir .. "'")
print(("test_docs: %d passed, %d failed"):format(passed, failed))
os.exit(failed == 0 and 0 or 1)
