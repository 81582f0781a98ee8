"""torch_compare.py: rebuilds attograd's MultiHeadAttention (with key padding, causal, additive
and boolean attention masks, distinct key and value), 1+1-layer transformer, causal
encoder layers (nn.TransformerEncoderLayer with a causal src_mask, norm_first both ways) in PyTorch
from the weights that tests/tools/torch_dump.c wrote, runs the same inputs in float64, and
compares outputs and gradients. Exit 0 when every difference is under the tolerance."""
import inspect
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dumpfile import read  # noqa: E402

TOL = 1e-10


def load(module, d, prefix):
    state = {k: d[prefix + k] for k in module.state_dict().keys()}
    module.load_state_dict(state)
    return module


worst = {}


def nano_gpt(d, p, NH, v):
    """nanoGPT's model with the weights of d under prefix p (v: 0 tied with biases, 1 not, 3
    tied with biases, RoPE and RMSNorm: GPT-2's blocks with two of LLaMA's options)"""
    V, NE = d[p + "transformer.wte.weight"].shape
    L = 1 + max(int(k.split(".")[3]) for k in d if k.startswith(p + "transformer.h."))
    mixed = v == 3
    block = 0 if mixed else d[p + "transformer.wpe.weight"].shape[0]
    gpt = NanoGPT(V, block, L, NH, NE, bias=v != 1, tied=v != 1, rope=mixed,
                  rms=mixed).to(torch.float64)
    state = {k: d[p + k] for k in gpt.state_dict().keys() if p + k in d}
    if v != 1:
        state["lm_head.weight"] = d[p + "transformer.wte.weight"]
    gpt.load_state_dict(state)
    return gpt


