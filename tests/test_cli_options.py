"""Engine options of the CLI: absurd values are refused when the command starts, before anything is read or
written; one helper (``add_engine_options`` + ``engine_config``) serves every command that runs an engine."""

from __future__ import annotations

import argparse

import pytest

from streamforest.cli import main
from streamforest.engine.core import EngineConfig
from streamforest.engine.options import add_engine_options, engine_config


@pytest.mark.parametrize("args", [
    ["--n-components", "0"], ["--n-components", "-1"], ["--n-components", str(2**63)],
    ["--n-components", "lots"], ["--checkpoint-every", "0"], ["--checkpoint-every", "-5"],
    ["--seed", "-1"], ["--seed", str(2**64)], ["--max-message-bytes", "0"], ["--metrics-port", "70000"],
])
def test_out_of_range_numbers_are_refused_by_the_parser(tmp_path, capsys, args):
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    with pytest.raises(SystemExit) as exc:
        main(["run", "--input", str(tmp_path / "nowhere.jsonl"), "--output", str(out), "--checkpoint-dir",
              str(ckpt), *args])
    assert exc.value.code == 2
    assert args[0] in capsys.readouterr().err
    assert not out.exists() and not ckpt.exists()


@pytest.mark.parametrize(("param", "reason"), [
    ("trees_per_generation=0", "trees_per_generation"), ("max_features=7.5", "max_features"),
    ("no_such_param=1", "no_such_param"), ("policy=best", "policy"), ("novalue", "key=value"),
    ("=3", "key=value"), ("random_state=-3", "random_state"),
])
def test_bad_forest_parameters_are_refused_before_anything_is_read_or_written(tmp_path, capsys, param, reason):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"v": 1, "type": "samples", "stream": "s", "samples": [{"id": "a", "label": 1}]}\n')
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    code = main(["run", "--input", str(src), "--output", str(out), "--checkpoint-dir", str(ckpt),
                 "--forest-param", param])
    err = capsys.readouterr().err
    assert code == 1 and reason in err and "Traceback" not in err
    assert not out.exists() and not ckpt.exists()


def test_engine_options_build_the_engine_config():
    ap = argparse.ArgumentParser()
    add_engine_options(ap)
    args = ap.parse_args(["--seed", "7", "--forest-param", "trees_per_generation=5", "--forest-param",
                          "policy=baseline", "--n-components", "0x400", "--encoding", "paths",
                          "--max-message-bytes", "1000", "--start", "control"])
    assert engine_config(args) == EngineConfig(
        forest={"random_state": 7, "trees_per_generation": 5, "policy": "baseline"}, encoding="paths",
        n_components=1024, max_message_bytes=1000, start="control")
    defaults = engine_config(ap.parse_args([]))
    assert defaults == EngineConfig(forest={"random_state": 0})


@pytest.mark.parametrize("kwargs", [dict(n_components=2**63), dict(n_components=2**31), dict(max_message_bytes=0),
                                    dict(forest={"random_state": -1}), dict(forest={"bogus": 1})])
def test_engine_config_refuses_out_of_range_values(kwargs):
    with pytest.raises(ValueError):
        EngineConfig(**kwargs)
