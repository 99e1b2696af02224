"""The README's two set-up commands are the contract with users and CI; keep them true."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_commands():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    setup = text.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", setup, flags=re.S)


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    main_job, tests = readme_commands()
    assert "\n" not in main_job and "\n" not in tests
    assert "bert_tf.cli.quickstart" in main_job and "pytest" in tests
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    assert tests in ci.splitlines()


def test_quickstart_module_named_by_the_readme_exists():
    import importlib

    main_job, _ = readme_commands()
    module = re.search(r"python -m (\S+)", main_job).group(1)
    assert hasattr(importlib.import_module(module), "run")
