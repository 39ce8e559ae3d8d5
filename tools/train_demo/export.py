# export.py — step 3 of the demo-model pipeline: write the trained checkpoint as a `glm-dsa` GGUF
# with petrel's (and llama.cpp's) conventions: the metadata keys of REFERENCE.md §2, the tensor
# names and shapes of src/model/glm_dsa.c, the byte-level BPE tokenizer (gpt2 / glm4) with the
# GLM chat special tokens. Routed experts and every other matrix are Q8_0; norms, the router
# (ffn_gate_inp), the selection bias and the indexer key norm stay F32.
#
# Usage: /usr/bin/python3 tools/train_demo/export.py [--work build/train_demo] [--out models/petrel-demo-glm.gguf]
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import gguf_io as G  # noqa: E402
from model import Config, GlmDsa  # noqa: E402

ARCH = "glm-dsa"
CONTEXT_LENGTH = 131072  # a metadata choice: training saw 128-token windows (models/README.md)
SAMPLING = {"temp": (6, 0.8), "top_k": (4, 40), "top_p": (6, 0.95)}  # GGUF value types F32 / U32


def tensor_map(model: GlmDsa):
    """[(gguf name, torch tensor in ggml-reversed layout, quantise?)] in file order."""
    c = model.cfg
    out = [("token_embd.weight", model.tok_embd, True)]
    for b in model.blocks:
        n = b.n
        out += [(n("attn_norm.weight"), b.attn_norm, False), (n("attn_q_a.weight"), b.q_a, True),
                (n("attn_q_a_norm.weight"), b.q_a_norm, False), (n("attn_q_b.weight"), b.q_b, True),
                (n("attn_kv_a_mqa.weight"), b.kv_a, True), (n("attn_kv_a_norm.weight"), b.kv_a_norm, False),
                (n("attn_k_b.weight"), b.k_b, True), (n("attn_v_b.weight"), b.v_b, True),
                (n("attn_output.weight"), b.wo, True), (n("ffn_norm.weight"), b.ffn_norm, False)]
        if b.has_idx:
            out += [(n("indexer.k_norm.weight"), b.idx_k_norm_w, False),
                    (n("indexer.k_norm.bias"), b.idx_k_norm_b, False),
                    (n("indexer.proj.weight"), b.idx_proj, True), (n("indexer.attn_k.weight"), b.idx_k, True),
                    (n("indexer.attn_q_b.weight"), b.idx_q_b, True)]
        if not b.is_moe:
            out += [(n("ffn_gate.weight"), b.ffn_gate, True), (n("ffn_up.weight"), b.ffn_up, True),
                    (n("ffn_down.weight"), b.ffn_down, True)]
        else:
            out += [(n("ffn_gate_inp.weight"), b.gate_inp, False), (n("exp_probs_b.bias"), b.exp_bias, False),
                    (n("ffn_gate_exps.weight"), torch.stack(list(b.gate_exps)), True),
                    (n("ffn_up_exps.weight"), torch.stack(list(b.up_exps)), True),
                    (n("ffn_down_exps.weight"), torch.stack(list(b.down_exps)), True),
                    (n("ffn_gate_shexp.weight"), b.gate_sh, True), (n("ffn_up_shexp.weight"), b.up_sh, True),
                    (n("ffn_down_shexp.weight"), b.down_sh, True)]
        if b.is_nextn:
            # embed_tokens / shared_head_head: copies of token_embd / output, as real checkpoints ship them
            out += [(n("nextn.eh_proj.weight"), b.eh_proj, True), (n("nextn.enorm.weight"), b.enorm, False),
                    (n("nextn.hnorm.weight"), b.hnorm, False),
                    (n("nextn.shared_head_norm.weight"), b.shared_head_norm, False),
                    (n("nextn.embed_tokens.weight"), model.tok_embd, True),
                    (n("nextn.shared_head_head.weight"), model.output, True)]
    out += [("output_norm.weight", model.output_norm, False), ("output.weight", model.output, True)]
    return out


def load_model(work):
    st = torch.load(os.path.join(work, "ckpt.pt"))
    cfg = Config(**st["cfg"])
    m = GlmDsa(cfg)
    m.load_state_dict(st["model"])
    m.eval()
    return m, st


