"""The README says only what is true: its Python examples run, its commands parse, the files it names exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from streamforest.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.M | re.S)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_example_runs(index, tmp_path):
    code = blocks("python")[index]
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"README python block {index + 1} failed:\n{code}\n{r.stderr}"


def test_there_are_examples_to_run():
    assert len(blocks("python")) >= 2 and len(blocks("sh")) >= 2


def test_every_streamforest_command_parses(capsys):
    text = "\n".join(blocks("sh")).replace("\\\n", " ")  # continued lines joined
    commands = [part.split(">")[0].strip() for line in text.splitlines() for part in line.split("#")[0].split("|")]
    commands = [c for c in commands if c.startswith("streamforest ")]
    assert len(commands) >= 5
    for command in commands:
        try:
            build_parser().parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"README: `{command}` is refused: {capsys.readouterr().err}")


def test_make_targets_exist():
    makefile = (REPO / "Makefile").read_text()
    for target in re.findall(r"^make (\w+)", "\n".join(blocks("sh")), flags=re.M):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target


def test_named_files_exist():
    paths = set(re.findall(r"`((?:streamforest|connectors|docs|docker|scenarios|tests|\.ci)/[\w./-]*)`", README))
    paths |= set(re.findall(r"\]\(((?!https?:)[^)#]+)\)", README))
    assert len(paths) >= 15
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert missing == []


def test_scenario_modules_and_their_flags_exist():
    for module, flags in re.findall(r"python -m (scenarios[\w.]+)((?: \[[^\]]*\])*)", README):
        source = (REPO / (module.replace(".", "/") + ".py")).read_text()
        # Options shared by several benchmarks are declared in the scenario modules they import.
        imported = (REPO / (m.replace(".", "/") + ".py")
                    for m in re.findall(r"^from (scenarios[\w.]+) import", source, flags=re.M))
        source += "".join(path.read_text() for path in imported if path.exists())
        for flag in re.findall(r"--[\w-]+", flags):
            assert f'"{flag}"' in source, f"{module} has no {flag}"
