# model.py — a from-scratch PyTorch implementation of the `glm-dsa` forward pass (GLM-5.x
# structure), written from the architecture description in ../shared/REFERENCE.md §2 and the
# "Semantics" section of ../shared/fixtures/README.md. It is used both to train petrel's demo
# model and, with the shipped (quantised, then dequantised) weights, as the reference that
# petrel's logits are checked against (tests/test_demo.c).
#
# Parameters are stored in the GGUF layout already (torch shape = reversed ggml ne), so the
# exporter writes them as they are:
#   attention  q_a [q_lora, C], q_b [H*(nope+rope), q_lora] (per head nope | rope),
#              kv_a [kv_lora+rope, C] (latent | k_rope), k_b [H, kv_lora, nope],
#              v_b [H, v_head, kv_lora], wo [C, H*v_head]  — MLA in its absorbed form:
#              score = (k_b[h] q_nope) . rms(latent) + rope(q_rope) . rope(k_rope)
#   indexer    q_b [NH*D, q_lora] (reads the normed q_a output), k [D, C], proj [NH, C],
#              LayerNorm(weight, bias) on keys; NORM RoPE on the first `rope` dims of q and k
#   MoE        gate_inp [E, C], bias [E] (selection only), gate/up E x [F, C], down E x [C, F],
#              shared gate/up [F_sh, C], down [C, F_sh]
#   MTP        eh_proj [C, 2C] on [rms(embed(x_i)) ; rms(h_{i-1})], one MoE block, shared head
# Non-goals: KV caching, speed; the trainer runs whole sequences.
import math
from dataclasses import dataclass, field, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    n_vocab: int = 3072
    n_embd: int = 128
    n_layer: int = 3            # trunk layers (the MTP block comes after them)
    n_nextn: int = 1
    n_dense_lead: int = 1
    n_ff: int = 384             # dense FFN width (leading layer)
    n_head: int = 4
    q_lora: int = 64
    kv_lora: int = 64
    qk_nope: int = 32
    qk_rope: int = 16
    v_head: int = 32
    n_expert: int = 64
    n_expert_used: int = 2
    n_ff_exp: int = 128
    n_expert_shared: int = 1
    weights_scale: float = 2.5
    idx_heads: int = 4
    idx_dim: int = 64
    idx_top_k: int = 32
    idx_full: list = field(default_factory=lambda: [True, False, True])
    rope_base: float = 10000.0
    rms_eps: float = 1e-5
    ctx_train: int = 128

    def to_dict(self):
        return asdict(self)


# ===== numerics shared by training and the reference =====

