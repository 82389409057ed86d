-- tide.models — ready-made models, each its own module loaded on first use:
--   tide.models.gpt (require "tide.models.gpt"): a GPT language model (models/README.md).
--   tide.models.llama (require "tide.models.llama"): Llama, with llama2.c and HF loaders.
--   tide.models.tokenizer: llama2.c's tokenizer.bin (load, encode, decode, stream).
local KNOWN = { gpt = true, llama = true, tokenizer = true }

return setmetatable({}, {
  __index = function(t, name)
    if not KNOWN[name] then
      return nil
    end
    local m = require("tide.models." .. name)
    rawset(t, name, m)
    return m
  end,
})
