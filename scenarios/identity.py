"""Fingerprints of what the library and the engine output for fixed seeds and data, to show a refactoring changed
nothing: predictions, reports, importances, encodings (paths and leaves, binary and weighted, hashed and exact,
deltas), kernels, saved models and engine records, on bundled datasets (classification with nominal columns and
missing values, multiclass, regression), through ``add_feature``, ``add_samples``, ``set_samples`` + ``refresh``
and ``fit``.

Run ``python -m scenarios.identity --record ref.json`` before a change and ``--check ref.json`` after it: every
fingerprint must be byte-identical (it prints the ones that differ). Fingerprints depend on the platform's floating
point (numpy, numba), so a reference is only meaningful on the machine that recorded it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from streamforest import FeatureStreamForest
from streamforest.datasets import bundled_dir, load_csv, read_manifest, stratified_split
from streamforest.kernels import forest_kernel


def _digest(obj: Any) -> str:
    h = hashlib.sha256()

    def feed(o: Any) -> None:
        if isinstance(o, np.ndarray):
            a = np.ascontiguousarray(o)
            if a.dtype == object:
                h.update(b"O" + repr(a.tolist()).encode())
            else:
                h.update(f"{a.dtype.str}{a.shape}".encode())
                h.update(a.tobytes())
        elif hasattr(o, "tocsr"):
            m = o.tocsr()
            m.sort_indices()
            h.update(f"csr{m.shape}".encode())
            for part in (m.indptr, m.indices, m.data):
                feed(np.asarray(part))
        elif isinstance(o, dict):
            for k in sorted(o, key=str):
                h.update(repr(k).encode())
                feed(o[k])
        elif isinstance(o, (list, tuple)):
            h.update(f"[{len(o)}".encode())
            for v in o:
                feed(v)
        else:
            h.update(repr(o).encode())

    feed(obj)
    return h.hexdigest()[:24]


def _names(f: FeatureStreamForest) -> list[str]:
    names = getattr(f, "feature_names_in_", None)
    if names is None:
        names = f.feature_names_
    return [str(n) for n in names]


def _importances(f: FeatureStreamForest) -> np.ndarray:
    imp = f.feature_importances_
    return np.asarray(list(imp.values()) if isinstance(imp, dict) else imp, dtype=np.float64)


def _report(r: Any) -> dict:
    d = r.to_dict()
    d.pop("seconds", None)
    return d


def _saved(f: FeatureStreamForest) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.npz"
        f.save(path)
        with np.load(path, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}
        g = FeatureStreamForest.load(path)
    out["__loaded_equal__"] = np.asarray(
        [_digest(_importances(g)) == _digest(_importances(f)), g.model_version_ == f.model_version_])
    return out


def _outputs(f: FeatureStreamForest, X: np.ndarray, ids: np.ndarray, out: dict[str, str], tag: str) -> None:
    """Everything observable about ``f`` on samples ``X``."""
    if f.task == "regression":
        out[f"{tag}/predict"] = _digest(f.predict(X))
    else:
        out[f"{tag}/proba"] = _digest(f.predict_proba(X))
    out[f"{tag}/importances"] = _digest(_importances(f))
    out[f"{tag}/names"] = _digest(_names(f))
    out[f"{tag}/generations"] = _digest(f.generations_)
    out[f"{tag}/n"] = _digest([f.n_trees_, f.n_samples_, f.n_features_in_, f.model_version_])
    for leaves in (False, True):
        for values in ("binary", "weighted"):
            for width in (2**10, None):
                key = f"{tag}/encode/{'leaves' if leaves else 'paths'}/{values}/{width}"
                out[key] = _digest(f.encode(X, n_components=width, values=values, leaves_only=leaves))
    out[f"{tag}/encode/default-width"] = _digest(f.encode(X[:20]))
    out[f"{tag}/encode/random"] = _digest(f.encode(X, n_components=2**12, missing="random", sample_ids=ids))
    out[f"{tag}/encode/split-signed"] = _digest(f.encode(X, n_components=2**12, missing="split", signed=True))
    for kind in ("rf", "lca", "proximity"):
        out[f"{tag}/kernel/{kind}"] = _digest(forest_kernel(f, X[:40], X[40:90], kind=kind))
    row = dict(zip(_names(f), X[0].tolist(), strict=True))
    out[f"{tag}/one-row"] = _digest(f.predict(row))
    out[f"{tag}/saved"] = _digest(_saved(f))


def _with_nominal_and_missing(data: Any, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], dict]:
    """The dataset's columns, two of them with missing values, and a nominal column of strings."""
    cols = {k: v.astype(object) if data.kinds[k] == "nominal" else v.copy() for k, v in data.columns.items()}
    kinds = dict(data.kinds)
    numeric = [k for k in cols if kinds[k] == "numeric"]
    for k in numeric[:2]:
        cols[k][rng.random(data.n) < 0.15] = np.nan
    src = cols[numeric[-1]]
    cuts = np.nanquantile(src, [0.2, 0.5, 0.8])
    cat = np.array([f"c{int(np.searchsorted(cuts, v))}" for v in src], dtype=object)
    cat[rng.random(data.n) < 0.05] = None
    cols["cat"] = cat
    kinds["cat"] = "nominal"
    return cols, kinds


