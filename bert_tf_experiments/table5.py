"""Table 5 of the paper at small scale: the pre-training objectives side by side on one corpus (the command line:
`python -m bert_tf_experiments.ablations`).

Rows: `bert` (MLM + NSP on data_gen's sentence pairs), `no_nsp` (MLM alone, on contiguous text), `ltr` (a
left-to-right LM on contiguous text, fine-tuned with the same causal mask), `ltr_bilstm` (the `ltr` model with a
BiLSTM on top for span QA, `run_squad --bilstm_head`). Each pretrained model (same architecture, corpus, steps, batch
and seed) is scored on held-out text and fine-tuned on `word_order` (classification) and `missing_word` (span QA).
Writes `table.tsv`, `table.md`, `ablations.png`, `report.md` and `results.json` under `output_dir`; a rerun reuses
what is done (see `bert_tf_experiments.workbench`).
"""

from __future__ import annotations

import os

from bert_tf_experiments import report, workbench
from bert_tf_quickstart.options import QuickstartOptions

# row: (label as in Table 5, pretrained model it uses, objective, BiLSTM span head)
ROWS = {"bert": ("BERT (MLM + NSP)", "bert", "mlm_nsp", False),
        "no_nsp": ("No NSP", "no_nsp", "mlm", False),
        "ltr": ("LTR & No NSP", "ltr", "ltr", False),
        "ltr_bilstm": ("+ BiLSTM", "ltr", "ltr", True)}
# what each objective's model is scored on: (held-out record kind, objective whose metrics are computed); both
# masked-LM models on the same contiguous held-out text, so that their masked-LM figures compare position for position
HELDOUT = {"mlm_nsp": (("contiguous", "mlm"), ("nsp", "mlm_nsp")), "mlm": (("contiguous", "mlm"),),
           "ltr": (("contiguous", "ltr"),)}
HEADER = ["row", "objective", "held-out masked-LM loss", "masked-LM acc", "held-out next-token loss",
          "next-token acc", "NSP acc", "word_order acc", "missing_word EM", "missing_word F1"]


def run_ablations(output_dir: str = "runs/ablations", options: QuickstartOptions = QuickstartOptions(),
                  input_file: str | None = None, force: bool = False, rows: tuple[str, ...] = tuple(ROWS)) -> dict:
    """Runs the chosen rows (see the module docstring); returns {row: figures}."""
    from bert_tf.config import BertConfig

    unknown = [row for row in rows if row not in ROWS]
    if unknown or not rows:
        raise ValueError(f"--rows={','.join(rows)}: expected some of {', '.join(ROWS)}")
    bench = workbench.prepare(output_dir, options, input_file, force)
    o = options
    config = BertConfig(vocab_size=bench.figures["vocab"]["vocab_size"], hidden_size=o.hidden_size,
                        num_hidden_layers=o.num_hidden_layers, num_attention_heads=o.num_attention_heads,
                        intermediate_size=4 * o.hidden_size, max_position_embeddings=max(128, o.max_seq_length))
    models: dict = {}
    results: dict = {}
    for row in rows:
        label, model, objective, bilstm = ROWS[row]
        if model not in models:
            stages = workbench.branch(bench.stages)
            pretrained = workbench.pretrain(bench, stages, model, config, objective, HELDOUT[objective])
            models[model] = (stages, pretrained)
        stages, pretrained = models[model]
        figures = {"label": label, "pretrain": pretrained}
        if not bilstm:  # the BiLSTM is a span head; its row's classification would be the ltr row's
            figures["word_order"] = workbench.word_order(bench, stages, model, pretrained["bert_model"])
        figures["missing_word"] = workbench.missing_word(bench, stages, model, pretrained["bert_model"], bilstm)
        results[row] = figures
    workbench.write_results(bench, results)
    _write_outputs(bench, results)
    return results


def _write_outputs(bench, results: dict) -> None:
    table_rows = []
    for row, f in results.items():
        p, w, m = f["pretrain"], f.get("word_order"), f["missing_word"]
        table_rows.append([f["label"], p["objective"], report.cell(p.get("contiguous/masked_lm_loss")),
                           report.cell(p.get("contiguous/masked_lm_accuracy")),
                           report.cell(p.get("contiguous/lm_loss")), report.cell(p.get("contiguous/lm_accuracy")),
                           report.cell(p.get("nsp/next_sentence_accuracy")),
                           report.cell(w and w["accuracy"], stderr=w and w["stderr"]),
                           report.cell(m["exact_match"], 1), report.cell(m["f1"], 1)])
    table = report.write_table(bench.output_dir, HEADER, table_rows)
    plot = _plot(bench.output_dir, results)
    o, r, t = bench.options, bench.figures["records"], bench.figures["tasks"]
    c = bench.figures["corpus"]
    intro = [f"Corpus: {c['source']}, {c['megabytes']} MB ({c['heldout_documents']} documents held out). Every "
             f"model: L={o.num_hidden_layers} H={o.hidden_size} A={o.num_attention_heads}, {o.num_train_steps} "
             f"steps of {o.train_batch_size} sequences of {o.max_seq_length} tokens, seed {o.random_seed}. Held "
             f"out: {r['heldout_masked']} masked positions and {r['heldout_tokens']} tokens of contiguous text (the "
             f"same text for every model), and {r['heldout_instances']['nsp']} sentence pairs for NSP. Fine-tuning: "
             f"{o.finetune_examples} examples per task, {o.finetune_epochs:g} epochs; dev: "
             f"{t['word_order_dev_sentences']} word_order sentences, {t.get('missing_word_dev_questions')} "
             "missing_word questions. ± is one binomial standard error."]
    findings = _findings(results)
    caveats = [
        "- The paper's figures: its models are BERT-Base (110M parameters) pretrained for 1M steps of 128k tokens; "
        "these are tiny models pretrained for minutes. The gaps of Table 5 are properties of that scale; a run like "
        "this one can reproduce the recipe of each row, not its numbers, and not necessarily their order.",
        "- Masked-LM loss against next-token loss: they score different predictions (a masked word from both "
        "sides; the next word from the left), so the LTR row's loss says nothing about which model is better.",
        "- The tasks: word_order asks whether the words come in the order written, the very thing a left-to-right "
        "LM is trained to predict, so it favours the LTR row by construction; the paper's GLUE tasks do not.",
        "- NSP's effect: the paper sees it on sentence-pair tasks (QNLI, MNLI, SQuAD). word_order is a one-sentence "
        "task and missing_word reads one passage, so neither tests what NSP is for.",
        "- Variance across seeds: one seed per row. The ± covers the dev set's size only; fine-tuning small models "
        "on small data also moves with the seed (the paper reruns its small-data tasks for this reason).",
    ]
    report.write_report(bench.output_dir, "Table 5 at small scale: pre-training objectives", intro, table, findings,
                        caveats, plot)


