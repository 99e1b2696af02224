"""Peak memory (RSS) of a BERT-Base pretraining step and of BERT-Base inference: ours vs HF torch.

  python -m bench.memory [--preset base] [--batch 8] [--seq 128]

Each case runs in a fresh process: import the frameworks (TensorFlow always, as the shapes come from our
`BertConfig`; torch and transformers too for HF: RSS then is the "framework" column), build a fresh model,
run three steps on one fixed batch, report the process's peak RSS. The pretraining step is `bench.pretraining`'s
(MLM at 20 positions + NSP, AdamW); inference is `bench.model_speed`'s encoder forward. The model's own share is
peak minus framework; for reference, BERT-Base's 110M fp32 weights are 440 MB and AdamW adds two more copies.
"""

import argparse
import json
import subprocess
import sys

from bench.common import peak_rss_mb, report

CASES = {"bert_tf pretraining step": ("bench.pretraining", "ours"),
         "HF torch pretraining step": ("bench.pretraining", "hf_torch"),
         "bert_tf inference": ("bench.model_speed", "ours"),
         "HF torch inference": ("bench.model_speed", "hf_torch")}


def child(case, preset, batch, seq):
    import importlib

    module_name, function = CASES[case]
    module = importlib.import_module(module_name)
    from bert_tf import BertConfig  # TensorFlow comes in with it, in every case (the config class is ours)

    if "torch" in case:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    framework = peak_rss_mb()

    config = BertConfig.preset(preset, vocab_size=module.VOCAB)
    data = module.make_batch(batch, seq)
    if "pretraining" in case:
        run = getattr(module, function)(config, data, 3, "fp32")
    else:
        run = getattr(module, function)(config, data, "forward", "fp32", False, 3)
    run()
    print(json.dumps({"framework_mb": framework, "peak_mb": peak_rss_mb()}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", default="base")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.preset, args.batch, args.seq)
    from bert_tf.config import BertConfig, ConfigError

    try:
        BertConfig.preset(args.preset)
    except ConfigError as error:
        parser.error(f"--preset: {error}")
    rows = []
    for case in CASES:
        out = subprocess.run([sys.executable, "-m", "bench.memory", "--child", case, "--preset", args.preset,
                              "--batch", str(args.batch), "--seq", str(args.seq)], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{case} failed:\n{out.stderr[-3000:]}")
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append({"case": case, "preset": args.preset, "batch": args.batch, "seq": args.seq,
                     "framework_mb": f"{figures['framework_mb']:.0f}", "peak_mb": f"{figures['peak_mb']:.0f}",
                     "model_mb": f"{figures['peak_mb'] - figures['framework_mb']:.0f}"})
    report("memory", rows, list(rows[0]))


if __name__ == "__main__":
    main()
