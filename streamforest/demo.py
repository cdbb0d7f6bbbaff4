"""``streamforest demo``: a bundled dataset through produce -> run (embedded runtime), challenger vs baseline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from streamforest.compilation import COMPILE_NOTICE, kernels_compiled
from streamforest.datasets import bundled_dataset

BAD_LINES = [
    b'{"v": 1, "type": "feature", "stream": "demo", "name": "broken"',  # truncated JSON
    b'{"v": 1, "type": "teleport", "stream": "demo"}',  # unknown message type
    b'{"v": 1, "type": "feature", "stream": "demo", "name": "x", "ids": ["0", "1"], "values": [1.0]}',
]


def _read(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _test_auc(records: list[dict], y: np.ndarray, test: np.ndarray, classes: list[str]) -> dict[int, float]:
    """Test AUC of the published predictions, per model version."""
    from streamforest.metrics import roc_auc

    by_version: dict[int, dict[str, float]] = {}
    for r in records:
        by_version.setdefault(r["model_version"], {})[r["id"]] = r["proba"][classes[-1]]
    out = {}
    for v, preds in by_version.items():
        ids = [str(i) for i in test]
        if all(i in preds for i in ids):
            out[v] = roc_auc(y[test] == y.max(), np.array([preds[i] for i in ids]))
    return out


def demo(out: Path, dataset: str = "diabetes", seed: int = 0) -> int:
    from streamforest.engine.core import EngineConfig
    from streamforest.engine.produce import produce_messages
    from streamforest.engine.runtime import OUTPUT_FILES, run

    try:
        path, nominal = bundled_dataset(dataset)
    except ValueError as exc:
        print(f"streamforest demo: {exc}")
        return 1
    msgs, test, data = produce_messages(path, "target", "demo", seed=seed, nominal=nominal)
    out.mkdir(parents=True, exist_ok=True)
    if kernels_compiled() is False:
        print(COMPILE_NOTICE, flush=True)
    lines = [orjson.dumps(m) for m in msgs]
    # A few bad messages mixed in: each becomes one dead letter in errors.jsonl, and nothing else is lost.
    lines = lines[:2] + BAD_LINES + lines[2:]
    (out / "input.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    print(f"{dataset}: {data.n} samples ({len(test)} unlabelled test rows), {data.d} features arriving one by one\n")

    results = {}
    for policy in ("challenger", "baseline"):
        target = out / policy
        for f in target.glob("*.jsonl"):
            f.unlink()
        config = EngineConfig(forest={"policy": policy, "random_state": seed},
                              encoding="paths" if policy == "challenger" else "none")
        run(str(out / "input.jsonl"), str(target), config)
        feedback = [r for r in _read(target / OUTPUT_FILES["feedback"]) if r.get("status") == "grown"]
        preds = _read(target / OUTPUT_FILES["prediction"])
        classes = sorted(next(iter(preds))["proba"]) if preds else ["1"]
        results[policy] = (feedback, _test_auc(preds, data.y, test, classes))

    feedback, test_auc = results["challenger"]
    print(f"{'feature':<28} {'generation':>10} {'weight share':>13} {'OOB AUC before -> after':>26} {'test AUC':>9}")
    for r in feedback:
        before = "-" if r["oob_before"] is None else f"{r['oob_before']:.4f}"
        after = "-" if r["oob_after"] is None else f"{r['oob_after']:.4f}"
        auc = test_auc.get(r["model_version"])
        print(f"{r['feature']:<28} {r['generation']:>10} {r['weight_share']:>13.3f} {before:>12} -> {after:<10}"
              f" {'' if auc is None else f'{auc:.4f}':>9}")
    errors = _read(out / "challenger" / OUTPUT_FILES["error"])
    print(f"\n{len(errors)} bad input lines went to {OUTPUT_FILES['error']}:")
    for e in errors:
        print(f"  {e['source']}: {e['reason']}")
    final_c = test_auc[max(test_auc)]
    final_b = results["baseline"][1][max(results["baseline"][1])]
    print(f"\nfinal test AUC: challenger {final_c:.4f} vs baseline (uniform sampling, equal weights) {final_b:.4f}")
    plot = _plot(results, out / "score_per_feature.png")
    print(f"outputs in {out}/challenger and {out}/baseline" + (f"; plot {plot}" if plot else ""))
    return 0


def _plot(results: dict, path: Path) -> Path | None:
    """Write the plot; the path written, or None (and why) when matplotlib is not installed."""
    from streamforest.optional import require

    path.unlink(missing_ok=True)  # an earlier run's plot would pass for this one's
    try:
        matplotlib = require("matplotlib", "the demo's plot")
    except ModuleNotFoundError as exc:
        print(f"no plot: {exc}")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for policy, (feedback, test_auc) in results.items():
        k = np.arange(1, len(feedback) + 1)
        ax.plot(k, [test_auc.get(r["model_version"], np.nan) for r in feedback], marker="o",
                label=f"{policy}: test AUC")
        ax.plot(k, [np.nan if r["oob_after"] is None else r["oob_after"] for r in feedback], ls="--",
                label=f"{policy}: out-of-bag AUC")
    ax.set_xlabel("features arrived")
    ax.set_ylabel("AUC")
    ax.set_title("Score per arriving feature")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
