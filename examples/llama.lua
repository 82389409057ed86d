-- llama.lua — generates tokens from a Llama checkpoint (llama2.c's .bin, or Hugging Face
-- safetensors with a config.json beside it) with tide.models.llama: a KV cache, each token's
-- step under tide.jit, greedy / temperature / top-p sampling, tokens streamed as they come.
--
--   build/lua/tide examples/llama.lua stories15M.bin --steps 64 --temperature 0 --ids
--
-- Token ids on the command line and in the output are the checkpoint's own (llama2.c's and
-- Hugging Face's, 0-based: BOS is 1); tide.models.llama counts from 1, so this script adds and
-- subtracts 1 at its edges. With --tokenizer (llama2.c's tokenizer.bin) --prompt takes text and
-- the output is text, streamed; without one the output is the ids; --ids prints only the ids,
-- space-separated on one line. Options: `--help`. A bad option value ends the script at once
-- with one line naming the option and the value, and exit status 2.
local tide = require "tide"
local llama = require "tide.models.llama"
local tokenizer = require "tide.models.tokenizer"
local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local cli = require "cli"

local SCRIPT = "llama.lua"
local BOS = 1 -- llama2.c's and Llama's <s>

local USAGE = "usage: llama.lua CHECKPOINT [--tokenizer FILE] [--prompt TEXT | --prompt-ids 1,2,3] "
  .. "[--steps N] [--temperature T] "
  .. "[--topp P] [--seed S] [--ids] [--dtype float32|bfloat16|float16|q8_0|q4_0] [--eager]"
local OPTIONS = [[
  CHECKPOINT         llama2.c's checkpoint (.bin), or a .safetensors file with Hugging Face's
                     Llama names (config.json beside it gives the heads; see --n-heads)
  --tokenizer FILE   llama2.c's tokenizer.bin for this vocabulary: the output becomes text
  --prompt TEXT      the prompt as text (needs --tokenizer), encoded after BOS
  --prompt-ids IDS   the prompt as comma-separated token ids, 0-based as in the checkpoint
                     (default: 1, BOS)
  --steps N          new tokens to generate, N >= 1 (default 256; cut to what the checkpoint's
                     seq_len leaves after the prompt)
  --temperature T    divides the logits, T >= 0; 0 is greedy (argmax) (default 1.0)
  --topp P           top-p (nucleus) sampling, 0 < P <= 1; 1 turns it off (default 0.9)
  --seed S           RNG seed, an integer (default: from the clock)
  --ids              print only the generated ids, space-separated, on one line
  --dtype D          the weights' dtype: float32, bfloat16 or float16 (default float32), or
                     q8_0 / q4_0: loaded in float32, then quantized (tide.quantize)
  --n-heads N        attention heads, for a .safetensors file with no config.json beside it
  --eager            run every decoding step eagerly (no tide.jit)
  --help             this text]]

-- The checkpoint is the first argument that is not an option (its value after --opt included).
local VALUED = { ["--tokenizer"] = true, ["--prompt"] = true, ["--prompt-ids"] = true, ["--steps"] = true, ["--temperature"] = true,
                 ["--topp"] = true, ["--seed"] = true, ["--dtype"] = true, ["--n-heads"] = true }
local function split_checkpoint(argv)
  local rest, checkpoint = {}, nil
  local i = 1
  while i <= #(argv or {}) do
    local a = argv[i]
    if a:sub(1, 2) ~= "--" and checkpoint == nil then
      checkpoint = a
    else
      rest[#rest + 1] = a
      if VALUED[a] and argv[i + 1] then
        rest[#rest + 1] = argv[i + 1]
        i = i + 1
      end
    end
    i = i + 1
  end
  return checkpoint, rest
end

local checkpoint, rest = split_checkpoint(arg)
local args = cli.parse(rest, {
  script = SCRIPT, usage = USAGE, options = OPTIONS,
  values = { steps = 256, temperature = 1.0, topp = 0.9, dtype = "float32" },
  numeric = { steps = "count", temperature = "nonnegative", topp = "positive", seed = "integer",
              n_heads = "count" },
  strings = { prompt_ids = true, dtype = true, tokenizer = true, prompt = true },
  flags = { ids = true, eager = true },
})
if not checkpoint then
  cli.fail(SCRIPT, "no CHECKPOINT given")
end
if args.topp > 1 then
  cli.fail(SCRIPT, ("--topp must be in (0, 1], got '%s'"):format(args.topp))
end
if args.prompt and not args.tokenizer then
  cli.fail(SCRIPT, "--prompt needs --tokenizer FILE (or give --prompt-ids)")
end
if args.prompt and args.prompt_ids then
  cli.fail(SCRIPT, "give --prompt or --prompt-ids, not both")
end
local QUANT = { q8_0 = true, q4_0 = true }
if args.dtype ~= "float32" and args.dtype ~= "bfloat16" and args.dtype ~= "float16"
    and not QUANT[args.dtype] then
  cli.fail(SCRIPT, ("--dtype must be float32, bfloat16, float16, q8_0 or q4_0, got '%s'")
    :format(args.dtype))
end

-- "1,2,3" -> {1, 2, 3} (0-based ids), each checked against the vocabulary.
local function parse_ids(s, vocab)
  local ids = {}
  for field in (s .. ","):gmatch("([^,]*),") do
    local id = math.tointeger(tonumber(field))
    if not id or id < 0 or id >= vocab then
      cli.fail(SCRIPT, ("--prompt-ids must be comma-separated integers in 0..%d, got '%s'")
        :format(vocab - 1, s))
    end
    ids[#ids + 1] = id
  end
  return ids
end

local function load_model()
  local opts = { dtype = QUANT[args.dtype] and "float32" or args.dtype }
  if checkpoint:match("%.safetensors$") then opts.n_heads = args.n_heads end
  local ok, model = pcall(llama.load, checkpoint, opts)
  if not ok then
    io.stderr:write(SCRIPT .. ": " .. tostring(model) .. "\n")
    os.exit(1)
  end
  if QUANT[args.dtype] then tide.quantize(model, args.dtype) end
  return model
end

-- The tokenizer for the model's vocabulary (a mismatch is an error naming both sizes).
local function load_tokenizer(vocab_size)
  local ok, tok = pcall(tokenizer.load, args.tokenizer, vocab_size)
  if not ok then
    io.stderr:write(SCRIPT .. ": " .. tostring(tok) .. "\n")
    os.exit(1)
  end
  return tok
end

-- The prompt's 0-based ids: the text encoded after BOS, the given ids, or BOS alone.
local function prompt_ids(tok, vocab_size)
  if args.prompt then
    local ids = tok:encode(args.prompt, { bos = true })
    for i, id in ipairs(ids) do ids[i] = id - 1 end
    return ids
  end
  return args.prompt_ids and parse_ids(args.prompt_ids, vocab_size) or { BOS }
end

local model = load_model()
local c = model.config
local tok = args.tokenizer and load_tokenizer(c.vocab_size)
local prompt = prompt_ids(tok, c.vocab_size)
if #prompt >= c.seq_len then
  cli.fail(SCRIPT, ("the prompt has %d tokens; the checkpoint's seq_len is %d"):format(#prompt,
                                                                                       c.seq_len))
end
local steps = math.min(args.steps, c.seq_len - #prompt)
if not args.ids then
  io.stderr:write(("%s: Llama dim %d, %d layers, %d heads (%d kv), vocab %d, seq_len %d, %s "
    .. "weights\n"):format(checkpoint, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
    c.seq_len, model.quant_format or c.dtype))
end

-- Each generated id (0-based) as it comes: kept for --ids, else written as text through the
-- tokenizer's streamer (whole UTF-8 characters) or as a number.
local emitted = {}
local text = tok and not args.ids and tok:streamer()
local function emit(id)
  emitted[#emitted + 1] = id
  if not args.ids then
    io.stdout:write(text and text(id + 1) or (id .. " "))
    io.stdout:flush()
  end
end

local ids = {}
for i, id in ipairs(prompt) do ids[i] = id + 1 end -- tide's ids are 1-based
local t0 = tide.clock()
model:generate(ids, steps, {
  temperature = args.temperature, top_p = args.topp < 1 and args.topp or nil,
  seed = args.seed or os.time(),
  jit = not args.eager, on_token = function(id) emit(id - 1) end })
local dt = tide.clock() - t0
io.stdout:write(args.ids and table.concat(emitted, " ") or (text and text() or ""), "\n")
if not args.ids then
  io.stderr:write(("generated %d tokens in %.2f s (%.1f tokens/s)\n"):format(steps, dt,
                                                                            steps / dt))
end
