#!/usr/bin/python3
"""Writes the Llama oracle that tests/lua/test_llama.lua compares tide.models.llama against.

Needs Debian's python3-torch (1.13), hence /usr/bin/python3. The outputs are committed under
tests/lua/data/, so the test never needs torch; rerun this only to change them:

    /usr/bin/python3 scripts/make_llama_fixture.py tests/lua/data

The model is written here from the description of the architecture alone (issue 23), not from
tide's code: RMSNorm (eps 1e-5), rotary embeddings rotating the adjacent pairs (2i, 2i+1) of
each head by pos * 10000^(-2i/head_size), grouped-query attention (query head h reads kv head
h // (n_heads / n_kv_heads)), a SwiGLU MLP w2(silu(w1 x) * w3 x), an unshared classifier.
dim 64, 2 layers, 4 heads, 2 kv heads, hidden 172, vocab 96, seq_len 64. Files:

  llama_tiny.bin             llama2.c's format (7 int32, then float32 arrays, wcls last)
  llama_tiny_hf.safetensors  Hugging Face names, float32, q_proj/k_proj permuted for HF's
                             rotate-half RoPE (as convert_llama_weights_to_hf does)
  llama_tiny_hf_bf16.safetensors  the same in bfloat16 (round to nearest even)
  llama_tiny_config.json     the HF config.json of both (the test copies it beside a file)
  llama_tiny_io.safetensors  prompt (int64 [T], 0-based ids as llama2.c counts them), logits
                             [T, vocab] of the prompt, greedy (int64 [32], 0-based) after the
                             prompt, logits_bf16w [T, vocab]: the prompt's logits with every
                             weight rounded to bfloat16, computed in float32

As a check of the permutation, the HF weights are also run through HF's own rotate-half RoPE
here, and must give the same logits as the adjacent-pair model.
"""
import json
import math
import os
import struct
import sys

import torch

DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, SEQ_LEN = 64, 172, 2, 4, 2, 96, 64
HEAD = DIM // HEADS
KV_DIM = KV_HEADS * HEAD
EPS = 1e-5
THETA = 10000.0
PROMPT = [1, 17, 42, 5, 88, 23, 9, 60]  # 0-based; 1 is llama2.c's BOS
STEPS = 32


def make_weights(gen):
    """Matrices ~ N(0, 1/fan_in), the classifier N(0, 4/dim) so the logits spread (clear
    argmax gaps), norms around 1, embeddings N(0, 1)."""
    def mat(out, inp, scale=1.0):
        return torch.randn(out, inp, generator=gen) * scale / math.sqrt(inp)

    def norm(n):
        return 1 + 0.1 * torch.randn(n, generator=gen)

    w = {"tok": torch.randn(VOCAB, DIM, generator=gen), "layers": []}
    for _ in range(LAYERS):
        w["layers"].append({
            "rms_att": norm(DIM), "wq": mat(DIM, DIM), "wk": mat(KV_DIM, DIM),
            "wv": mat(KV_DIM, DIM), "wo": mat(DIM, DIM), "rms_ffn": norm(DIM),
            "w1": mat(HIDDEN, DIM), "w2": mat(DIM, HIDDEN), "w3": mat(HIDDEN, DIM)})
    w["rms_final"] = norm(DIM)
    w["wcls"] = mat(VOCAB, DIM, 2.0)
    return w


