"""Packaging: the install a newcomer runs (``make demo``) is quiet, and the wheel carries the bundled datasets."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from streamforest.datasets import bundled_dir, read_manifest

REPO = Path(__file__).resolve().parents[1]


def _backend_warnings(output: str) -> list[str]:
    """Lines where pip relays a warning of the build backend (setuptools)."""
    return [line for line in output.splitlines() if "BuildBackendWarning" in line or "SetuptoolsDeprecation" in line]


def _source_copy(tmp_path: Path) -> Path:
    """What a build reads, copied away: an in-tree build would leave build/ in the checkout."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("streamforest", "connectors"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.nb[ic]"))
    return src


def _makefile_env() -> dict[str, str]:
    """The environment the Makefile's install recipe adds (its QUIET_BUILD variable)."""
    text = (REPO / "Makefile").read_text()
    name, value = re.search(r'^QUIET_BUILD := (\w+)="([^"]*)"', text, flags=re.M).groups()
    assert "$(QUIET_BUILD) $(BIN)/pip install --quiet -e '.[dev]'" in text
    return {name: value}


@pytest.mark.slow
def test_wheel_builds_without_warnings_and_carries_the_datasets(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    wheels = tmp_path / "wheels"
    src = _source_copy(tmp_path)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(src)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert _backend_warnings(r.stdout + r.stderr) == []
    (wheel,) = wheels.glob("streamforest-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    files = ["MANIFEST.tsv"] + [row["file"] for row in read_manifest(bundled_dir())]
    assert {f"streamforest/data/{f}" for f in files} <= names
    assert "streamforest/connectors/river/classifier.py" in names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "License-Expression: MIT" in metadata


@pytest.mark.slow
def test_editable_install_as_the_makefile_runs_it_is_quiet(tmp_path):
    venv, src = tmp_path / "venv", _source_copy(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"} | _makefile_env()
    # The test environment's pip installs into the fresh venv (no network, no dependencies needed).
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                        "--no-deps", "-e", str(src)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert _backend_warnings(r.stdout + r.stderr) == []
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import importlib.util as u; print(u.find_spec('streamforest').origin)"],
                       capture_output=True, text=True, check=True, cwd=tmp_path)
    assert Path(r.stdout.strip()) == src / "streamforest" / "__init__.py"