def export(model, tok, path, name="petrel demo GLM (KJV)"):
    c = model.cfg
    w = G.Writer()
    A = lambda k: f"{ARCH}.{k}"  # noqa: E731
    U, Fl = G.V_U32, G.V_F32
    w.add("general.architecture", G.V_STR, ARCH)
    w.add("general.type", G.V_STR, "model")
    w.add("general.name", G.V_STR, name)
    w.add("general.description", G.V_STR,
          "Tiny GLM-5-architecture MoE trained from scratch on the King James Bible (public domain) "
          "by petrel's tools/train_demo")
    w.add("general.license", G.V_STR, "public-domain")
    # recommended sampling (read by petrel and llama.cpp as the model's defaults): a model this
    # small loops under greedy decoding
    for k, (t, v) in SAMPLING.items():
        w.add(f"general.sampling.{k}", t, v)
    w.add("general.file_type", U, 7)  # MOSTLY_Q8_0
    w.add("general.quantization_version", U, 2)
    w.add(A("context_length"), U, CONTEXT_LENGTH)
    w.add(A("embedding_length"), U, c.n_embd)
    w.add(A("attention.layer_norm_rms_epsilon"), Fl, c.rms_eps)
    w.add(A("rope.freq_base"), Fl, c.rope_base)
    w.add(A("block_count"), U, c.n_layer + c.n_nextn)
    w.add(A("feed_forward_length"), U, c.n_ff)
    w.add(A("attention.head_count"), U, c.n_head)
    w.add(A("attention.head_count_kv"), U, 1)
    w.add(A("expert_count"), U, c.n_expert)
    w.add(A("expert_used_count"), U, c.n_expert_used)
    w.add(A("expert_group_count"), U, 1)
    w.add(A("expert_group_used_count"), U, 1)
    w.add(A("expert_gating_func"), U, 2)
    w.add(A("leading_dense_block_count"), U, c.n_dense_lead)
    w.add(A("vocab_size"), U, c.n_vocab)
    w.add(A("attention.q_lora_rank"), U, c.q_lora)
    w.add(A("attention.kv_lora_rank"), U, c.kv_lora)
    w.add(A("attention.key_length"), U, c.kv_lora + c.qk_rope)
    w.add(A("attention.value_length"), U, c.kv_lora)
    w.add(A("attention.key_length_mla"), U, c.qk_nope + c.qk_rope)
    w.add(A("attention.value_length_mla"), U, c.v_head)
    w.add(A("expert_feed_forward_length"), U, c.n_ff_exp)
    w.add(A("expert_shared_count"), U, c.n_expert_shared)
    w.add(A("expert_weights_scale"), Fl, c.weights_scale)
    w.add(A("expert_weights_norm"), G.V_BOOL, True)
    w.add(A("rope.dimension_count"), U, c.qk_rope)
    w.add(A("nextn_predict_layers"), U, c.n_nextn)
    w.add(A("attention.indexer.head_count"), U, c.idx_heads)
    w.add(A("attention.indexer.key_length"), U, c.idx_dim)
    w.add(A("attention.indexer.top_k"), U, c.idx_top_k)
    w.add(A("attention.indexer.types"), G.V_ARR, list(c.idx_full), G.V_BOOL)
    w.add("tokenizer.ggml.model", G.V_STR, "gpt2")
    w.add("tokenizer.ggml.pre", G.V_STR, "glm4")
    w.add("tokenizer.ggml.tokens", G.V_ARR, tok.tokens, G.V_STR)
    w.add("tokenizer.ggml.token_type", G.V_ARR, tok.types, G.V_I32)
    w.add("tokenizer.ggml.merges", G.V_ARR, [a + " " + b for a, b in tok.merges], G.V_STR)
    S = tok.special
    w.add("tokenizer.ggml.bos_token_id", U, S("[gMASK]"))
    w.add("tokenizer.ggml.eos_token_id", U, S("<|endoftext|>"))
    w.add("tokenizer.ggml.unknown_token_id", U, S("<|endoftext|>"))
    w.add("tokenizer.ggml.padding_token_id", U, S("<|endoftext|>"))
    w.add("tokenizer.ggml.eot_token_id", U, S("<|user|>"))
    w.add("tokenizer.ggml.eom_token_id", U, S("<|observation|>"))
    n_params = 0
    for name, t, quant in tensor_map(model):
        arr = t.detach().float().numpy()
        if name.startswith("blk.") and ".nextn.embed_tokens" not in name and ".nextn.shared_head_head" not in name:
            n_params += arr.size
        elif not name.startswith("blk."):
            n_params += arr.size
        w.tensor(name, arr, G.T_Q8_0 if quant else G.T_F32)
    size = w.write(path)
    return size, n_params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="build/train_demo")
    ap.add_argument("--out", default="models/petrel-demo-glm.gguf")
    a = ap.parse_args()
    model, st = load_model(a.work)
    tok = bpe.Tokenizer.load(os.path.join(a.work, "tokenizer.json"))
    size, n_params = export(model, tok, a.out)
    n_exp = sum(sum(p.numel() for p in list(b.gate_exps) + list(b.up_exps) + list(b.down_exps))
                for b in model.blocks if b.is_moe)
    print(f"export: {a.out}: {size / 2**20:.1f} MiB, {n_params / 1e6:.2f}M parameters "
          f"({n_exp / 1e6:.2f}M in routed experts), trained {st['step']} steps / {st['elapsed'] / 60:.1f} min")


if __name__ == "__main__":
    main()
