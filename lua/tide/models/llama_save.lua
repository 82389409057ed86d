-- tide.models.llama_save — llama.save: a Llama (float or quantized) as safetensors with Hugging
-- Face's names, which llama.load reads back (llama_hf.lua). Layout (docs/quantization.md):
--  * every weight under its HF name, q_proj/k_proj rows permuted back to HF's rotate-half order
--    (a row permutation: quantized rows move whole, blocks and all);
--  * a quantized weight is the U8 tensor of its blocks [rows, K/32 * block bytes], with
--    __metadata__["tide.quantized.<name>"] = "<format>,[<rows>,<K>]" (e.g. "q8_0,[64,64]");
--  * __metadata__["tide.llama.<field>"] for n_heads, n_kv_heads, seq_len, norm_eps, rope_theta,
--    so no config.json is needed to load it back.
local tide = require "tide"

local save = {}

-- HF's names for layer i (1-based) of a Llama: {module path, field, HF name, heads to permute}.
function save.layer_names(c, i)
  local p = ("model.layers.%d."):format(i - 1)
  return {
    { "attention", "wq", p .. "self_attn.q_proj.weight", c.n_heads },
    { "attention", "wk", p .. "self_attn.k_proj.weight", c.n_kv_heads },
    { "attention", "wv", p .. "self_attn.v_proj.weight" },
    { "attention", "wo", p .. "self_attn.o_proj.weight" },
    { "feed_forward", "w1", p .. "mlp.gate_proj.weight" },
    { "feed_forward", "w2", p .. "mlp.down_proj.weight" },
    { "feed_forward", "w3", p .. "mlp.up_proj.weight" },
  }
end

save.CONFIG_FIELDS = { "n_heads", "n_kv_heads", "seq_len", "norm_eps", "rope_theta" }

-- The inverse of llama_hf.lua's unpermute: adjacent pairs back to rotate-half rows.
local function permute(w, heads)
  local out, cols = w:size(1), w:size(2)
  return w:view(heads, out // heads // 2, 2, cols):transpose(2, 3):reshape(out, cols)
end

return function(llama)
  -- llama.save(model, path): see the layout above.
  function llama.save(model, path)
    local c = model.config
    local sd, meta = {}, {}
    local function put(m, field, name, heads)
      local t = m[field]:detach()
      sd[name] = heads and permute(t, heads) or t
      local f = m._qformats and m._qformats[field]
      if f then
        meta["tide.quantized." .. name] = ("%s,[%d,%d]"):format(f.format, t:size(1), f.K)
      end
    end
    put(model, "tok_embeddings", "model.embed_tokens.weight")
    put(model, "norm", "model.norm.weight")
    if not c.tied then put(model, "output", "lm_head.weight") end
    for i, block in ipairs(model.layers:children()) do
      local p = ("model.layers.%d."):format(i - 1)
      put(block, "attention_norm", p .. "input_layernorm.weight")
      put(block, "ffn_norm", p .. "post_attention_layernorm.weight")
      for _, e in ipairs(save.layer_names(c, i)) do
        put(block[e[1]], e[2], e[3], e[4])
      end
    end
    for _, k in ipairs(save.CONFIG_FIELDS) do
      meta["tide.llama." .. k] = c[k]
    end
    tide.save(path, sd, meta)
  end
  return save
end
