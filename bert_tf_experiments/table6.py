"""Table 6 of the paper at small scale: BERT of several sizes pretrained alike, then fine-tuned (the command line:
`python -m bert_tf_experiments.model_size`).

Each size L x H x A (layers, hidden size, attention heads; feed-forward 4H as in the paper) is pretrained as BERT
(MLM + NSP) on the same records for the same steps, batch and seed, then scored: held-out masked-LM perplexity (the
exponential of the mean masked-LM loss over every held-out masked position, Table 6's "LM (ppl)") and masked-LM and
NSP accuracy, and the dev accuracy of `word_order` fine-tuned from it. Writes `table.tsv`, `table.md`,
`model_size.png`, `report.md` and `results.json` under `output_dir`; a rerun reuses what is done.
"""

from __future__ import annotations

import math
import os
import re

from bert_tf_experiments import report, workbench
from bert_tf_quickstart.options import QuickstartOptions

DEFAULT_SIZES = ((1, 128, 2), (2, 128, 2), (4, 128, 2), (2, 256, 4))
SIZE_FLAGS = ("num_hidden_layers", "hidden_size", "num_attention_heads")  # QuickstartOptions' size: one per size here
HEADER = ["#L", "#H", "#A", "encoder parameters", "held-out MLM ppl", "masked-LM acc", "NSP acc", "word_order acc"]


def parse_sizes(text: str) -> tuple[tuple[int, int, int], ...]:
    """"2x128x2,4x256x4" -> ((2, 128, 2), (4, 256, 4)); ValueError naming the flag for anything else, for a hidden
    size the heads do not divide, and for a size given twice."""
    sizes = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        match = re.fullmatch(r"(\d+)x(\d+)x(\d+)", item)
        if not match or 0 in (size := tuple(int(g) for g in match.groups())):
            raise ValueError(f"--sizes={text}: {item!r} is not LxHxA (layers x hidden size x heads, e.g. 2x128x2)")
        if size[1] % size[2]:
            raise ValueError(f"--sizes={text}: {item}: {size[2]} heads do not divide the hidden size {size[1]}")
        if size in sizes:
            raise ValueError(f"--sizes={text}: {item} is given twice")
        sizes.append(size)
    if not sizes:
        raise ValueError("--sizes is empty: give one or more LxHxA, e.g. 2x128x2,4x256x4")
    return tuple(sizes)


def run_model_size(output_dir: str = "runs/model_size", options: QuickstartOptions = QuickstartOptions(),
                   input_file: str | None = None, force: bool = False,
                   sizes: tuple[tuple[int, int, int], ...] = DEFAULT_SIZES) -> dict:
    """Pretrains and scores each size (see the module docstring); returns {"LxHxA": figures}."""
    from bert_tf.config import BertConfig

    sizes = parse_sizes(",".join("x".join(map(str, size)) for size in sizes))
    bench = workbench.prepare(output_dir, options, input_file, force, span=False)
    results: dict = {}
    for layers, hidden, heads in sizes:
        name = f"{layers}x{hidden}x{heads}"
        config = BertConfig(vocab_size=bench.figures["vocab"]["vocab_size"], hidden_size=hidden,
                            num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * hidden,
                            max_position_embeddings=max(128, options.max_seq_length))
        stages = workbench.branch(bench.stages)
        pretrained = workbench.pretrain(bench, stages, name, config, "mlm_nsp", (("nsp", "mlm_nsp"),))
        results[name] = {"size": [layers, hidden, heads], "pretrain": pretrained,
                         "perplexity": math.exp(pretrained["nsp/masked_lm_loss"]),
                         "word_order": workbench.word_order(bench, stages, name, pretrained["bert_model"])}
    workbench.write_results(bench, results)
    _write_outputs(bench, results)
    return results


