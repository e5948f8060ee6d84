"""Reference side of swerl's PEFT test: transformers and PEFT load what
swerl's learner published and score token sequences.

Reads one JSON request on stdin, writes one JSON answer on stdout:
  base      the base model directory (float32 safetensors)
  adapter   a PEFT adapter directory published by swerl (optional)
  full      a fully fine-tuned checkpoint directory published by swerl
            (optional)
  prompts   token id lists: the log-prob of every token after the first
Answer: {"base": [...], "adapter": [...], "full": [...]}, each a list of
per-prompt log-prob lists, for the models that were asked for.
"""
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM

torch.set_num_threads(max(1, os.cpu_count() or 1))


def logprobs(model, prompts):
    out = []
    with torch.no_grad():
        for ids in prompts:
            logits = model(torch.tensor([ids])).logits[0].float()
            lp = torch.log_softmax(logits, dim=-1)
            out.append([lp[t - 1, ids[t]].item() for t in range(1, len(ids))])
    return out


def main():
    req = json.load(sys.stdin)
    prompts = req["prompts"]
    ans = {}
    base = AutoModelForCausalLM.from_pretrained(req["base"], dtype=torch.float32).eval()
    ans["base"] = logprobs(base, prompts)
    if req.get("adapter"):
        from peft import PeftModel
        model = PeftModel.from_pretrained(base, req["adapter"]).eval()
        ans["adapter"] = logprobs(model, prompts)
        del model
    del base
    if req.get("full"):
        full = AutoModelForCausalLM.from_pretrained(req["full"], dtype=torch.float32).eval()
        ans["full"] = logprobs(full, prompts)
    json.dump(ans, sys.stdout)


if __name__ == "__main__":
    main()