def _bundled(name: str):
    row = {r["name"]: r for r in read_manifest(bundled_dir())}[name]
    nominal = {c for c in row["nominal_cols"].split(";") if c}
    return load_csv(bundled_dir() / row["file"], nominal, name)


def _stream_case(out: dict[str, str], tag: str, cols: dict, kinds: dict, y: np.ndarray, task: str, seed: int,
                 params: dict) -> None:
    rest, hold = stratified_split(y if task == "classification" else (y > np.median(y)).astype(int), seed, 0.25)
    train, more = rest[: len(rest) * 2 // 3], rest[len(rest) * 2 // 3:]
    names = list(cols)
    order = [names[j] for j in np.random.default_rng(seed).permutation(len(names))]
    matrix = lambda idx: np.column_stack([cols[k][idx] for k in order]).astype(object)  # noqa: E731
    f = FeatureStreamForest(task=task, random_state=seed, **params)
    reports = []
    for k, name in enumerate(order):
        reports.append(_report(f.add_feature(name, cols[name][train], y=y[train] if k == 0 else None,
                                             kind=kinds[name])))
        if k == 1:
            before, v = matrix(hold)[:, :2], f.model_version_
            enc0 = f.encode(before, n_components=2**12)
    out[f"{tag}/reports"] = _digest(reports)
    Xh = matrix(hold)
    ids = np.array([f"s{i}" for i in hold], dtype=object)
    if len(order) > 2 and f.model_version_ - v <= 16:
        delta = f.encode_delta(Xh, since=v, n_components=2**12)
        out[f"{tag}/delta"] = _digest(delta)
        out[f"{tag}/delta-applies"] = _digest(
            float(abs(enc0 + delta[:, :] - f.encode(Xh, n_components=2**12)).sum()))
    _outputs(f, Xh, ids, out, f"{tag}/stream")
    f.add_samples(matrix(more), y[more])
    _outputs(f, Xh, ids, out, f"{tag}/add_samples")
    window = np.concatenate([train[len(train) // 2:], more])
    f.set_samples(matrix(window), y[window])
    out[f"{tag}/refresh"] = _digest([_report(f.refresh()), _report(f.refresh())])
    _outputs(f, Xh, ids, out, f"{tag}/window")
    g = FeatureStreamForest(task=task, random_state=seed, **params)
    g.fit({k: cols[k][rest] for k in order}, y[rest], kinds=kinds)
    _outputs(g, Xh, ids, out, f"{tag}/fit")
    g.refresh()
    out[f"{tag}/fit-refresh"] = _digest(g.predict(Xh))


def library_fingerprints(quick: bool = False) -> dict[str, str]:
    out: dict[str, str] = {}
    seeds = (0,) if quick else (0, 7)
    ilpd = _bundled("ilpd")
    blood = _bundled("blood-transfusion-service-center")
    magic = _bundled("MagicTelescope")
    for seed in seeds:
        rng = np.random.default_rng(seed)
        cols, kinds = _with_nominal_and_missing(ilpd, rng)
        small = {"trees_per_generation": 8, "max_depth": 6}
        _stream_case(out, f"ilpd/{seed}", cols, kinds, ilpd.y, "classification", seed, small)
        # Budget and pruning at work (merging), capped subspaces (importance sampling, sqrt per split).
        _stream_case(out, f"ilpd-capped/{seed}", cols, kinds, ilpd.y, "classification", seed,
                     {"trees_per_generation": 6, "max_subspace": 3, "max_generations": 3, "prune_threshold": 0.05})
        _stream_case(out, f"ilpd-baseline/{seed}", cols, kinds, ilpd.y, "classification", seed,
                     {**small, "policy": "baseline", "split_features": 0.5, "feature_sampling": "importance"})
        # Multiclass: MagicTelescope's first column cut into three classes, on a subsample.
        sub = np.random.default_rng(seed).choice(magic.n, 1500, replace=False)
        mcols = {k: v[sub] for k, v in magic.columns.items() if k != next(iter(magic.columns))}
        first = magic.columns[next(iter(magic.columns))][sub]
        y3 = np.searchsorted(np.quantile(first, [1 / 3, 2 / 3]), first)
        _stream_case(out, f"magic3/{seed}", mcols, dict.fromkeys(mcols, "numeric"), y3, "classification", seed,
                     small)
        # Regression: blood transfusion's last feature from the others and the label.
        bcols = {k: v.astype(np.float64) for k, v in blood.columns.items()}
        target_name = list(bcols)[-1]
        yr = bcols.pop(target_name)
        bcols["label"] = blood.y.astype(np.float64)
        _stream_case(out, f"blood-reg/{seed}", bcols, dict.fromkeys(bcols, "numeric"), yr, "regression", seed,
                     {**small, "min_samples_leaf": 5})
        if not quick:
            _stream_case(out, f"ilpd-defaults/{seed}", cols, kinds, ilpd.y, "classification", seed, {})
    return out


def engine_fingerprints() -> dict[str, str]:
    from streamforest.engine.checkpoint import stream_arrays
    from streamforest.engine.core import Engine, EngineConfig
    from streamforest.engine.produce import produce_messages

    out: dict[str, str] = {}
    for encoding in ("leaves", "paths"):
        msgs, _, _ = produce_messages(Path("ilpd"), "target", "s", seed=3, chunk=200)
        config = EngineConfig(forest={"trees_per_generation": 6, "max_depth": 5, "random_state": 3},
                              encoding=encoding, encoding_values="weighted" if encoding == "paths" else "binary",
                              n_components=2**14)
        engine = Engine(config)
        records = []
        for m in msgs:
            for r in engine.process(orjson.dumps(m), "test"):
                r = dict(r)
                r.pop("seconds", None)
                records.append(r)
        # Late labels for a few test samples: training grows (add_samples).
        test_ids = [s["id"] for s in msgs[0]["samples"] if s["label"] is None][:30]
        for i, sid in enumerate(test_ids):
            for r in engine.process(orjson.dumps({"v": 1, "type": "label", "stream": "s", "id": sid,
                                                  "label": i % 2}), "test"):
                r = dict(r)
                r.pop("seconds", None)
                records.append(r)
        out[f"engine/{encoding}/records"] = _digest(orjson.dumps(records, option=orjson.OPT_SERIALIZE_NUMPY))
        out[f"engine/{encoding}/n"] = str(len(records))
        arrays, header = stream_arrays(engine.streams["s"])
        out[f"engine/{encoding}/checkpoint"] = _digest([arrays, json.dumps(header, sort_keys=True)])
    return out


def fingerprints(quick: bool = False) -> dict[str, str]:
    return {**library_fingerprints(quick), **engine_fingerprints()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--record", type=Path, help="write the fingerprints to this JSON file")
    group.add_argument("--check", type=Path, help="compare against fingerprints recorded earlier")
    p.add_argument("--quick", action="store_true", help="one seed, fewer cases")
    args = p.parse_args(argv)
    got = fingerprints(args.quick)
    if args.record:
        args.record.write_text(json.dumps(got, indent=1, sort_keys=True))
        print(f"{len(got)} fingerprints written to {args.record}")
        return 0
    want = json.loads(args.check.read_text())
    diff = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    for k in diff:
        print(f"DIFFERS {k}: {want.get(k)} -> {got.get(k)}")
    print(f"{len(got) - len([k for k in diff if k in got])}/{len(want)} fingerprints identical")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