class MetaLlama(torch.nn.Module):
    """Meta's llama model.py (Transformer, TransformerBlock, Attention, FeedForward, RMSNorm,
    precompute_freqs_cis, apply_rotary_emb, repeat_kv) written out in float64, no cache, with
    the weights of d under prefix p; the shapes of those weights give the sizes"""

    def __init__(self, d, p, NH):
        super().__init__()
        self.n_head = NH
        self.V, self.NE = d[p + "tok_embeddings.weight"].shape
        self.L = 1 + max(int(k[len(p):].split(".")[1]) for k in d if k.startswith(p + "layers."))
        def lin(i, o):
            return torch.nn.Linear(i, o, bias=False)
        H = d[p + "layers.0.feed_forward.w1.weight"].shape[0]
        KV = d[p + "layers.0.attention.wk.weight"].shape[0]
        self.tok_embeddings = torch.nn.Embedding(self.V, self.NE)
        self.layers = torch.nn.ModuleList()
        for _ in range(self.L):
            blk = torch.nn.Module()
            blk.attention = torch.nn.Module()
            for n, o in (("wq", self.NE), ("wk", KV), ("wv", KV)):
                setattr(blk.attention, n, lin(self.NE, o))
            blk.attention.wo = lin(self.NE, self.NE)
            blk.feed_forward = torch.nn.Module()
            blk.feed_forward.w1 = lin(self.NE, H)
            blk.feed_forward.w2 = lin(H, self.NE)
            blk.feed_forward.w3 = lin(self.NE, H)
            blk.attention_norm = torch.nn.Module()
            blk.attention_norm.weight = torch.nn.Parameter(torch.ones(self.NE))
            blk.ffn_norm = torch.nn.Module()
            blk.ffn_norm.weight = torch.nn.Parameter(torch.ones(self.NE))
            self.layers.append(blk)
        self.norm = torch.nn.Module()
        self.norm.weight = torch.nn.Parameter(torch.ones(self.NE))
        self.output = lin(self.NE, self.V)
        self.to(torch.float64)  # before the weights arrive: float32 would round them
        self.load_state_dict({k: d[p + k] for k in self.state_dict().keys()})
        self.KV = KV

    @staticmethod
    def rms_norm(x, weight, eps=1e-5):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight

    @staticmethod
    def freqs_cis(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64)[: dim // 2] / dim))
        t = torch.arange(end, dtype=torch.float64)
        freqs = torch.outer(t, freqs)
        return torch.polar(torch.ones_like(freqs), freqs)

    @staticmethod
    def rotary(x, freqs):  # x (B, T, heads, HS): pairs (2i, 2i+1) as complex numbers
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs.view(1, x.shape[1], 1, -1)).flatten(3)

    def attention(self, blk, x, freqs, NH):
        B, T, _ = x.shape
        HS, NKV = self.NE // NH, self.KV // (self.NE // NH)
        q = blk.attention.wq(x).view(B, T, NH, HS)
        k = blk.attention.wk(x).view(B, T, NKV, HS)
        v = blk.attention.wv(x).view(B, T, NKV, HS)
        q, k = self.rotary(q, freqs), self.rotary(k, freqs)
        k = k.repeat_interleave(NH // NKV, dim=2)  # repeat_kv
        v = v.repeat_interleave(NH // NKV, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = q @ k.transpose(2, 3) / (HS ** 0.5)
        mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), diagonal=1)
        y = torch.softmax(scores + mask, dim=-1) @ v
        return blk.attention.wo(y.transpose(1, 2).contiguous().view(B, T, -1))

    def forward(self, idx):
        NH = self.n_head
        h = self.tok_embeddings(idx)
        freqs = self.freqs_cis(self.NE // NH, idx.shape[1])
        for blk in self.layers:
            h = h + self.attention(blk, self.rms_norm(h, blk.attention_norm.weight), freqs, NH)
            x = self.rms_norm(h, blk.ffn_norm.weight)
            f = blk.feed_forward
            h = h + f.w2(torch.nn.functional.silu(f.w1(x)) * f.w3(x))
        return self.output(self.rms_norm(h, self.norm.weight))


class NanoLayerNorm(torch.nn.Module):
    """nanoGPT's LayerNorm with an optional bias (PyTorch 1.13's has none without one)"""

    def __init__(self, n, bias):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.bias = torch.nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return torch.nn.functional.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class NanoRMSNorm(torch.nn.Module):
    """LLaMA's RMSNorm under a nanoGPT name (a weight, no bias)"""

    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return MetaLlama.rms_norm(x, self.weight)


class NanoBlock(torch.nn.Module):
    """nanoGPT's Block: x + attn(ln_1(x)), then x + mlp(ln_2(x)); the attention written out;
    rope: Meta's rotary positions on q and k; rms: RMSNorm for LayerNorm"""

    def __init__(self, NH, NE, bias, rope=False, rms=False):
        super().__init__()
        self.n_head, self.rope = NH, rope
        norm = NanoRMSNorm if rms else (lambda n: NanoLayerNorm(n, bias))
        self.ln_1 = norm(NE)
        self.attn = torch.nn.Module()
        self.attn.c_attn = torch.nn.Linear(NE, 3 * NE, bias=bias)
        self.attn.c_proj = torch.nn.Linear(NE, NE, bias=bias)
        self.ln_2 = norm(NE)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Linear(NE, 4 * NE, bias=bias)
        self.mlp.c_proj = torch.nn.Linear(4 * NE, NE, bias=bias)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head) for z in (q, k, v))
        if self.rope:
            freqs = MetaLlama.freqs_cis(C // self.n_head, T)
            q, k = MetaLlama.rotary(q, freqs), MetaLlama.rotary(k, freqs)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = torch.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.attn.c_proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp.c_proj(torch.nn.functional.gelu(self.mlp.c_fc(self.ln_2(x))))


class NanoGPT(torch.nn.Module):
    """nanoGPT's GPT: wte + wpe, the blocks, ln_f, lm_head (tied to wte or not); rope: no wpe,
    rotary positions in the blocks; rms: RMSNorm for every LayerNorm"""

    def __init__(self, V, block, L, NH, NE, bias, tied, rope=False, rms=False):
        super().__init__()
        parts = dict(wte=torch.nn.Embedding(V, NE),
                     h=torch.nn.ModuleList([NanoBlock(NH, NE, bias, rope, rms) for _ in range(L)]),
                     ln_f=NanoRMSNorm(NE) if rms else NanoLayerNorm(NE, bias))
        if not rope:
            parts["wpe"] = torch.nn.Embedding(block, NE)
        self.transformer = torch.nn.ModuleDict(parts)
        self.lm_head = torch.nn.Linear(NE, V, bias=False)
        if tied:
            self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        x = self.transformer.wte(idx)
        if "wpe" in self.transformer:
            x = x + self.transformer.wpe(torch.arange(idx.shape[1]))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def compare(name, ours, theirs):
    diff = (ours - theirs).abs().max().item()
    worst[name] = diff
    print("  %-40s max |diff| %.3e" % (name, diff))


def main(path):
    torch.manual_seed(0)
    d = read(path)
    print("torch", torch.__version__)
    # 1. MultiheadAttention, cross-attention with key padding
    C = d["mha.q"].shape[-1]
    NH = d["mha.probs"].shape[1]
    mha = torch.nn.MultiheadAttention(C, NH, batch_first=True, dtype=torch.float64)
    load(mha, d, "mha.")
    q = d["mha.q"].clone().requires_grad_()
    kv = d["mha.kv"].clone().requires_grad_()
    out, probs = mha(q, kv, kv, key_padding_mask=d["mha.key_padding_mask"].bool(),
                     need_weights=True, average_attn_weights=False)
    (out * d["mha.R"]).sum().backward()
    print("MultiheadAttention (cross, key padding):")
    compare("mha output", out.detach(), d["mha.out"])
    compare("mha probabilities", probs.detach(), d["mha.probs"])
    compare("mha grad query", q.grad, d["mha.grad.q"])
    compare("mha grad key/value", kv.grad, d["mha.grad.kv"])
    for k, p in mha.named_parameters():
        compare("mha grad " + k, p.grad, d["grad.mha." + k])

    # 1b. distinct query, key and value, key padding and a causal mask aligned at the end
    q = d["mha.q"].clone().requires_grad_()
    k = d["qkv.k"].clone().requires_grad_()
    v = d["qkv.v"].clone().requires_grad_()
    mha.zero_grad()
    Tq, Tk = q.shape[1], k.shape[1]
    causal = torch.triu(torch.full((Tq, Tk), float("-inf"), dtype=torch.float64),
                        diagonal=1 + Tk - Tq)
    out, _ = mha(q, k, v, key_padding_mask=d["mha.key_padding_mask"].bool(), attn_mask=causal)
    (out * d["qkv.R"]).sum().backward()
    print("MultiheadAttention (distinct query, key, value; key padding, causal):")
    compare("qkv output", out.detach(), d["qkv.out"])
    compare("qkv grad query", q.grad, d["qkv.grad.q"])
    compare("qkv grad key", k.grad, d["qkv.grad.k"])
    compare("qkv grad value", v.grad, d["qkv.grad.v"])
    for name, p in mha.named_parameters():
        compare("qkv grad " + name, p.grad, d["qkv.grad.mha." + name])

    # 1c. distinct query, key, value; key padding, causal and an additive (B, NH, Tq, Tk) mask,
    # given to PyTorch as its (B*NH, Tq, Tk) float attn_mask with the causal -inf added
    q = d["mha.q"].clone().requires_grad_()
    k = d["qkv.k"].clone().requires_grad_()
    v = d["qkv.v"].clone().requires_grad_()
    mha.zero_grad()
    am = d["amask.mask"]
    B = am.shape[0]
    causal = torch.triu(torch.full((Tq, Tk), float("-inf"), dtype=torch.float64),
                        diagonal=1 + Tk - Tq)
    out, _ = mha(q, k, v, key_padding_mask=d["mha.key_padding_mask"].bool(),
                 attn_mask=(am + causal).reshape(B * NH, Tq, Tk))
    (out * d["amask.R"]).sum().backward()
    print("MultiheadAttention (distinct q, k, v; key padding, causal, additive per-head mask):")
    compare("amask output", out.detach(), d["amask.out"])
    compare("amask grad query", q.grad, d["amask.grad.q"])
    compare("amask grad key", k.grad, d["amask.grad.k"])
    compare("amask grad value", v.grad, d["amask.grad.v"])
    for name, p in mha.named_parameters():
        compare("amask grad " + name, p.grad, d["amask.grad.mha." + name])

    # 1d. cross-attention with key padding and a boolean (Tq, Tk) attn_mask (True: blocked)
    q = d["mha.q"].clone().requires_grad_()
    kv = d["mha.kv"].clone().requires_grad_()
    mha.zero_grad()
    out, _ = mha(q, kv, kv, key_padding_mask=d["mha.key_padding_mask"].bool(),
                 attn_mask=d["bmask.mask"].bool())
    (out * d["bmask.R"]).sum().backward()
    print("MultiheadAttention (cross; key padding, boolean (Tq, Tk) mask):")
    compare("bmask output", out.detach(), d["bmask.out"])
    compare("bmask grad query", q.grad, d["bmask.grad.q"])
    compare("bmask grad key/value", kv.grad, d["bmask.grad.kv"])
    for name, p in mha.named_parameters():
        compare("bmask grad " + name, p.grad, d["bmask.grad.mha." + name])

    # 2. nn.Transformer, 1+1 layers, post-LN, relu, no dropout
    src, tgt = d["tf.src"].clone().requires_grad_(), d["tf.tgt"].clone().requires_grad_()
    FF = d["tf.encoder.layers.0.linear1.weight"].shape[0]
    tf = torch.nn.Transformer(d_model=C, nhead=NH, num_encoder_layers=1, num_decoder_layers=1,
                              dim_feedforward=FF, dropout=0.0, batch_first=True,
                              dtype=torch.float64)
    load(tf, d, "tf.")
    T = tgt.shape[1]
    causal = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), diagonal=1)
    src_pad = d["tf.src_key_padding_mask"].bool()
    out = tf(src, tgt, tgt_mask=causal, src_key_padding_mask=src_pad,
             tgt_key_padding_mask=d["tf.tgt_key_padding_mask"].bool(),
             memory_key_padding_mask=src_pad)
    (out * d["tf.R"]).sum().backward()
    print("nn.Transformer (1+1 layers, post-LN, masks):")
    compare("transformer output", out.detach(), d["tf.out"])
    compare("transformer grad src", src.grad, d["tf.grad.src"])
    compare("transformer grad tgt", tgt.grad, d["tf.grad.tgt"])
    for k, p in tf.named_parameters():
        compare("transformer grad " + k, p.grad, d["tf.grad." + k])
    # 3. the GPT block: nn.TransformerEncoderLayer with a causal mask, gelu, both norm orders
    for pre in (0, 1):
        p = "gpt%d." % pre
        x = d[p + "x"].clone().requires_grad_()
        layer = torch.nn.TransformerEncoderLayer(C, NH, dim_feedforward=FF, dropout=0.0,
                                                 activation="gelu", batch_first=True,
                                                 norm_first=bool(pre), dtype=torch.float64)
        load(layer, d, p)
        # PyTorch's own causal mask (float32 in 1.13: 0 and -inf are exact in float64); is_causal
        # only where forward takes it (PyTorch 2: a hint that src_mask is that mask)
        S = x.shape[1]
        causal = torch.nn.Transformer.generate_square_subsequent_mask(S).to(torch.float64)
        hint = {}
        if "is_causal" in inspect.signature(layer.forward).parameters:
            hint["is_causal"] = True
        out = layer(x, src_mask=causal, src_key_padding_mask=d[p + "key_padding_mask"].bool(),
                    **hint)
        (out * d[p + "R"]).sum().backward()
        what = "causal encoder layer, %s" % ("pre-LN" if pre else "post-LN")
        print("nn.TransformerEncoderLayer (%s, gelu, key padding):" % what)
        compare(what + " output", out.detach(), d[p + "out"])
        compare(what + " grad x", x.grad, d[p + "grad.x"])
        for k, q in layer.named_parameters():
            compare(what + " grad " + k, q.grad, d[p + "grad." + k])
    # 4. the GPT model against nanoGPT's (model.py, written out below), tied and untied, and
    # its LLaMA style against Meta's model.py (written out below); a mix: nanoGPT's blocks with
    # Meta's RoPE and RMSNorm
    for v in (0, 1, 2, 3):
        p = "model%d." % v
        if v == 2:
            gpt = MetaLlama(d, p, NH)
            V = d[p + "tok_embeddings.weight"].shape[0]
        else:
            gpt = nano_gpt(d, p, NH, v)
            V = d[p + "transformer.wte.weight"].shape[0]
        idx, tgt = d[p + "idx"].long(), d[p + "targets"].long()
        logits = gpt(idx)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1),
                                                 ignore_index=-1)
        loss.backward()
        what = "GPT (%s)" % ["tied head, biases", "untied, no biases", "LLaMA style, GQA",
                             "GPT-2 blocks with RoPE and RMSNorm"][v]
        print("%s model (%s):" % ("Meta's LLaMA" if v == 2 else "nanoGPT's", what))
        compare(what + " logits", logits.detach(), d[p + "logits"])
        compare(what + " loss", loss.detach().reshape(1), d[p + "loss"].reshape(1))
        for k, q in gpt.named_parameters():
            compare(what + " grad " + k, q.grad, d[p + "grad." + k])
    m = max(worst.values())
    print("largest difference %.3e (tolerance %.0e)" % (m, TOL))
    return 0 if m < TOL else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