def q8_0_act(x):
    """Emulate llama.cpp's conversion of activations to Q8_0 before a Q8_0 dot product:
    per 32 values d = amax/127, q = roundf(x/d), value = fp16(d) * q."""
    shp = x.shape
    xb = x.reshape(*shp[:-1], shp[-1] // 32, 32)
    amax = xb.abs().amax(-1, keepdim=True)
    d = amax / 127.0
    idd = torch.where(d > 0, 1.0 / torch.where(d > 0, d, torch.ones_like(d)), torch.zeros_like(d))
    v = xb * idd
    q = torch.sign(v) * torch.floor(v.abs() + 0.5)
    dh = d.to(torch.float16).to(x.dtype)
    return (q * dh).reshape(shp)


class Num:
    """Switches for the reference run: which weights are Q8_0 (their activations get converted
    when act_q8 is on) and the LayerNorm epsilon of the indexer keys (0 in llama.cpp)."""
    act_q8 = False
    q8_names = set()
    idx_ln_eps = 1e-6


def mm(x, w, name=None):
    """x [..., n_in] @ w[n_out, n_in]^T"""
    if Num.act_q8 and name in Num.q8_names:
        x = q8_0_act(x)
    return x @ w.t()


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(n_rot, base, T, dtype):
    i = torch.arange(0, n_rot // 2, dtype=torch.float64)
    inv = base ** (-2.0 * i / n_rot)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def rope(x, cos, sin):
    """NORM RoPE (adjacent pairs 2i, 2i+1) on the first 2*cos.shape[-1] dims of x [B, T, ..., d]."""
    n = cos.shape[-1] * 2
    xr, xp = x[..., :n], x[..., n:]
    a, b = xr[..., 0::2], xr[..., 1::2]
    shape = [1, cos.shape[0]] + [1] * (x.dim() - 3) + [cos.shape[1]]
    c, s = cos.view(shape), sin.view(shape)
    out = torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
    return torch.cat([out, xp], dim=-1)


def P(*shape, std=0.02):
    return nn.Parameter(torch.randn(*shape) * std)


# ===== blocks =====

class Block(nn.Module):
    def __init__(self, cfg: Config, layer: int):
        super().__init__()
        c = cfg
        self.cfg, self.layer = c, layer
        self.is_nextn = layer >= c.n_layer
        self.is_moe = layer >= c.n_dense_lead
        self.has_idx = (not self.is_nextn) and c.idx_full[layer]
        C, H = c.n_embd, c.n_head
        out_std = 0.02 / math.sqrt(2 * (c.n_layer + c.n_nextn))
        self.attn_norm = nn.Parameter(torch.ones(C))
        self.q_a = P(c.q_lora, C)
        self.q_a_norm = nn.Parameter(torch.ones(c.q_lora))
        self.q_b = P(H * (c.qk_nope + c.qk_rope), c.q_lora)
        self.kv_a = P(c.kv_lora + c.qk_rope, C)
        self.kv_a_norm = nn.Parameter(torch.ones(c.kv_lora))
        self.k_b = P(H, c.kv_lora, c.qk_nope)
        self.v_b = P(H, c.v_head, c.kv_lora)
        self.wo = P(C, H * c.v_head, std=out_std)
        self.ffn_norm = nn.Parameter(torch.ones(C))
        if not self.is_moe:
            self.ffn_gate = P(c.n_ff, C)
            self.ffn_up = P(c.n_ff, C)
            self.ffn_down = P(C, c.n_ff, std=out_std)
        else:
            E, Fe, Fs = c.n_expert, c.n_ff_exp, c.n_ff_exp * c.n_expert_shared
            self.gate_inp = P(E, C)
            self.register_buffer("exp_bias", torch.zeros(E))
            # one parameter per expert: indexing a stacked [E, F, C] parameter would make autograd
            # build a full-size gradient per expert (32x the work); the exporter stacks them
            self.gate_exps = nn.ParameterList([P(Fe, C) for _ in range(E)])
            self.up_exps = nn.ParameterList([P(Fe, C) for _ in range(E)])
            self.down_exps = nn.ParameterList([P(C, Fe, std=out_std) for _ in range(E)])
            self.gate_sh = P(Fs, C)
            self.up_sh = P(Fs, C)
            self.down_sh = P(C, Fs, std=out_std)
        if self.has_idx:
            D, NH = c.idx_dim, c.idx_heads
            self.idx_q_b = P(NH * D, c.q_lora)
            self.idx_k = P(D, C)
            self.idx_k_norm_w = nn.Parameter(torch.ones(D))
            self.idx_k_norm_b = nn.Parameter(torch.zeros(D))
            self.idx_proj = P(NH, C)
        if self.is_nextn:
            self.eh_proj = P(C, 2 * C)
            self.enorm = nn.Parameter(torch.ones(C))
            self.hnorm = nn.Parameter(torch.ones(C))
            self.shared_head_norm = nn.Parameter(torch.ones(C))
        self.aux = None   # balance loss of the last training forward
        self.load = None  # [E] tokens routed to each expert in the last forward (for the bias update)

    def n(self, s):
        return f"blk.{self.layer}.{s}"

    # --- DSA lightning indexer: which keys each query may attend to ---
    def indexer(self, xn, qa, cos, sin, causal):
        c = self.cfg
        B, T, _ = xn.shape
        D, NH = c.idx_dim, c.idx_heads
        iq = mm(qa, self.idx_q_b, self.n("indexer.attn_q_b.weight")).view(B, T, NH, D)
        iq = rope(iq, cos, sin)
        ik = mm(xn, self.idx_k, self.n("indexer.attn_k.weight"))
        ik = F.layer_norm(ik, (D,), self.idx_k_norm_w, self.idx_k_norm_b, eps=Num.idx_ln_eps)
        ik = rope(ik.unsqueeze(2), cos, sin).squeeze(2)
        w = mm(xn, self.idx_proj, self.n("indexer.proj.weight")) / math.sqrt(D * NH)
        dots = torch.einsum("bthd,bsd->bhts", iq, ik).relu()
        score = torch.einsum("bhts,bth->bts", dots, w)
        return score.masked_fill(~causal, float("-inf"))

    def select(self, score, causal):
        """keep mask [B, T, T]: the top min(top_k, t+1) causal keys of each row (ties to the lower
        position, as petrel's and llama.cpp's top-k)."""
        K = self.cfg.idx_top_k
        T = score.shape[-1]
        if T <= K:
            return causal
        # stable descending sort = ties broken by the lower index
        order = torch.sort(score, dim=-1, descending=True, stable=True).indices[..., :K]
        keep = torch.zeros_like(causal)
        keep.scatter_(-1, order, True)
        return keep & causal

    def attention(self, x, cos, sin, causal, sel, use_dsa, want_idx_loss):
        c = self.cfg
        B, T, C = x.shape
        H, NOPE, ROPE, KVL = c.n_head, c.qk_nope, c.qk_rope, c.kv_lora
        xn = rms(x, self.attn_norm, c.rms_eps)
        qa = rms(mm(xn, self.q_a, self.n("attn_q_a.weight")), self.q_a_norm, c.rms_eps)
        q = mm(qa, self.q_b, self.n("attn_q_b.weight")).view(B, T, H, NOPE + ROPE)
        q_nope, q_rope = q[..., :NOPE], rope(q[..., NOPE:], cos, sin)
        kv = mm(xn, self.kv_a, self.n("attn_kv_a_mqa.weight"))
        lat = rms(kv[..., :KVL], self.kv_a_norm, c.rms_eps)
        k_rope = rope(kv[..., KVL:].unsqueeze(2), cos, sin).squeeze(2)
        if Num.act_q8 and self.n("attn_k_b.weight") in Num.q8_names:
            q_nope = q8_0_act(q_nope)
        q_abs = torch.einsum("bthn,hln->bthl", q_nope, self.k_b)
        scale = 1.0 / math.sqrt(NOPE + ROPE)
        sc = (torch.einsum("bthl,bsl->bhts", q_abs, lat) + torch.einsum("bthr,bsr->bhts", q_rope, k_rope)) * scale
        idx_loss = None
        if self.has_idx and (use_dsa or want_idx_loss):
            score = self.indexer(xn.detach() if self.training else xn, qa.detach() if self.training else qa,
                                 cos, sin, causal)
            if want_idx_loss:
                with torch.no_grad():
                    tgt = torch.softmax(sc.detach().masked_fill(~causal[:, None], float("-inf")), -1).mean(1)
                logp = torch.log_softmax(score, -1).masked_fill(~causal, 0.0)
                idx_loss = -(tgt * logp).sum(-1).mean()
            sel = self.select(score.detach(), causal)
        mask = sel if (use_dsa and sel is not None) else causal
        p = torch.softmax(sc.masked_fill(~mask[:, None], float("-inf")), -1)
        ctx = torch.einsum("bhts,bsl->bthl", p, lat)
        if Num.act_q8 and self.n("attn_v_b.weight") in Num.q8_names:
            ctx = q8_0_act(ctx)
        o = torch.einsum("bthl,hvl->bthv", ctx, self.v_b).reshape(B, T, H * c.v_head)
        return mm(o, self.wo, self.n("attn_output.weight")), sel, idx_loss

    def ffn(self, x):
        c = self.cfg
        xn = rms(x, self.ffn_norm, c.rms_eps)
        if not self.is_moe:
            g = mm(xn, self.ffn_gate, self.n("ffn_gate.weight"))
            u = mm(xn, self.ffn_up, self.n("ffn_up.weight"))
            return mm(F.silu(g) * u, self.ffn_down, self.n("ffn_down.weight"))
        B, T, C = xn.shape
        E, K = c.n_expert, c.n_expert_used
        flat = xn.reshape(B * T, C)
        logits = mm(flat, self.gate_inp, self.n("ffn_gate_inp.weight"))
        p = torch.sigmoid(logits)
        chosen = torch.topk((p + self.exp_bias).detach(), K, dim=-1).indices  # selection-only bias
        w = p.gather(-1, chosen)
        w = w / w.sum(-1, keepdim=True).clamp_min(6.103515625e-5) * c.weights_scale
        sg = mm(flat, self.gate_sh, self.n("ffn_gate_shexp.weight"))
        su = mm(flat, self.up_sh, self.n("ffn_up_shexp.weight"))
        out = mm(F.silu(sg) * su, self.down_sh, self.n("ffn_down_shexp.weight"))
        fe = chosen.reshape(-1)
        order = torch.argsort(fe, stable=True)
        tok = torch.div(order, K, rounding_mode="floor")
        counts = torch.bincount(fe, minlength=E)
        self.load = counts.detach()
        if self.training:
            # balance loss (Switch/DeepSeek style): E * sum_e (share of routed slots) * (mean normalised score)
            s = p / p.sum(-1, keepdim=True)
            self.aux = E * ((counts.float() / fe.numel()).detach() * s.mean(0)).sum()
        xs = flat[tok]
        ws = w.reshape(-1)[order]
        ys = []
        start = 0
        aq = Num.act_q8 and self.n("ffn_gate_exps.weight") in Num.q8_names
        for e, n in enumerate(counts.tolist()):
            if n == 0:
                continue
            xe = xs[start:start + n]
            xq = q8_0_act(xe) if aq else xe
            h = F.silu(xq @ self.gate_exps[e].t()) * (xq @ self.up_exps[e].t())
            if aq:
                h = q8_0_act(h)
            ys.append(h @ self.down_exps[e].t())
            start += n
        y = torch.cat(ys) * ws[:, None]
        out = out.index_add(0, tok, y)
        return out.view(B, T, C)

    def forward(self, x, cos, sin, causal, sel, use_dsa, want_idx_loss=False):
        """sel: the key selection of the previous full indexer layer (used by shared layers)."""
        a, sel, idx_loss = self.attention(x, cos, sin, causal, sel, use_dsa, want_idx_loss)
        x = x + a
        x = x + self.ffn(x)
        return x, sel, idx_loss


class GlmDsa(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        C = cfg.n_embd
        self.tok_embd = P(cfg.n_vocab, C)
        self.blocks = nn.ModuleList([Block(cfg, l) for l in range(cfg.n_layer + cfg.n_nextn)])
        self.output_norm = nn.Parameter(torch.ones(C))
        self.output = P(cfg.n_vocab, C)

    def forward(self, tokens, use_dsa=True, mtp=True, want_idx_loss=False):
        """tokens [B, T] -> (logits [B, T, V], mtp_logits [B, T, V] or None, hidden [B, T, C],
        indexer loss or None). use_dsa False = dense attention everywhere (warm-up)."""
        c = self.cfg
        B, T = tokens.shape
        dt = self.tok_embd.dtype
        cos, sin = rope_tables(c.qk_rope, c.rope_base, T, dt)
        causal = torch.ones(T, T, dtype=torch.bool).tril()[None].expand(B, T, T)
        x = self.tok_embd[tokens]
        sel = None
        idx_losses = []
        for l in range(c.n_layer):
            x, sel, il = self.blocks[l](x, cos, sin, causal, sel, use_dsa, want_idx_loss)
            if il is not None:
                idx_losses.append(il)
        h = rms(x, self.output_norm, c.rms_eps)
        logits = mm(h, self.output, "output.weight")
        mtp_logits = None
        if mtp and c.n_nextn:
            blk = self.blocks[c.n_layer]
            hp = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)
            if self.training:
                hp = hp.detach()
            e = rms(self.tok_embd[tokens], blk.enorm, c.rms_eps)
            hh = rms(hp, blk.hnorm, c.rms_eps)
            z = mm(torch.cat([e, hh], -1), blk.eh_proj, blk.n("nextn.eh_proj.weight"))
            z, _, _ = blk(z, cos, sin, causal, None, False)  # MTP: dense attention, no indexer
            z = rms(z, blk.shared_head_norm, c.rms_eps)
            mtp_logits = mm(z, self.output, blk.n("nextn.shared_head_head.weight"))
        il = torch.stack(idx_losses).mean() if idx_losses else None
        return logits, mtp_logits, h, il