# the comparisons Table 5 is about: (row, row it is compared with, what the second one changes)
COMPARISONS = (("bert", "no_nsp", "removing NSP"), ("no_nsp", "ltr", "left-to-right instead of masked LM"),
               ("ltr", "ltr_bilstm", "a BiLSTM on the left-to-right model"))


def _findings(results: dict) -> list[str]:
    """Table 5's comparisons among the rows run: each downstream figure with a verdict on whether the dev set can
    tell the two rows apart, and the masked-LM loss of the two masked-LM models on the same held-out positions."""
    def figures(row):  # {label: (value, standard error, digits)}
        f = results[row]
        exact = f["missing_word"]["exact_match"]
        stderr = 100 * workbench.standard_error(exact / 100, f["missing_word"]["dev_questions"])
        found = {"missing_word exact match (%)": (exact, stderr, 1)}
        if "word_order" in f:
            found["word_order accuracy"] = (f["word_order"]["accuracy"], f["word_order"]["stderr"], 3)
        return found

    lines = []
    for a, b, change in COMPARISONS:
        if a in results and b in results:
            first, second = figures(a), figures(b)
            for label in sorted(set(first) & set(second)):
                lines.append(report.compare(f"{change}, {label}", (results[a]["label"], *first[label][:2]),
                                            (results[b]["label"], *second[label][:2]), digits=first[label][2]))
    if "bert" in results and "no_nsp" in results:
        a, b = (results[r]["pretrain"]["contiguous/masked_lm_loss"] for r in ("bert", "no_nsp"))
        lines.append(f"- Held-out masked-LM loss on the same positions: BERT (MLM + NSP) {a:.3f}, No NSP {b:.3f} "
                     f"(difference {b - a:+.3f}).")
    return lines or ["- The rows run include none of Table 5's pairs: nothing to compare."]


def _plot(output_dir: str, results: dict) -> str:
    plt = report.pyplot()
    figure, (losses, scores) = plt.subplots(1, 2, figsize=(11, 4))
    models = {}
    for f in results.values():
        p = f["pretrain"]
        masked = p.get("contiguous/masked_lm_loss")
        models.setdefault(f["label"] if f["label"] != "+ BiLSTM" else "LTR & No NSP",
                          (masked, "masked LM") if masked is not None else (p["contiguous/lm_loss"], "next token"))
    names = list(models)
    colors = ["tab:blue" if kind == "masked LM" else "tab:orange" for _, kind in models.values()]
    losses.bar(names, [value for value, _ in models.values()], color=colors)
    for i, (value, kind) in enumerate(models.values()):
        losses.annotate(f"{value:.2f}\n({kind})", (i, value), ha="center", va="bottom", fontsize=8)
    losses.set_ylim(0, 1.25 * max(value for value, _ in models.values()))
    losses.set_ylabel("held-out loss (nats per prediction)")
    losses.set_title("Pretraining: masked-LM and next-token losses do not compare", fontsize=9)
    labels = [f["label"] for f in results.values()]
    x = range(len(labels))
    word = [f["word_order"]["accuracy"] * 100 if "word_order" in f else 0 for f in results.values()]
    errors = [f["word_order"]["stderr"] * 100 if "word_order" in f else 0 for f in results.values()]
    scores.bar([i - 0.2 for i in x], word, width=0.4, yerr=errors, capsize=3, label="word_order accuracy (%)")
    scores.bar([i + 0.2 for i in x], [f["missing_word"]["f1"] for f in results.values()], width=0.4,
               label="missing_word F1")
    for i, f in enumerate(results.values()):
        if "word_order" not in f:
            scores.annotate("n/a", (i - 0.2, 1), ha="center", fontsize=8)
    scores.set_xticks(list(x), labels)
    scores.set_ylim(0, 100)
    scores.set_ylabel("dev score")
    scores.set_title("Fine-tuned (error bars: one standard error)", fontsize=9)
    scores.legend(fontsize=8)
    for axis in (losses, scores):
        axis.tick_params(axis="x", labelsize=8)
        axis.grid(axis="y", alpha=0.3)
    return report.save_figure(figure, os.path.join(output_dir, "ablations.png"))
