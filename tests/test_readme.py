"""The README and the guides in docs/ are the contract with users and CI; keep them true.

- The README's two set-up commands are the ones CI runs.
- Every command-line tool the docs name exists (a console script in pyproject.toml, or a module run with
  `python -m` that has a `__main__` entry), and the README's CLI table lists every console script.
- Every `--flag` the docs show on a command line of one of these tools is a flag that tool defines: the flags are
  read from the tools themselves, by importing each one in a fresh process, not from a list kept here.
- Every relative link in the README, BENCHMARKS.md and docs/ names a file that exists, and a `#anchor` a heading in
  it.
"""

import glob
import json
import os
import re
import tomllib

import pytest

from tests import forking

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", "BENCHMARKS.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs",
                                                                                                       "*.md")))
# The tools run with `python -m` that are not console scripts.
MODULE_TOOLS = ["data_gen.beam", "export.saved_model_cli", "bert_tf_experiments.ablations",
                "bert_tf_experiments.model_size"]
# The benchmarks (`python -m bench.<name>`): every module of bench/ that runs as a program.
BENCH_TOOLS = sorted("bench." + os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "bench", "*.py"))
                     if 'if __name__ == "__main__":' in open(p, encoding="utf-8").read())


def read(path):
    return open(os.path.join(ROOT, path), encoding="utf-8").read()


def readme_commands():
    setup = read("README.md").split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", setup, flags=re.S)


def console_scripts():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    return {name: target.split(":") for name, target in scripts.items()}


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    main_job, tests = readme_commands()
    assert "\n" not in main_job and "\n" not in tests
    assert "bert_tf_quickstart" in main_job and "pytest" in tests
    ci = read(os.path.join(".ci", "run"))
    assert tests in ci.splitlines()


def test_the_main_job_is_the_quickstart_console_script():
    main_job, _ = readme_commands()
    module = re.search(r"python -m (\S+)", main_job).group(1)
    if os.path.isdir(os.path.join(ROOT, *module.split("."))):  # a package: `python -m` runs its __main__
        module += ".__main__"
    assert console_scripts()["bert_tf_quickstart"] == [module, "run"]


# --- the tools and their flags -------------------------------------------------------------------------------

def tool_modules():
    """{tool name as the docs write it: module}: console scripts and `python -m` modules, the benchmarks too."""
    tools = {name: module for name, (module, _) in console_scripts().items()}
    for module in set(tools.values()) | set(MODULE_TOOLS) | set(BENCH_TOOLS):
        tools[module] = module
    return tools


def invocations(text):
    """(tool, [flags]) for each command line in `text` that runs a tool: fenced blocks (backslash continuations
    joined) and inline code spans. A command ends at `&&`, `;`, `|`, a shell comment, or a lone `--` (after which
    Beam reads its own pipeline options)."""
    tools = tool_modules()
    names = sorted((t for t in tools if "." not in t), key=len, reverse=True)
    start = re.compile(r"(?:^|(?<=[\s(`]))(?:python -m ([\w.]+)|(" + "|".join(map(re.escape, names)) + r"))(?=\s|$)")
    lines = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        lines += block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.S | re.M)
    lines += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
    found = []
    for line in lines:
        for match in start.finditer(line):
            tool = match.group(1) or match.group(2)
            if tool not in tools:
                continue
            rest = re.split(r"&&|;|\||\s#|\s--(?=\s|$)", line[match.end():])[0]
            found.append((tool, re.findall(r"(?<![\w-])--([A-Za-z_][\w-]*)", rest)))
    return found


FLAG_LISTER = r"""
import importlib, json, sys
import bert_tf  # before TensorFlow, as the tools do
from absl import app, flags, logging  # noqa: F401  (their flags are every tool's)
app.define_help_flags()
F = flags.FLAGS
builtin = set(F)
result = {}
for module in sys.argv[1:]:
    mod = importlib.import_module(module)
    new = sorted(set(F) - builtin)
    result[module] = {"flags": new + ["no" + n for n in new if F[n].boolean], "run": callable(getattr(mod, "run", None))}
    definers = [m for m, fl in F.flags_by_module_dict().items() if any(f.name in new for f in fl)]
    for name in new:  # so that the next tool defines its own, as it does in its own process
        delattr(F, name)
    for m in definers + [module]:
        sys.modules.pop(m, None)
print(json.dumps({"builtin": sorted(builtin), "tools": result}))
"""