def _write_outputs(bench, results: dict) -> None:
    rows = [[*map(str, f["size"]), f"{f['pretrain']['parameters']:,}", report.cell(f["perplexity"], 1),
             report.cell(f["pretrain"]["nsp/masked_lm_accuracy"]),
             report.cell(f["pretrain"]["nsp/next_sentence_accuracy"]),
             report.cell(f["word_order"]["accuracy"], stderr=f["word_order"]["stderr"])] for f in results.values()]
    table = report.write_table(bench.output_dir, HEADER, rows)
    plot = _plot(bench.output_dir, results)
    o, r, t = bench.options, bench.figures["records"], bench.figures["tasks"]
    intro = [f"Corpus: {bench.figures['corpus']['source']}, {bench.figures['corpus']['megabytes']} MB. Every size: "
             f"{o.num_train_steps} steps of {o.train_batch_size} sequences of {o.max_seq_length} tokens, learning "
             f"rate {o.learning_rate:g}, seed {o.random_seed}. Held out: {r['heldout_instances']['nsp']} sentence "
             "pairs (their masked positions give the perplexity). word_order: "
             f"{o.finetune_examples} training examples, {t['word_order_dev_sentences']} dev sentences; ± is one "
             "binomial standard error."]
    by_size = sorted(results.values(), key=lambda f: f["pretrain"]["parameters"])
    findings = [f"- Perplexity from the smallest to the largest encoder ({by_size[0]['pretrain']['parameters']:,} -> "
                f"{by_size[-1]['pretrain']['parameters']:,} parameters): "
                + " -> ".join(f"{f['perplexity']:.1f}" for f in by_size) + "."]
    findings += [report.compare("word_order accuracy, the next size up",
                                (_name(a), a["word_order"]["accuracy"], a["word_order"]["stderr"]),
                                (_name(b), b["word_order"]["accuracy"], b["word_order"]["stderr"]))
                 for a, b in zip(by_size, by_size[1:])]
    caveats = [
        "- Table 6's sizes run from 3 layers of 768 to 24 of 1024 (BERT-Large), each pretrained for 1M steps; these "
        "are tiny and pretrained for minutes, all for the same steps. A larger model trained this briefly can be "
        "further from converged than a small one, so a run like this may rank sizes differently from the paper.",
        "- The paper's point is that larger models help even on small fine-tuning sets (MRPC: 3,600 examples). "
        "Fine-tuning here is as small, but one seed per size: the ± covers the dev set's size, not the seed.",
        "- Perplexity is over the masked positions only, as the paper's, and compares across sizes because every "
        "size sees the same held-out masked positions with the same vocabulary.",
    ]
    report.write_report(bench.output_dir, "Table 6 at small scale: model size", intro, table, findings, caveats,
                        plot)


def _name(figures: dict) -> str:
    return "x".join(map(str, figures["size"]))


def _plot(output_dir: str, results: dict) -> str:
    plt = report.pyplot()
    figure, (perplexity, accuracy) = plt.subplots(1, 2, figsize=(10, 3.8))
    points = sorted(results.items(), key=lambda item: item[1]["pretrain"]["parameters"])
    params = [f["pretrain"]["parameters"] for _, f in points]
    perplexity.plot(params, [f["perplexity"] for _, f in points], marker="o")
    accuracy.errorbar(params, [f["word_order"]["accuracy"] for _, f in points],
                      yerr=[f["word_order"]["stderr"] for _, f in points], marker="o", capsize=3)
    accuracy.axhline(0.5, color="gray", linestyle="--", linewidth=1, label="chance")
    accuracy.legend(fontsize=8)
    for axis, key, label in ((perplexity, "perplexity", "held-out masked-LM perplexity"),
                             (accuracy, None, "word_order dev accuracy")):
        for (name, f), x in zip(points, params):
            y = f["perplexity"] if key else f["word_order"]["accuracy"]
            axis.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        axis.set_xscale("log")
        axis.set_xlabel("encoder parameters")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    figure.suptitle("Model size (L x H x A)")
    return report.save_figure(figure, os.path.join(output_dir, "model_size.png"))