def rmsnorm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def rope_adjacent(x):
    """x [T, heads, HEAD]: each pair (2i, 2i+1) turned by pos * THETA^(-2i/HEAD), pos from 0."""
    T = x.shape[0]
    i = torch.arange(0, HEAD, 2, dtype=torch.float64)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * THETA ** (-i / HEAD)[None, :]
    cos, sin = angle.cos().float()[:, None, :], angle.sin().float()[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def rope_rotate_half(x):
    """HF's convention: the pairs are (j, j + HEAD/2), turned by the same angles."""
    T = x.shape[0]
    i = torch.arange(0, HEAD, 2, dtype=torch.float64)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * THETA ** (-i / HEAD)[None, :]
    angle = torch.cat([angle, angle], -1)
    cos, sin = angle.cos().float()[:, None, :], angle.sin().float()[:, None, :]
    half = torch.cat([-x[..., HEAD // 2:], x[..., :HEAD // 2]], -1)
    return x * cos + half * sin


def forward(w, tokens, rope=rope_adjacent, q_key="wq", k_key="wk"):
    """tokens: list of 0-based ids -> logits [T, VOCAB], every position causal."""
    T = len(tokens)
    x = w["tok"][torch.tensor(tokens)]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for L in w["layers"]:
        h = rmsnorm(x, L["rms_att"])
        q = rope((h @ L[q_key].T).view(T, HEADS, HEAD))
        k = rope((h @ L[k_key].T).view(T, KV_HEADS, HEAD))
        v = (h @ L["wv"].T).view(T, KV_HEADS, HEAD)
        group = HEADS // KV_HEADS
        k = k.repeat_interleave(group, dim=1)  # query head h reads kv head h // group
        v = v.repeat_interleave(group, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(HEAD) + mask
        y = torch.einsum("hts,shd->thd", att.softmax(-1), v).reshape(T, DIM)
        x = x + y @ L["wo"].T
        h = rmsnorm(x, L["rms_ffn"])
        x = x + (torch.nn.functional.silu(h @ L["w1"].T) * (h @ L["w3"].T)) @ L["w2"].T
    return rmsnorm(x, w["rms_final"]) @ w["wcls"].T


def greedy(w, prompt, steps):
    """Each token the argmax of a full forward over everything so far; also the smallest gap
    between the best and second-best logit met (a small one would make the test fragile)."""
    seq, out, gap = list(prompt), [], math.inf
    for _ in range(steps):
        last = forward(w, seq)[-1]
        top = last.topk(2).values
        gap = min(gap, (top[0] - top[1]).item())
        tok = int(last.argmax())
        out.append(tok)
        seq.append(tok)
    return out, gap


def hf_permute(m, heads):
    """HF's layout of q_proj/k_proj: within each head the pairs (2i, 2i+1) become rows
    (i, i + HEAD/2)."""
    out_dim, in_dim = m.shape
    return m.view(heads, HEAD // 2, 2, in_dim).transpose(1, 2).reshape(out_dim, in_dim)


def llama2c_bytes(w):
    header = struct.pack("<7i", DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, -VOCAB, SEQ_LEN)
    parts = [w["tok"]]
    for key in ["rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3"]:
        parts.append(torch.stack([L[key] for L in w["layers"]]))
    parts.append(w["rms_final"])
    parts.append(torch.zeros(SEQ_LEN * HEAD // 2))  # the unused freq_cis_real table
    parts.append(torch.full((SEQ_LEN * HEAD // 2,), 7.0))  # freq_cis_imag: a loader skips it
    parts.append(w["wcls"])
    return header + b"".join(p.contiguous().float().numpy().tobytes() for p in parts)


def hf_tensors(w):
    t = {"model.embed_tokens.weight": w["tok"], "model.norm.weight": w["rms_final"],
         "lm_head.weight": w["wcls"]}
    for n, L in enumerate(w["layers"]):
        p = "model.layers.%d." % n
        t[p + "self_attn.q_proj.weight"] = hf_permute(L["wq"], HEADS)
        t[p + "self_attn.k_proj.weight"] = hf_permute(L["wk"], KV_HEADS)
        t[p + "self_attn.v_proj.weight"] = L["wv"]
        t[p + "self_attn.o_proj.weight"] = L["wo"]
        t[p + "mlp.gate_proj.weight"] = L["w1"]
        t[p + "mlp.down_proj.weight"] = L["w2"]
        t[p + "mlp.up_proj.weight"] = L["w3"]
        t[p + "input_layernorm.weight"] = L["rms_att"]
        t[p + "post_attention_layernorm.weight"] = L["rms_ffn"]
    return t


DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
          torch.int64: "I64"}


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t  # numpy has no bfloat16
        data = raw.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def hf_view(t):
    """The HF tensors back as forward()'s weights, q/k still permuted (for rope_rotate_half)."""
    w = {"tok": t["model.embed_tokens.weight"], "rms_final": t["model.norm.weight"],
         "wcls": t["lm_head.weight"], "layers": []}
    for n in range(LAYERS):
        p = "model.layers.%d." % n
        w["layers"].append({
            "wq": t[p + "self_attn.q_proj.weight"], "wk": t[p + "self_attn.k_proj.weight"],
            "wv": t[p + "self_attn.v_proj.weight"], "wo": t[p + "self_attn.o_proj.weight"],
            "w1": t[p + "mlp.gate_proj.weight"], "w2": t[p + "mlp.down_proj.weight"],
            "w3": t[p + "mlp.up_proj.weight"], "rms_att": t[p + "input_layernorm.weight"],
            "rms_ffn": t[p + "post_attention_layernorm.weight"]})
    return w


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/lua/data"
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    w = make_weights(torch.Generator().manual_seed(23))
    with torch.no_grad():
        logits = forward(w, PROMPT)
        tokens, gap = greedy(w, PROMPT, STEPS)
        hf = hf_tensors(w)
        hf_logits = forward(hf_view(hf), PROMPT, rope=rope_rotate_half)
        assert torch.allclose(hf_logits, logits, atol=1e-4), "HF permutation check failed"
        bf = {k: v.bfloat16() for k, v in hf.items()}
        bf_w = hf_view({k: v.float() for k, v in bf.items()})
        # undo the permutation for the adjacent-pair forward: rope_rotate_half on permuted
        # weights is the same model
        logits_bf16w = forward(bf_w, PROMPT, rope=rope_rotate_half)
    with open(os.path.join(out_dir, "llama_tiny.bin"), "wb") as f:
        f.write(llama2c_bytes(w))
    save_safetensors(os.path.join(out_dir, "llama_tiny_hf.safetensors"), hf)
    save_safetensors(os.path.join(out_dir, "llama_tiny_hf_bf16.safetensors"), bf)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": DIM,
              "intermediate_size": HIDDEN, "num_hidden_layers": LAYERS,
              "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
              "vocab_size": VOCAB, "max_position_embeddings": SEQ_LEN, "rms_norm_eps": EPS,
              "rope_theta": THETA, "tie_word_embeddings": False}
    with open(os.path.join(out_dir, "llama_tiny_config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    save_safetensors(os.path.join(out_dir, "llama_tiny_io.safetensors"), {
        "prompt": torch.tensor(PROMPT, dtype=torch.int64), "logits": logits,
        "greedy": torch.tensor(tokens, dtype=torch.int64), "logits_bf16w": logits_bf16w})
    print("greedy:", tokens)
    print("smallest top-1/top-2 logit gap over the greedy steps: %.4f" % gap)
    print("max |logit| %.3f, max |bf16-weight logit - logit| %.4f"
          % (logits.abs().max(), (logits_bf16w - logits).abs().max()))


if __name__ == "__main__":
    main()