def argparse_flags(module):
    """The flags of a tool that builds an argparse parser inside main(), read from its `add_argument` calls, or
    from its call of `bench.common.baseline_flags` (--baseline, --rounds and the counts its dict names)."""
    source = read(module.replace(".", os.sep) + ".py")
    flags = set(re.findall(r'add_argument\("--(\w+)"', source)) | {"help"}
    call = re.search(r"baseline_flags\(\{(.*?)\}\)", source, flags=re.S)
    if call:
        flags |= {"baseline", "rounds"} | set(re.findall(r'"(\w+)": \(', call.group(1)))
    return flags


def uses_argparse(module):
    source = read(module.replace(".", os.sep) + ".py")
    return "argparse.ArgumentParser" in source or "baseline_flags(" in source  # a parser, or a subclass of it


@pytest.fixture(scope="module")
def tool_flags():
    """{module: set of flags it accepts}: absl tools are imported (in one forked process for all) and their flags read
    from absl; argparse tools build their parser inside main(), so theirs are read from their `add_argument`s."""
    modules = sorted(m for m in set(tool_modules().values()) if not uses_argparse(m))
    proc = forking.python(["-c", FLAG_LISTER, *modules], cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    listed = json.loads(proc.stdout.strip().splitlines()[-1])
    builtin = set(listed["builtin"])
    for module, entry in listed["tools"].items():
        assert entry["run"] or module in BENCH_TOOLS, f"{module} has no run() for its console script or `python -m`"
    flags_of = {module: set(entry["flags"]) | builtin for module, entry in listed["tools"].items()}
    for module in set(tool_modules().values()) - set(flags_of):
        flags_of[module] = argparse_flags(module)
    # data_gen.beam (argparse, after importing Apache Beam, an optional extra) also adds one flag per generation
    # option, as create_pretraining_data has them.
    import dataclasses

    from data_gen.generate import Options

    assert "for field in dataclasses.fields(Options)" in read(os.path.join("data_gen", "beam.py"))
    flags_of["data_gen.beam"] |= {f.name for f in dataclasses.fields(Options)}
    return flags_of


def test_every_tool_the_docs_name_exists_and_runs_as_documented():
    scripts = console_scripts()
    for name, (module, function) in scripts.items():
        assert function == "run", (name, function)
    for module in set(m for m, _ in scripts.values()) | set(MODULE_TOOLS):
        source = read(module.replace(".", os.sep) + ".py")
        assert 'if __name__ == "__main__":' in source, f"`python -m {module}` would do nothing"
    named = set()
    for doc in DOCS:
        for match in re.finditer(r"python -m ((?:bert_tf|bert_tf_experiments|data_gen|export)\.[\w.]+)", read(doc)):
            module = match.group(1).rstrip(".")
            assert os.path.exists(os.path.join(ROOT, module.replace(".", os.sep) + ".py")), (doc, module)
            named.add(module)
    # the README's CLI table has one row per console script, and no row for a tool that does not exist
    readme = read("README.md")
    table = readme.split("## The command-line tools", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(?:python -m )?([\w.]+)` \|", table, flags=re.M)
    assert set(scripts) <= set(rows), set(scripts) - set(rows)
    assert set(rows) <= set(scripts) | set(MODULE_TOOLS), set(rows) - set(scripts) - set(MODULE_TOOLS)
    assert set(MODULE_TOOLS) <= named | set(rows)


def test_every_flag_the_docs_show_is_defined_by_its_tool(tool_flags):
    tools = tool_modules()
    wrong, seen = [], set()
    for doc in DOCS:
        for tool, shown in invocations(read(doc)):
            module = tools[tool]
            seen.add(module)
            wrong += [f"{doc}: {tool} --{flag}" for flag in shown if flag not in tool_flags[module]]
    assert not wrong, "flags the docs show that the tool does not define:\n" + "\n".join(wrong)
    # the parser finds the commands: every tool of the package appears on some documented command line
    package = set(tools.values()) - set(BENCH_TOOLS)
    assert package <= seen, package - seen


def test_every_flag_named_in_prose_is_defined_by_some_tool(tool_flags):
    """`--flag` in running text (`--doc_stride`, `--quick`) is not tied to a command line; it must at least be a
    flag that one of the tools defines. pip's flags and an environment variable's value (`TF_XLA_FLAGS=--...`,
    flags of TensorFlow's) are not ours."""
    known = set().union(*tool_flags.values())
    wrong = []
    for doc in DOCS:
        prose = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", read(doc), flags=re.S | re.M)
        for span in re.findall(r"`([^`]+)`", prose):
            if re.match(r"\s*pip ", span):
                continue
            span = re.split(r"\s--(?=\s|$)", span)[0]  # after a lone `--`: Beam's own pipeline options
            span = re.sub(r"(?<![\w-])[A-Z][A-Z0-9_]*=\S*", "", span)  # an environment variable and its value
            wrong += [f"{doc}: `{span}`" for flag in re.findall(r"(?<![\w-])--([A-Za-z_][\w-]*)", span)
                      if flag not in known]
    assert not wrong, "flags no tool defines:\n" + "\n".join(wrong)


def test_the_flag_check_would_catch_a_wrong_flag(tool_flags):
    text = ("```bash\nrun_pretraining --input_file=x --train_batchsize=8 \\\n    --output_dir=y\n```\n"
            "and `python -m data_gen.beam --input_file=a --max_seq_len=64 -- --runner=DataflowRunner`\n")
    found = invocations(text)
    assert found == [("run_pretraining", ["input_file", "train_batchsize", "output_dir"]),
                     ("data_gen.beam", ["input_file", "max_seq_len"])]
    assert "train_batchsize" not in tool_flags["bert_tf.cli.run_pretraining"]
    assert "train_batch_size" in tool_flags["bert_tf.cli.run_pretraining"]
    assert "max_seq_len" not in tool_flags["data_gen.beam"] and "max_seq_length" in tool_flags["data_gen.beam"]
    assert "nodo_lower_case" in tool_flags["bert_tf.cli.run_ner"]


# --- links ---------------------------------------------------------------------------------------------------

def anchors(text):
    """GitHub's ids for the headings of a Markdown file."""
    ids = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.S | re.M),
                              flags=re.M):
        ids.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return ids


def test_every_relative_link_resolves():
    broken = []
    for doc in DOCS:
        text = read(doc)
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.S | re.M)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if not os.path.isfile(os.path.join(ROOT, resolved)):
                broken.append(f"{doc}: ({target}): no file {resolved}")
            elif anchor and anchor not in anchors(read(resolved)):
                broken.append(f"{doc}: ({target}): no heading #{anchor} in {resolved}")
    assert not broken, "\n".join(broken)


def test_the_link_check_reads_github_anchors():
    assert anchors("# TensorFlow's oneDNN kernels\n## Model speed (`python -m bench.model_speed`)\n") == {
        "tensorflows-onednn-kernels", "model-speed-python--m-benchmodel_speed"}


def test_the_tokenizer_examples_show_what_it_returns(minilm_dir):
    """`tok.tokenize("...")  # [...]` lines in the README and the guides, run with the released uncased
    vocabulary (the one all-MiniLM-L6-v2 ships) that their `vocab.txt` stands for."""
    import ast

    from bert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(os.path.join(minilm_dir, "vocab.txt"), do_lower_case=True)
    examples = [(path, match) for path in DOCS for match in
                re.finditer(r'tok\.tokenize\(("[^"]*")\)\s+# (\[.*\])', read(path))]
    assert examples
    for path, match in examples:
        assert tokenizer.tokenize(ast.literal_eval(match.group(1))) == ast.literal_eval(match.group(2)), path
