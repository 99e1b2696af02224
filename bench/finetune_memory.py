"""Fine-tuning's memory: `run_classifier`'s whole run, this checkout against another commit.

  python -m bench.finetune_memory --baseline <git revision> [--examples 393000] [--steps 20] [--rounds 3]

Writes `bench.task_files`' MNLI-format train.tsv of `--examples` rows, then fine-tunes BERT-Tiny on it for
`--steps` steps of 32 examples at seq 128 with the classification family's `run` (what `run_classifier
--task_name=MNLI --do_train` runs: read, tokenize and pack every example, train, save the model), in a fresh process
per checkout and round (this checkout and `--baseline`, a temporary `git worktree`, alternating). BERT-Tiny keeps
the model's own memory small, so what is measured is what the run holds of the data: the examples, their packed
inputs and whatever copies of them the input pipeline makes. Reported: the steps trained (which must be the same),
the run's seconds and the process's peak RSS above its RSS just before it (medians), and the baseline's figure
over ours (above 1: this checkout is faster or smaller).
"""

from bench.common import (MEASURED, alternating_rounds, baseline_checkout, baseline_flags, baseline_row, report,
                          run_in_checkout, uncased_vocab)
from bench.task_files import write_mnli

CHILD = MEASURED + r'''
import json, sys
from bert_tf.config import BertConfig
from bert_tf.finetuning import FinetuneOptions
from bert_tf.tasks import get_task

work, vocab, examples, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
task = get_task("mnli")
options = FinetuneOptions(do_train=True, max_seq_length=128, train_batch_sizes=(32,),
                          num_train_epochs=((steps + 0.5) * 32 / examples,), save_checkpoints_steps=10**9)
results, seconds, grown = measured(lambda: task.family.run(task, BertConfig.preset("tiny"), vocab,
                                                           f"{work}/out-{sys.argv[5]}", options, data_dir=work))
print(json.dumps({"steps": results["grid"][0]["steps"], "run_s": seconds, "peak_rss_growth_mb": grown}))
'''


def main():
    args = baseline_flags({"examples": (393000, "rows of train.tsv (MNLI's: 392,702)"),
                           "steps": (20, "training steps of 32 examples")})
    if args.steps * 32 > args.examples:
        raise SystemExit(f"bench.finetune_memory: --steps={args.steps} of 32 examples is more than one epoch of "
                         f"--examples={args.examples}; lower --steps or raise --examples")
    with baseline_checkout(args.baseline, "bench_finetune_memory_") as (work, baseline):
        write_mnli(work, args.examples)
        runs = alternating_rounds(args.rounds, baseline, lambda name, checkout, round_: run_in_checkout(
            CHILD, checkout, work, uncased_vocab(), str(args.examples), str(args.steps), f"{name}-{round_}"))
    trained = {run["steps"] for name in runs for run in runs[name]}
    if trained != {args.steps}:
        raise SystemExit(f"bench.finetune_memory: the runs trained {sorted(trained)} steps, not {args.steps}")
    rows = [baseline_row(runs, measure, args.baseline, examples=args.examples, steps=args.steps)
            for measure in ("run_s", "peak_rss_growth_mb")]
    report("finetune_memory", rows, list(rows[0]))


if __name__ == "__main__":
    main()
