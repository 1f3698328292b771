"""Softmax attention, recognised so that it is refused for the right reason (exit 3).

Softmax attention normalizes ``exp(q.k)`` over the sequence; ``exp`` of a
bilinear form has no finite feature map, so there is no kernel
``alpha(x, z) = <phiQ(x), phiK(z)>`` of finite rank to certify. The layers are
recognised by the config (a Hugging Face ``model_type`` of a softmax
transformer) or by the keys the common implementations save:

* ``torch.nn.MultiheadAttention`` (``nn.TransformerEncoderLayer``,
  ``nn.TransformerDecoderLayer``, ``nn.Transformer``): ``in_proj_weight``;
* GPT-2 style: ``attn.c_attn.weight``; BERT style: ``attention.self.query``;
  GPT-NeoX / Falcon / Bloom: ``query_key_value``; T5: ``SelfAttention.q``;
  projections named ``q_proj/k_proj/v_proj`` with an ``out_proj`` (OPT, BART,
  CLIP, Whisper).

``q_proj/k_proj/v_proj/o_proj`` alone are also fla's linear layers' names:
those are decided in :mod:`models.layouts.fla` (the config decides, else the
candidates are listed).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from models.layouts.base import Detected, LayerPlan, Refusal, natural

#: Hugging Face model types of softmax transformers (config.json "model_type")
SOFTMAX_MODEL_TYPES = frozenset((
    "gpt2", "gpt_neo", "gpt_neox", "gptj", "gpt_bigcode", "llama", "mistral", "mixtral", "qwen2", "qwen2_moe",
    "qwen3", "qwen3_moe", "phi", "phi3", "gemma", "gemma2", "gemma3", "bert", "roberta", "distilbert", "albert",
    "electra", "deberta", "deberta-v2", "xlm-roberta", "t5", "mt5", "bart", "mbart", "opt", "bloom", "falcon",
    "mpt", "vit", "clip", "whisper", "codegen", "starcoder2", "olmo", "olmo2", "stablelm", "persimmon",
    "cohere", "granite", "smollm3", "modernbert"))

#: (pattern of a key, what it is)
SOFTMAX_KEYS = (
    (re.compile(r"(^|\.)in_proj_weight$"), "torch.nn.MultiheadAttention (in_proj_weight)"),
    (re.compile(r"(^|\.)c_attn\.weight$"), "GPT-2 style attention (c_attn)"),
    (re.compile(r"(^|\.)attention\.self\.query\.weight$"), "BERT style attention (attention.self.query)"),
    (re.compile(r"(^|\.)query_key_value\.weight$"), "fused query_key_value attention (GPT-NeoX, Falcon, Bloom)"),
    (re.compile(r"(^|\.)SelfAttention\.q\.weight$"), "T5 attention (SelfAttention.q)"),
)
REASON = ("attention normalizes exp(q.k) over the sequence (softmax): exp of a bilinear form has no "
          "finite feature map, so softmax attention is not a finite-rank kernel alpha(x, z) = <phi(x), phi(z)>")


def _layer_prefixes(sd: Mapping[str, Any]) -> tuple[list[str], str]:
    for pat, what in SOFTMAX_KEYS:
        hits = [hit for hit in map(pat.search, sd) if hit is not None]
        ps = sorted({hit.string[:hit.start() + (1 if hit.group(1) else 0)] for hit in hits}, key=natural)
        if ps:
            return ps, what
    outp = sorted({k[:-len("out_proj.weight")] for k in sd if k.endswith("out_proj.weight")
                   and k[:-len("out_proj.weight")] + "q_proj.weight" in sd
                   and k[:-len("out_proj.weight")] + "k_proj.weight" in sd}, key=natural)
    if outp:
        return outp, "q_proj/k_proj/v_proj with out_proj (OPT, BART, CLIP style attention)"
    return [], ""


def detect(sd: Mapping[str, Any], config: Mapping[str, Any]) -> Detected | None:
    mt = config.get("model_type")
    ps, what = _layer_prefixes(sd)
    if mt in SOFTMAX_MODEL_TYPES:
        what = f"config.json model_type {mt!r} (a softmax transformer)" + (f"; keys: {what}" if what else "")
    elif not ps:
        return None
    ps = ps or [""]
    layers = [LayerPlan(i, p, "softmax attention", [Refusal(i, None, "softmax attention", "not a finite-rank "
                                                               "kernel", REASON)], reads_tokens=i == 0)
              for i, p in enumerate(ps)]
    return Detected("softmax", "softmax-attention", layers, 0, reason=what, config=dict(config),
                    container=what)
