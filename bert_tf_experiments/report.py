"""The drivers' outputs besides `results.json`: the table (`table.tsv` for programs, `table.md` for people), a plot
and `report.md`, which puts the table beside what a run of this size can and cannot show."""

from __future__ import annotations

import os

from bert_tf import staging
from bert_tf.training import write_lines

DASH = "—"  # a figure that does not exist for that row (e.g. NSP accuracy of a model without NSP)


def cell(value, digits: int = 3, stderr: float | None = None) -> str:
    """A table cell: the number to `digits` decimals (with "± stderr"), or a dash for None."""
    if value is None:
        return DASH
    text = f"{value:.{digits}f}"
    return text + (f" ± {stderr:.{digits}f}" if stderr is not None else "")


def write_table(output_dir: str, header: list[str], rows: list[list[str]]) -> str:
    """`table.tsv` and `table.md` under `output_dir`; returns the markdown."""
    write_lines(os.path.join(output_dir, "table.tsv"), ["\t".join(line) for line in [header, *rows]])
    markdown = [f"| {' | '.join(header)} |", f"|{'---|' * len(header)}", *(f"| {' | '.join(r)} |" for r in rows)]
    write_lines(os.path.join(output_dir, "table.md"), markdown)
    return "\n".join(markdown)


def write_report(output_dir: str, title: str, intro: list[str], table: str, findings: list[str], caveats: list[str],
                 plot: str) -> str:
    """`report.md`: the settings, the table, what the figures do and do not tell apart, and the plot."""
    lines = [f"# {title}", "", *intro, "", table, "", "## What these figures show", "", *findings, "",
             "## What a run of this size cannot show", "", *caveats, "",
             f"![{os.path.basename(plot)}]({os.path.basename(plot)})", ""]
    path = os.path.join(output_dir, "report.md")
    write_lines(path, lines)
    return path


def compare(label: str, a: tuple[str, float, float], b: tuple[str, float, float], digits: int = 3) -> str:
    """One line saying whether two rows' figures (name, value, standard error) differ by more than twice the
    standard error of their difference, i.e. beyond what the dev set's size alone explains."""
    (name_a, value_a, se_a), (name_b, value_b, se_b) = a, b
    spread = 2 * (se_a ** 2 + se_b ** 2) ** 0.5
    verdict = "beyond the dev set's noise" if abs(value_a - value_b) > spread else \
        "within the dev set's noise: no conclusion"
    return (f"- {label}: {name_a} {value_a:.{digits}f}, {name_b} {value_b:.{digits}f}, difference "
            f"{value_b - value_a:+.{digits}f} (2 standard errors: {spread:.{digits}f}): {verdict}.")


def save_figure(figure, path: str) -> str:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    with staging.staged_file(path, suffix=".png") as tmp:
        figure.savefig(tmp, dpi=80)
    plt.close(figure)
    return path


def pyplot():
    """matplotlib's pyplot on the file-only backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
