"""A newcomer's first hour (issue 10, newcomer frictions): a version, one name per bundled dataset and a command
that lists them, errors that name the extra to install, a demo that claims only the plot it wrote, a run that says
what it is doing (numba compile, status lines or a bar, the size of what it wrote), scenarios on bundled data."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamforest.cli import _output_sizes, main
from streamforest.compilation import kernels_compiled
from streamforest.datasets import bundled_dataset, bundled_names
from streamforest.optional import require

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("streamforest")


def block(monkeypatch, module: str) -> None:
    """Make ``module`` look uninstalled for this test (and forget the modules that imported it)."""
    for name in list(sys.modules):
        if name == module or name.startswith(module + ".") or name.startswith("streamforest.connectors.river"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


# ----------------------------------------------------------------------------- version, datasets


def test_version_is_the_installed_one(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"streamforest {importlib.metadata.version('streamforest')}"


def test_datasets_lists_the_names_that_produce_and_demo_take(capsysbinary, tmp_path):
    assert main(["datasets"]) == 0
    listing = capsysbinary.readouterr().out.decode()
    names = bundled_names()
    assert len(names) == 5
    for name in names:
        assert f"\n{name} " in listing
        path, _ = bundled_dataset(name)
        assert path.exists()
    assert main(["produce", "ilpd", "--target", "target", "--stream", "s"]) == 0  # a name, not a file
    assert b'"kind":"nominal"' in capsysbinary.readouterr().out  # the manifest's nominal column came along


def test_an_unknown_dataset_name_lists_the_bundled_ones(capsys, tmp_path):
    assert main(["demo", "--dataset", "diabetes_37.csv", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "no bundled dataset 'diabetes_37.csv'" in out and "MagicTelescope" in out and "streamforest datasets" in out
    assert main(["produce", "nope", "--target", "target", "--stream", "s"]) == 1
    assert "no bundled dataset of that name" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- optional dependencies


@pytest.mark.parametrize(("module", "extra"), [("river", "river"), ("matplotlib", "plot"), ("kafka", "kafka"),
                                                     ("pyarrow", "parquet")])
def test_a_missing_optional_dependency_names_its_extra(monkeypatch, module, extra):
    block(monkeypatch, module)
    with pytest.raises(ModuleNotFoundError, match=rf"pip install 'streamforest\[{extra}\]'"):
        require(module, "this")


def test_the_river_adapter_without_river_says_what_to_install(monkeypatch):
    block(monkeypatch, "river")
    with pytest.raises(ModuleNotFoundError) as exc:
        import streamforest.connectors.river  # noqa: F401
    assert "streamforest.connectors.river needs river" in str(exc.value)
    assert "pip install 'streamforest[river]'" in str(exc.value)


def test_without_kafka_python_the_cli_works_and_kafka_commands_name_the_extra(capsys):
    # In a process of its own: the CLI is imported here already, with kafka-python.
    code = ("import sys; sys.modules['kafka'] = None\n"
            "from streamforest.cli import main\n"
            "assert main(['datasets']) == 0\n"
            "sys.exit(main(['kafka', 'run', '--exit-when-idle', '1']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "pip install 'streamforest[kafka]'" in done.stderr
    with pytest.raises(ModuleNotFoundError, match=r"streamforest\[kafka\]"):
        _import_worker_without_kafka()


def _import_worker_without_kafka() -> None:
    saved = {k: v for k, v in sys.modules.items() if k == "kafka" or k.startswith("kafka.")
             or k.startswith("streamforest.connectors.kafka.")}
    for k in saved:
        del sys.modules[k]
    sys.modules["kafka"] = None
    try:
        from streamforest.connectors.kafka import Worker  # noqa: F401
    finally:
        del sys.modules["kafka"]
        sys.modules.update(saved)


def test_require_does_not_hide_other_missing_modules(monkeypatch):
    with pytest.raises(ModuleNotFoundError, match="No module named 'not_a_module'"):
        require("not_a_module", "this")


@pytest.mark.slow
def test_demo_says_it_compiles_and_without_matplotlib_names_no_plot(monkeypatch, capsys, tmp_path):
    (tmp_path / "score_per_feature.png").write_bytes(b"an earlier run's plot")
    block(monkeypatch, "matplotlib")
    import streamforest.demo

    monkeypatch.setattr(streamforest.demo, "kernels_compiled", lambda: False)  # as on a fresh install
    assert main(["demo", "--dataset", "banknote-authentication", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("first use: compiling the forest's numba kernels")
    assert "no plot: the demo's plot needs matplotlib" in out and "pip install 'streamforest[plot]'" in out
    assert "score_per_feature.png" not in out
    assert not (tmp_path / "score_per_feature.png").exists()


# ----------------------------------------------------------------------------- what run says


def _tiny_input(path: Path) -> Path:
    import orjson

    from streamforest.engine.produce import produce_messages

    msgs, _, _ = produce_messages("blood-transfusion-service-center", "target", "b", seed=0)
    path.write_bytes(b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    return path


def test_kernels_compiled_tells_a_cold_cache_from_a_warm_one(tmp_path):
    from streamforest import FeatureStreamForest

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    f = FeatureStreamForest(trees_per_generation=2, random_state=0)
    f.add_feature("a", X[:, 0], y=(X[:, 0] > 0).astype(int))
    f.add_feature("b", X[:, 1])
    f.encode(X)
    assert kernels_compiled() is True
    r = subprocess.run([sys.executable, "-c", "from streamforest.compilation import kernels_compiled as k; print(k())"],
                       capture_output=True, text=True, env={"NUMBA_CACHE_DIR": str(tmp_path), "PATH": ""})
    assert r.stdout.strip() == "False", r.stderr


def test_run_reports_status_lines_when_stderr_is_not_a_terminal(tmp_path):
    src = _tiny_input(tmp_path / "in.jsonl")
    r = subprocess.run([str(SCRIPT), "run", "--input", str(src), "--output", str(tmp_path / "out"),
                        "--status-every", "0.01", "--forest-param", "trees_per_generation=3"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == f"streamforest run: reading {src} ({src.stat().st_size / 1e3:.1f} kB)"
    assert lines[-2].startswith("streamforest run: done in ")
    assert "5 messages -> " in lines[-2] and "(4 feedback, 0 dead letters)" in lines[-2]
    assert lines[-1].startswith("streamforest run: wrote feedback.jsonl")
    assert r.stdout == ""


def test_run_quiet_says_nothing(tmp_path):
    src = _tiny_input(tmp_path / "in.jsonl")
    r = subprocess.run([str(SCRIPT), "run", "--input", str(src), "--output", str(tmp_path / "out"), "--quiet",
                        "--forest-param", "trees_per_generation=3"], capture_output=True, text=True)
    assert (r.returncode, r.stderr, r.stdout) == (0, "", "")
    assert (tmp_path / "out" / "feedback.jsonl").stat().st_size > 0


def test_periodic_status_lines_come_while_a_message_is_processed():
    import io
    import time

    from streamforest.engine.progress import Progress

    out = io.StringIO()
    p = Progress("lines", "in.jsonl", 1000, out=out, interval=0.02)
    time.sleep(0.2)  # one long message, e.g. the first compile
    p.update(500, 1, 1, feedback=1)
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 4
    assert all(line.startswith("streamforest run: ") for line in lines)
    assert lines[0] == "streamforest run: reading in.jsonl (1.0 kB)"
    assert "line 0 (0% of 1.0 kB), 0 messages" in lines[1]
    assert "line 1 (50% of 1.0 kB), 1 messages -> 1 records" in lines[-1]


def test_compile_notice_when_the_kernels_are_not_cached(tmp_path):
    src = _tiny_input(tmp_path / "in.jsonl")
    code = ("import sys, streamforest.engine.runtime as rt; rt.kernels_compiled = lambda: False; "
            "from streamforest.cli import main; sys.exit(main(sys.argv[1:]))")
    r = subprocess.run([sys.executable, "-c", code, "run", "--input", str(src), "--output", str(tmp_path / "out"),
                        "--forest-param", "trees_per_generation=3"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[1] == ("streamforest run: first use: compiling the forest's numba kernels (a "
                                        "minute or two, once; later runs load them from the on-disk cache)")


def test_output_sizes_point_at_encoding_none_when_encodings_dominate(tmp_path):
    for name, size in (("feedback.jsonl", 3_000), ("predictions.jsonl", 9_600_000),
                       ("encodings.jsonl", 179_000_000), ("errors.jsonl", 0)):
        with open(tmp_path / name, "wb") as fh:
            fh.truncate(size)
    line = _output_sizes(tmp_path)
    assert "encodings.jsonl 179.0 MB" in line and "predictions.jsonl 9.6 MB" in line
    assert line.endswith("(the encodings are most of it: --encoding none leaves them out)")
    (tmp_path / "encodings.jsonl").unlink()
    assert "--encoding none" not in _output_sizes(tmp_path)


def test_run_help_documents_progress_quiet_and_the_output_size():
    r = subprocess.run([str(SCRIPT), "run", "--help"], capture_output=True, text=True)
    text = " ".join(r.stdout.split())
    for words in ("--progress [{auto,bar,lines,none}]", "--quiet", "--status-every", "numba compiles",
                  "179 MB of encodings", "none publishes predictions only"):
        assert words in text


# ----------------------------------------------------------------------------- scenarios on bundled data


@pytest.mark.slow
def test_paper_reproduction_runs_on_bundled_data(tmp_path):
    from scenarios.paper_reproduction import main as paper

    assert paper(["--bundled", "--datasets", "diabetes,banknote-authentication", "--seeds", "1", "--workers", "1",
                  "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "| paper, same datasets | 2 |" in report
    assert (tmp_path / "scatter.png").stat().st_size > 10_000


@pytest.mark.slow
def test_induced_features_runs_on_bundled_data(tmp_path):
    from scenarios.induced_features import main as induced

    assert induced(["--bundled", "--datasets", "banknote-authentication", "--noise-datasets",
                    "banknote-authentication", "--seeds", "1", "--workers", "1", "--out", str(tmp_path)]) == 0
    assert "banknote-authentication" in (tmp_path / "per_dataset.tsv").read_text()
    assert (tmp_path / "summary.md").exists()
    assert (tmp_path / "noise.png").stat().st_size > 10_000
