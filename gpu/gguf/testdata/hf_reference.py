"""Reference side of swerl's GGUF import tests: transformers and PEFT.

Reads one JSON request on stdin and writes one JSON answer on stdout:
  gguf           the GGUF file, loaded by transformers' own GGUF support
  dir            the model directory swerl imported from it
  prompts        token id lists: the log-prob of every token after the
                 first, under transformers' float32 model from the GGUF
  greedy         tokens to decode greedily after each prompt
  lines          texts to tokenize with the tokenizer of dir and of the GGUF
  conversations  message lists to render with dir's chat template
"""
import json
import os
import sys
import time

T0 = time.time()


def log(msg):
    print(f"hf_reference: {time.time() - T0:.1f}s {msg}", file=sys.stderr, flush=True)

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

torch.set_num_threads(max(1, os.cpu_count() or 1))


def logprobs(model, prompts):
    out = []
    with torch.no_grad():
        for ids in prompts:
            x = torch.tensor([ids])
            logits = model(x).logits[0].float()
            lp = torch.log_softmax(logits, dim=-1)
            out.append([lp[t - 1, ids[t]].item() for t in range(1, len(ids))])
    return out


def main():
    req = json.load(sys.stdin)
    ans = {}
    gdir, gname = os.path.split(req["gguf"])
    if req.get("prompts"):
        model = AutoModelForCausalLM.from_pretrained(gdir, gguf_file=gname, dtype=torch.float32)
        model.eval()
        log("loaded the GGUF model")
        ans["logprobs"] = logprobs(model, req["prompts"])
        log("log-probs")
        n = req.get("greedy", 0)
        if n:
            greedy = []
            with torch.no_grad():
                for ids in req["prompts"]:
                    x = torch.tensor([ids])
                    y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False,
                                       eos_token_id=None, pad_token_id=0)
                    greedy.append(y[0, len(ids):].tolist())
            ans["greedy"] = greedy
            log("greedy decoding")
        del model
    if req.get("lines") is not None or req.get("conversations") is not None:
        tdir = AutoTokenizer.from_pretrained(req["dir"])
        tg = AutoTokenizer.from_pretrained(gdir, gguf_file=gname)
        lines = req.get("lines") or []
        ans["ids_dir"] = [tdir.encode(s, add_special_tokens=False) for s in lines]
        ans["ids_gguf"] = [tg.encode(s, add_special_tokens=False) for s in lines]
        ans["chat"] = [tdir.apply_chat_template(c["messages"], tokenize=False,
                                                add_generation_prompt=c.get("generation_prompt", False))
                       for c in (req.get("conversations") or [])]
    json.dump(ans, sys.stdout)


if __name__ == "__main__":
    main()
