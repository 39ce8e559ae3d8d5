# dump_ref.py — the double check's reference: run model.py's PyTorch glm-dsa forward (float64) on
# the weights read back from the shipped GGUF (Q8_0 decoded to float), and store, for a fixed
# 48-token KJV passage, some rows of the trunk logits, the trunk hidden state (input of the MTP
# head) and some rows of the MTP logits under tests/data/demo/. tests/test_demo.c compares petrel
# with them; no torch is needed at test time.
#
# With --act-q8 (the default) activations are converted to Q8_0 before every product with a Q8_0
# weight, as llama.cpp's CPU backend and petrel do, so the tighter "converts activations like
# llama.cpp" gate of ../shared/fixtures/README.md applies; --no-act-q8 gives float activations.
#
# Usage: /usr/bin/python3 tools/train_demo/dump_ref.py [--model models/petrel-demo-glm.gguf] [--out tests/data/demo]
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import gguf_io as G  # noqa: E402
from export import ARCH, tensor_map  # noqa: E402
from model import Config, GlmDsa, Num  # noqa: E402

PASSAGE = ("And the LORD spake unto Moses, saying, Speak unto the children of Israel, that they bring me an "
           "offering: of every man that giveth it willingly with his heart ye shall take my offering. And this "
           "is the offering which ye shall take of them; gold, and silver, and brass,")
N_TOKENS = 48
LOGIT_ROWS = [0, 5, 10, 15, 20, 25, 30, 35, 38, 41, 44, 47]
MTP_ROWS = [1, 9, 17, 25, 33, 41, 47]


def config_from_gguf(kv):
    g = lambda k: kv[f"{ARCH}.{k}"]  # noqa: E731
    n_nextn = g("nextn_predict_layers")
    return Config(n_vocab=g("vocab_size"), n_embd=g("embedding_length"), n_layer=g("block_count") - n_nextn,
                  n_nextn=n_nextn, n_dense_lead=g("leading_dense_block_count"), n_ff=g("feed_forward_length"),
                  n_head=g("attention.head_count"), q_lora=g("attention.q_lora_rank"),
                  kv_lora=g("attention.kv_lora_rank"),
                  qk_nope=g("attention.key_length_mla") - g("rope.dimension_count"),
                  qk_rope=g("rope.dimension_count"), v_head=g("attention.value_length_mla"),
                  n_expert=g("expert_count"), n_expert_used=g("expert_used_count"),
                  n_ff_exp=g("expert_feed_forward_length"), n_expert_shared=g("expert_shared_count"),
                  weights_scale=g("expert_weights_scale"), idx_heads=g("attention.indexer.head_count"),
                  idx_dim=g("attention.indexer.key_length"), idx_top_k=g("attention.indexer.top_k"),
                  idx_full=list(g("attention.indexer.types")), rope_base=g("rope.freq_base"),
                  rms_eps=g("attention.layer_norm_rms_epsilon"))


def load_gguf_model(path, dtype=torch.float64):
    """-> (model with the file's decoded weights, tokenizer, {tensor name: ggml type})"""
    kv, tens, types = G.read(path)
    cfg = config_from_gguf(kv)
    m = GlmDsa(cfg)
    with torch.no_grad():
        for name, t, _ in tensor_map(m):
            if ".nextn.embed_tokens" in name or ".nextn.shared_head_head" in name:
                continue  # copies of token_embd / output
            if name.endswith("_exps.weight"):
                blk = m.blocks[int(name.split(".")[1])]
                plist = {"ffn_gate_exps": blk.gate_exps, "ffn_up_exps": blk.up_exps,
                         "ffn_down_exps": blk.down_exps}[name.split(".")[2]]
                for e, p in enumerate(plist):
                    p.copy_(torch.from_numpy(tens[name][e]))
            else:
                t.copy_(torch.from_numpy(tens[name]).view(t.shape))
    m = m.to(dtype)
    m.eval()
    merges = [tuple(s.split(" ")) for s in kv["tokenizer.ggml.merges"]]
    tok = bpe.Tokenizer(merges)
    assert tok.tokens == kv["tokenizer.ggml.tokens"]
    return m, tok, types


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/petrel-demo-glm.gguf")
    ap.add_argument("--out", default="tests/data/demo")
    ap.add_argument("--act-q8", dest="act_q8", action="store_true", default=True)
    ap.add_argument("--no-act-q8", dest="act_q8", action="store_false")
    a = ap.parse_args()
    m, tok, types = load_gguf_model(a.model)
    Num.act_q8 = a.act_q8
    Num.q8_names = {n for n, t in types.items() if t == G.T_Q8_0}
    Num.idx_ln_eps = 0.0  # llama.cpp leaves the indexer key LayerNorm epsilon at 0
    ids = tok.encode(PASSAGE)[:N_TOKENS]
    assert len(ids) == N_TOKENS, len(ids)
    with torch.no_grad():
        logits, mtp, hidden, _ = m(torch.tensor([ids]), use_dsa=True, mtp=True)
    os.makedirs(a.out, exist_ok=True)
    logits, mtp, hidden = logits[0].float().numpy(), mtp[0].float().numpy(), hidden[0].float().numpy()
    logits[LOGIT_ROWS].astype("<f4").tofile(os.path.join(a.out, "logits.f32"))
    mtp[MTP_ROWS].astype("<f4").tofile(os.path.join(a.out, "mtp.f32"))
    hidden.astype("<f4").tofile(os.path.join(a.out, "hidden.f32"))
    ref = {
        "description": "PyTorch reference (tools/train_demo/dump_ref.py, float64, weights decoded from the GGUF) "
                       "for tests/test_demo.c",
        "model": os.path.relpath(a.model), "act_q8": a.act_q8, "n_vocab": m.cfg.n_vocab, "n_embd": m.cfg.n_embd,
        "text": PASSAGE, "tokens": ids,
        "logits_file": "logits.f32", "logit_rows": LOGIT_ROWS,
        "hidden_file": "hidden.f32",
        "mtp_file": "mtp.f32", "mtp_rows": MTP_ROWS,
        "argmax": [int(i) for i in logits.argmax(-1)],
    }
    with open(os.path.join(a.out, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(f"dump_ref: {len(ids)} tokens, {len(LOGIT_ROWS)} logit rows, {len(MTP_ROWS)} MTP rows -> {a.out}")


if __name__ == "__main__":
    main()
