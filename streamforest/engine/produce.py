"""Input messages from a dataset: one ``samples`` message (test rows unlabelled), then one ``feature`` per column.

What ``streamforest produce``, the demo, the Kafka producer and the scenarios send to the engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def _json_number(v: Any) -> Any:
    if isinstance(v, float):
        return None if np.isnan(v) else (int(v) if v.is_integer() else v)
    return v


def produce_messages(csv_path: Path, target: str, stream: str, seed: int = 0, test_fraction: float = 1 / 3,
                     order: str = "random", nominal: set[str] = frozenset(), chunk: int = 0):
    """The messages of a dataset: one ``samples`` message (test rows unlabelled), then one ``feature`` per column.

    ``csv_path`` is a CSV file or the name of a bundled dataset (:func:`streamforest.datasets.bundled_names`).
    Sample ids are the 0-based CSV row numbers, as strings. Returns the messages, the test row indices and the
    dataset.
    """
    from streamforest.datasets import bundled_dataset, bundled_names, load_csv, stratified_split

    csv_path = Path(csv_path)
    if not csv_path.exists():
        if str(csv_path) not in bundled_names():
            raise ValueError(f"no file {csv_path}, and no bundled dataset of that name "
                             f"(bundled: {', '.join(bundled_names())})")
        csv_path, bundled_nominal = bundled_dataset(str(csv_path))
        nominal = set(nominal) | bundled_nominal
    data = load_csv(csv_path, set(nominal), target=target)
    _, test = stratified_split(data.y, seed, test_fraction) if test_fraction > 0 else (
        np.arange(data.n), np.zeros(0, dtype=np.int64))
    is_test = np.zeros(data.n, dtype=bool)
    is_test[test] = True
    ids = [str(i) for i in range(data.n)]
    labels = [None if t else _json_number(v) for t, v in zip(is_test.tolist(), data.y.tolist(), strict=True)]
    msgs = [{"v": 1, "type": "samples", "stream": stream,
             "samples": [{"id": i, "label": lab} for i, lab in zip(ids, labels, strict=True)]}]
    names = list(data.columns)
    if order == "random":
        names = [names[j] for j in np.random.default_rng(seed).permutation(len(names))]
    step = chunk if chunk > 0 else data.n
    for name in names:
        values = [_json_number(v) for v in data.columns[name].tolist()]
        parts = max(1, -(-data.n // step))
        for p in range(parts):
            lo, hi = p * step, min(data.n, (p + 1) * step)
            msg = {"v": 1, "type": "feature", "stream": stream, "name": name, "ids": ids[lo:hi],
                   "values": values[lo:hi], "kind": data.kinds[name]}
            if parts > 1:
                msg.update(part=p, parts=parts)
            msgs.append(msg)
    return msgs, test, data
