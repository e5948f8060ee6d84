"""TRL's GRPOTrainer on the job bench/peers/grpo.sh gives swerl.

Reads the job (job.json: the model directory, the prompts swerl built, and
the reward records of each instance), trains with LoRA for --steps optimizer
steps with TRL's own generation (transformers' generate), scores every
completion with swerl's exact reward (`swerl reward`, the same binary the
swerl side runs), and writes one JSON line per step: wall time split into
generation, scoring and training, the tokens trained, the rewards, and the
process's peak RSS.

Run by grpo.sh with scripts/install-trl.sh's environment.
"""

import argparse
import json
import resource
import subprocess
import sys
import time

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--swerl", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=32)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(int(__import__("os").cpu_count() or 1))
    job = json.load(open(a.job))
    tasks = job["tasks"]
    records = {t["id"]: t["reward_record"] for t in tasks}

    # The prompts must be the very tokens swerl sampled from: the chat
    # template of the imported directory over swerl's system and user turns.
    tok = AutoTokenizer.from_pretrained(job["model"])
    def messages(t):
        # swerl sends no system turn when its system prompt is empty (the
        # template then writes the model's default one).
        sys_turn = [{"role": "system", "content": t["system"]}] if t["system"] else []
        return sys_turn + [{"role": "user", "content": t["prompt"]}]

    for t in tasks:
        msgs = messages(t)
        ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False)
        if hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        if t["prompt_tokens"] and list(ids) != t["prompt_tokens"]:
            sys.exit("grpo_trl: %s: TRL's prompt tokens differ from swerl's (%d against %d tokens)" % (t["id"], len(ids), len(t["prompt_tokens"])))
    ds = Dataset.from_list([
        {"prompt": messages(t), "instance_id": t["id"]}
        for t in tasks
    ])

    timing = {"generate": 0.0, "score": 0.0}
    scored = []

    def swerl_reward(completions, instance_id, **kwargs):
        # swerl's exact reward, by its own binary: one JSON record a line.
        t0 = time.perf_counter()
        lines = []
        for i, (c, iid) in enumerate(zip(completions, instance_id)):
            text = c[-1]["content"] if isinstance(c, list) else c
            rec = dict(records[iid])
            rec["id"] = "%s/%d" % (iid, i)
            rec["output"] = text
            lines.append(json.dumps(rec))
        p = subprocess.run([a.swerl, "reward", "--in", "-", "--out", "-"], input="\n".join(lines) + "\n",
                           capture_output=True, text=True, check=True)
        rewards = [json.loads(l)["reward"] for l in p.stdout.splitlines() if l.strip()]
        if len(rewards) != len(lines):
            sys.exit("grpo_trl: swerl reward returned %d scores for %d completions: %s" % (len(rewards), len(lines), p.stderr))
        scored.extend(rewards)
        timing["score"] += time.perf_counter() - t0
        return rewards

    cfg = GRPOConfig(
        output_dir=a.out, max_steps=a.steps, learning_rate=a.lr, lr_scheduler_type="constant", warmup_steps=0,
        adam_beta1=0.9, adam_beta2=0.95, adam_epsilon=1e-8, weight_decay=0.0, max_grad_norm=1.0,
        per_device_train_batch_size=a.micro_batch, gradient_accumulation_steps=len(tasks) * a.group // a.micro_batch,
        num_generations=a.group, max_completion_length=a.max_tokens, temperature=1.0, top_p=1.0, top_k=0,
        beta=0.0, epsilon=0.2, loss_type="dapo", scale_rewards="group", num_iterations=1,
        logging_steps=1, save_strategy="no", report_to=[], seed=a.seed, use_cpu=True, bf16=False,
        dataloader_num_workers=0, model_init_kwargs={"dtype": torch.float32},
        # GRPOConfig turns activation checkpointing on by default; swerl's
        # learner keeps every activation by default (--checkpoint-activations
        # off), so TRL does too: the same work per step on both sides.
        gradient_checkpointing=False,
    )
    peft = LoraConfig(r=a.rank, lora_alpha=a.alpha, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    trainer = GRPOTrainer(model=job["model"], reward_funcs=swerl_reward, args=cfg, train_dataset=ds,
                          processing_class=tok, peft_config=peft)

    gen = trainer._generate

    def timed_generate(*args, **kw):
        t0 = time.perf_counter()
        try:
            return gen(*args, **kw)
        finally:
            timing["generate"] += time.perf_counter() - t0

    trainer._generate = timed_generate
    prep = trainer._generate_and_score_completions
    tokens = {"n": 0, "completion": 0}

    def counted(*args, **kw):
        out = prep(*args, **kw)
        tokens["n"] += int(out["prompt_mask"].sum() + out["completion_mask"].sum())
        tokens["completion"] += int(out["completion_mask"].sum())
        return out

    trainer._generate_and_score_completions = counted
    outf = open(a.out + "/steps.jsonl", "w")

    class Steps(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()
            timing.update(generate=0.0, score=0.0)
            tokens.update(n=0, completion=0)
            scored.clear()

        def on_step_end(self, args, state, control, **kw):
            wall = time.perf_counter() - self.t0
            rec = {"side": "trl", "step": state.global_step, "wall_s": wall, "generate_s": timing["generate"],
                   "score_s": timing["score"], "train_s": wall - timing["generate"] - timing["score"],
                   "tokens": tokens["n"], "completion_tokens": tokens["completion"], "samples": len(scored),
                   "reward_mean": sum(scored) / max(1, len(scored)),
                   "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
            outf.write(json.dumps(rec) + "\n")
            outf.flush()
            print(json.dumps(rec), flush=True)

    trainer.add_callback(Steps())
    trainer.train()


if __name__ == "__main__":
    main()
