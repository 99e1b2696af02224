"""`report.md`: the run's figures, which stages ran now and which were reused, the demo's answers and the plots."""

from __future__ import annotations

import os

from absl import logging

from bert_tf.training import write_lines
from bert_tf_quickstart.demo import format_answers


def write_report(output_dir: str, figures: dict, plots: list[str], seconds: float, ran: list[str],
                 reused: list[str]) -> str:
    """`report.md`: the corpus, the held-out figures (each with its number of held-out examples, and a note where
    that number is too small to mean anything), which stages ran in this run and which were reused, the answers."""
    c, r, p, f = figures["corpus"], figures["records"], figures["pretrain"], figures["finetune"]
    times = lambda names: ", ".join(f"{name} {figures[name]['seconds']:.0f} s" for name in names)  # noqa: E731
    notes = [f"- {what}: {note}." for what, note in (("masked-LM accuracy", p.get("masked_lm_note")),
                                                     ("next-sentence accuracy", p.get("next_sentence_note")),
                                                     ("word_order accuracy", f.get("heldout_note"))) if note]
    lines = ["# bert-tf quickstart report", "",
             f"Corpus: {c['source']}: {c['documents']} documents, {c['sentences']} sentences, {c['megabytes']} MB "
             f"({c['heldout_documents']} documents held out). Vocabulary: {figures['vocab']['vocab_size']} word "
             f"pieces. Pretraining instances: {r['train_instances']}.", "",
             "| figure | value | chance | held-out examples |", "|---|---|---|---|",
             f"| held-out masked-LM accuracy | {p['heldout_masked_lm_accuracy']:.3f} | {p['masked_lm_chance']:.4f} "
             f"| {r['heldout_masked']} masked positions |",
             f"| held-out next-sentence accuracy | {p['heldout_next_sentence_accuracy']:.3f} "
             f"| {p['next_sentence_chance']:.3f} (the larger label's share) "
             f"| {r['heldout_instances']} instances |",
             f"| word_order fine-tuned held-out accuracy | {f['heldout_accuracy']:.3f} | 0.5 "
             f"| {f['heldout_sentences']} sentences |", ""]
    if notes:
        lines += ["Too little held-out data:", *notes, ""]
    if ran:
        lines.append(f"Run now: {times(ran)} (this run {seconds:.0f} s in all).")
    else:
        lines.append(f"Nothing was redone: every stage was reused (this run {seconds:.0f} s, plots and report).")
    if reused:
        lines.append(f"Reused from an earlier run, with the times they took then: {times(reused)}.")
    lines += ["", "```", format_answers(figures["answers"]), "```", ""]
    lines += [f"![{os.path.basename(path)}](plots/{os.path.basename(path)})" for path in plots]
    path = os.path.join(output_dir, "report.md")
    write_lines(path, lines)
    logging.info("wrote %s", path)
    return path
