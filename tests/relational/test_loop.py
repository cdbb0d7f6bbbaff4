"""The loop end to end on Mutagenesis through both drivers, the CLI's outputs, determinism across processes."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamforest.relational.drivers import EngineClient, InProcess, JsonlProcess
from streamforest.relational.loop import Loop, engine_config, run_loop
from streamforest.relational.policy import Candidate, Decision, Policy
from streamforest.relational.synthetic import make_relational

MUTAGENESIS = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "mutagenesis" / "data.json"
needs_data = pytest.mark.skipif(not MUTAGENESIS.exists(), reason="../shared/datasets/mutagenesis is not here")


def mutagenesis(hide: bool = True):
    from streamforest.relational.documents import load_documents

    db = load_documents(MUTAGENESIS, "mutagenic")
    if hide:
        db.labels[::5] = ""  # these rows' labels are unknown to the loop: it scores them
    return db


def _run(db, transport, budget: int, final=None):
    final = final or InProcess(engine_config(3, final=True))
    loop = Loop(db, client=EngineClient(transport), final_client=EngineClient(final), budget=budget, seed=3)
    try:
        return loop.run()
    finally:
        transport.close()
        final.close()


@needs_data
@pytest.mark.slow
def test_mutagenesis_through_both_drivers_gives_the_same_run(tmp_path):
    db = mutagenesis()
    a = _run(db, InProcess(engine_config(3)), 40)
    b = _run(mutagenesis(), JsonlProcess(engine_config(3), log=tmp_path / "engine"), 40,
             JsonlProcess(engine_config(3, final=True)))
    assert len(a.trials) == 40
    assert [t["definition"] for t in a.trials] == [t["definition"] for t in b.trials]
    assert [t["feedback"] for t in a.trials] == [t["feedback"] for t in b.trials]
    assert a.predictions == b.predictions
    scored = db.ids[~db.labelled].tolist()
    assert sorted(a.predictions) == sorted(scored) and len(scored) == 38
    # the accepted features carry signal: the loop's predictions rank the hidden labels well
    from streamforest.metrics import roc_auc

    truth = np.array([int(x) for x in mutagenesis(hide=False).labels[~db.labelled]])
    auc = roc_auc(truth, np.array([a.predictions[i]["1"] for i in scored]))
    assert auc > 0.8, auc
    # what went over the wire replays in `streamforest run`
    msgs = (tmp_path / "engine" / "messages.jsonl").read_bytes().splitlines()
    assert json.loads(msgs[0])["type"] == "samples" and all(m["v"] == 1 for m in map(json.loads, msgs))


def test_the_final_forest_is_the_offline_forest_and_an_engine_that_starts_on_arrival_serves_it_too():
    db = make_relational(n_targets=200, unlabelled=0.2, seed=0)
    by_fit = InProcess(engine_config(3, final=True))  # start "control"
    a = _run(db, InProcess(engine_config(3)), 12, by_fit)
    forest = by_fit.engine.streams["final"].forest
    # One generation of 300 trees on the whole final set, learnt from the labelled rows only.
    assert [g["forced"] for g in forest.generations_] == [[]] and forest.n_trees_ == 300
    assert list(forest.feature_names_in_) == [c.name for c in a.accepted]
    assert forest.n_samples_ == int(db.labelled.sum())
    # Breiman's trees: every feature in every tree, a third of them drawn at each split.
    d, (trees,) = forest.n_features_in_, forest._generations
    assert d >= 3 and all(len(s) == d for s in trees.subspaces) and set(trees.split_ks) == {math.ceil(d / 3)}
    streaming = InProcess({**engine_config(3, final=True), "start": "arrival"})
    b = _run(db, InProcess(engine_config(3)), 12, streaming)
    assert [t["definition"] for t in a.trials] == [t["definition"] for t in b.trials]
    assert streaming.engine.streams["final"].forest.n_trees_ > 300  # a generation per feature, some pruned
    assert sorted(a.predictions) == sorted(b.predictions) == sorted(db.ids[~db.labelled].tolist())
    assert a.final_oob is not None and b.final_oob is not None


def test_unlabelled_rows_never_reach_learning():
    db = make_relational(n_targets=150, unlabelled=0.3, seed=2)
    sent: list[dict] = []

    class Spy(InProcess):
        def send(self, message):
            sent.append(message)
            super().send(message)

    result = _run(db, Spy(engine_config(0)), 15, Spy(engine_config(0, final=True)))
    unlabelled = set(db.ids[~db.labelled].tolist())
    for m in sent:
        if m["type"] == "samples":
            assert all(s["label"] is None for s in m["samples"] if s["id"] in unlabelled)
            if m["stream"].startswith("explore"):
                assert not unlabelled & {s["id"] for s in m["samples"]}
        elif m["type"] == "feature" and m["stream"].startswith("explore"):
            assert not unlabelled & set(m["ids"])
    assert set(result.predictions) == unlabelled


def test_budget_caps_candidates_and_a_custom_policy_plugs_in():
    db = make_relational(n_targets=100, seed=1)

    class Fixed(Policy):
        def __init__(self):
            self.n = 0

        def propose(self):
            self.n += 1
            v = np.random.default_rng(self.n).normal(size=db.ids.size)
            return Candidate(definition=f"noise{self.n}", name=f"noise{self.n}", family="noise", facets=("kind=noise",),
                             values=v)

        def observe(self, candidate, feedback):
            return Decision(self.n <= 2, "first two", None)

    result = Loop(db, policy=Fixed(), budget=7, rebase_after=3).run()
    assert len(result.trials) == 7 and [c.name for c in result.accepted] == ["noise1", "noise2"]
    assert {t["stream"] for t in result.trials} == {"explore-0", "explore-1"}
    with pytest.raises(ValueError, match="budget must be at least 1"):
        Loop(db, budget=0)
    db.labels[:] = "1"
    with pytest.raises(ValueError, match="two classes"):
        Loop(db, budget=5)


def test_planted_signal_is_found():
    db = make_relational(n_targets=600, seed=7)
    result = run_loop(db, budget=40, seed=0)
    defs = [c.definition for c in result.accepted]
    assert any("item.price WHERE item.category = 'c'" in d or "item.price WHERE item.category = 'c'" in d
               for d in defs), defs


@needs_data
def test_near_misses_join_the_final_set_after_the_accepted_ones():
    # the same exploration; the final set also holds the rejected candidates of the largest positive gains in
    # units of sqrt(error), shadows aside
    db = mutagenesis()
    plain = run_loop(db, budget=40, seed=0, policy_options={"near_misses": 0})
    more = run_loop(db, budget=40, seed=0, policy_options={"near_misses": 2})
    assert [t["definition"] for t in more.trials] == [t["definition"] for t in plain.trials]
    misses = [t for t in plain.trials if not t["accepted"] and not t["shadow"] and (t["gain"] or 0.0) > 0]
    misses.sort(key=lambda t: -t["gain"] / np.sqrt(max(1.0 - t["feedback"]["oob_before"], 1e-4)))
    assert len(misses) >= 3
    plain_defs = {c.definition for c in plain.accepted}
    assert {c.definition for c in more.accepted} == plain_defs | {t["definition"] for t in misses[:2]}


def _cli(out: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "streamforest.cli", "relational", "run", *extra, "--out", str(out), "--seed", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=600)


@needs_data
@pytest.mark.slow
def test_cli_outputs_and_determinism_across_processes(tmp_path):
    db = mutagenesis()
    from streamforest.relational.schema import save_schema

    schema = save_schema(db, tmp_path / "tables")
    runs = []
    for k, seed in enumerate(("1", "2")):  # another hash seed: nothing may depend on set or dict order
        out = tmp_path / f"out{k}"
        res = _cli(out, "--schema", str(schema), "--budget", "30", env={"PYTHONHASHSEED": seed})
        assert res.returncode == 0, res.stderr
        assert "[  30/30]" in res.stderr and "accepted" in res.stderr
        runs.append(out)
    for name in ("features.csv", "predictions.csv", "candidates.jsonl"):
        assert (runs[0] / name).read_bytes() == (runs[1] / name).read_bytes(), name
    assert (runs[0] / "loop.png").stat().st_size > 1000
    with open(runs[0] / "features.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][:2] == ["id", "mutagenic"] and len(rows) == 189
    assert rows[0][2:6] == ["root.ind1", "root.inda", "root.logp", "root.lumo"] or len(rows[0]) > 2
    assert [r[1] for r in rows[1:]] == db.labels.tolist()
    with open(runs[0] / "predictions.csv", newline="") as fh:
        preds = list(csv.reader(fh))
    assert preds[0] == ["id", "proba_0", "proba_1"]
    assert [p[0] for p in preds[1:]] == db.ids[~db.labelled].tolist()
    assert all(abs(float(p[1]) + float(p[2]) - 1) < 1e-9 for p in preds[1:])
    trials = [json.loads(line) for line in (runs[0] / "candidates.jsonl").read_text().splitlines()]
    assert len(trials) == 30 and {"definition", "family", "feedback", "accepted", "why"} <= set(trials[0])


def test_cli_documents_and_errors(tmp_path):
    from streamforest.cli import main

    docs = tmp_path / "d.json"
    docs.write_text(json.dumps([{"y": i % 2, "kids": [{"v": i * 1.0}, {"v": -i}]} for i in range(40)]))
    assert main(["relational", "run", "--documents", str(docs), "--label", "y", "--budget", "5",
                 "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert (tmp_path / "o" / "features.csv").exists()
    assert main(["relational", "run", "--documents", str(docs), "--budget", "5", "--out", str(tmp_path / "o")]) == 1
    assert main(["relational", "run", "--documents", str(docs), "--label", "nope", "--out", str(tmp_path)]) == 1


@needs_data
def test_cli_near_misses_set_what_joins_the_accepted_features(tmp_path, capsys):
    from streamforest.cli import main
    from streamforest.relational.schema import save_schema

    schema = save_schema(mutagenesis(), tmp_path / "tables")
    columns = {}
    for k in (0, 2):
        out = tmp_path / f"o{k}"
        assert main(["relational", "run", "--schema", str(schema), "--budget", "25", "--out", str(out), "--quiet",
                     "--near-misses", str(k)]) == 0
        with open(out / "features.csv", newline="") as fh:
            columns[k] = next(csv.reader(fh))[2:]
        trials = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()]
        accepted = [t["name"] for t in trials if t["accepted"]]
        assert set(accepted) <= set(columns[k])
    # the same exploration; 2 more columns, rejected candidates
    assert columns[0] == [c for c in columns[2] if c in columns[0]] and len(columns[2]) == len(columns[0]) + 2
    assert main(["relational", "run", "--schema", str(schema), "--out", str(tmp_path / "bad"),
                 "--near-misses", "-1"]) == 1
    assert "--near-misses must be >= 0, got -1" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ValueError, match="near_misses must be an integer >= 0"):
        run_loop(mutagenesis(), budget=5, policy_options={"near_misses": 1.5})


def test_a_final_stream_that_cannot_start_says_why_at_once():
    client = EngineClient(InProcess(engine_config(0, final=True)), timeout=30)
    ids = [str(i) for i in range(20)]
    client.samples("final", ids, [1] * 20)  # one class only
    assert client.feature("final", "x", ids, np.arange(20.0), waiting_ok=True)["status"] == "waiting"
    with pytest.raises(ValueError, match="have the label 1"):
        client.start("final", waiting=True)
