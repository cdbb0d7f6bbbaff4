"""featuretools' Deep Feature Synthesis on Mutagenesis: the peer of ``scenarios.benchmarks.relational``.

Runs in featuretools' own environment (featuretools 1.31 needs ``pandas<3``; it is not a dependency of this
project), standalone: only json, pandas and featuretools. Default primitives, ``max_depth=2``, no labels used (DFS
is unsupervised). Writes the feature matrix as CSV (molecule id, label, then the features) and prints one JSON
line: the number of features and the seconds (wall and CPU) DFS took.

    /work/wt/ft-venv/bin/python scenarios/benchmarks/relational_featuretools.py data.json out.csv
"""

import json
import sys
import time

import featuretools as ft
import pandas as pd


def _numeric(c: pd.Series) -> pd.Series:
    """Numbers stay numbers; a category (MODE of a nominal column) becomes its code, missing = NaN."""
    as_num = pd.to_numeric(c.astype(object), errors="coerce")
    if as_num.notna().sum() == c.notna().sum():
        return as_num.astype(float)
    codes = c.astype("category").cat.codes.astype(float)
    return codes.where(codes >= 0)


def main(data_path: str, out_path: str) -> None:
    docs = json.load(open(data_path))
    mols, atoms, bonds = [], [], []
    for i, m in enumerate(docs):
        mols.append({"molecule_id": i, **{k: v for k, v in m.items() if k not in ("atoms", "mutagenic")}})
        for a in m["atoms"]:
            aid = len(atoms)
            atoms.append({"atom_id": aid, "molecule_id": i, **{k: v for k, v in a.items() if k != "bonds"}})
            for b in a["bonds"]:
                bonds.append({"bond_id": len(bonds), "atom_id": aid, **b})
    start, cpu0 = time.perf_counter(), time.process_time()
    es = ft.EntitySet("mutagenesis")
    es.add_dataframe(dataframe_name="molecule", dataframe=pd.DataFrame(mols), index="molecule_id")
    es.add_dataframe(dataframe_name="atom", dataframe=pd.DataFrame(atoms), index="atom_id",
                     logical_types={"element": "Categorical", "atom_type": "Categorical"})
    es.add_dataframe(dataframe_name="bond", dataframe=pd.DataFrame(bonds), index="bond_id",
                     logical_types={"element": "Categorical", "atom_type": "Categorical", "bond_type": "Categorical"})
    es.add_relationship("molecule", "molecule_id", "atom", "molecule_id")
    es.add_relationship("atom", "atom_id", "bond", "atom_id")
    fm, defs = ft.dfs(entityset=es, target_dataframe_name="molecule", max_depth=2)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu0
    fm = fm.sort_index()
    numeric = fm.apply(_numeric)
    numeric.insert(0, "mutagenic", [d["mutagenic"] for d in docs])
    numeric.to_csv(out_path, index=True)
    print(json.dumps({"features": len(defs), "seconds": seconds, "cpu_seconds": cpu_seconds,
                      "featuretools": ft.__version__}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
