"""featuretools' Deep Feature Synthesis on the scale benchmark's synthetic data: the peer of
``scenarios.benchmarks.relational_scale``.

Runs in featuretools' own environment, standalone (numpy, pandas, featuretools). Reads the tables from an ``.npz``
written by the scale benchmark (customer -> order -> item, integer parent indices, nominal columns as codes; no
pickle), runs DFS with default primitives, ``max_depth=2`` and ``max_features`` = the loop's budget, and prints one
JSON line: features, seconds (the entity set and DFS), peak RSS.

    /work/wt/ft-venv/bin/python scenarios/benchmarks/relational_featuretools_scale.py tables.npz 200
"""

import json
import resource
import sys
import time

import featuretools as ft
import numpy as np
import pandas as pd


def main(path: str, n_features: int) -> None:
    z = np.load(path, allow_pickle=False)
    start = time.perf_counter()
    customer = pd.DataFrame({"customer_id": np.arange(z["age"].size), "age": z["age"], "region": z["region"]})
    order = pd.DataFrame({"order_id": np.arange(z["amount"].size), "customer_id": z["order_customer"],
                          "amount": z["amount"], "channel": z["channel"]})
    item = pd.DataFrame({"item_id": np.arange(z["price"].size), "order_id": z["item_order"], "price": z["price"],
                         "category": z["category"], "quantity": z["quantity"]})
    es = ft.EntitySet("synthetic")
    es.add_dataframe(dataframe_name="customer", dataframe=customer, index="customer_id",
                     logical_types={"region": "Categorical"})
    es.add_dataframe(dataframe_name="order", dataframe=order, index="order_id",
                     logical_types={"channel": "Categorical"})
    es.add_dataframe(dataframe_name="item", dataframe=item, index="item_id",
                     logical_types={"category": "Categorical"})
    es.add_relationship("customer", "customer_id", "order", "customer_id")
    es.add_relationship("order", "order_id", "item", "order_id")
    fm, defs = ft.dfs(entityset=es, target_dataframe_name="customer", max_depth=2, max_features=n_features)
    seconds = time.perf_counter() - start
    print(json.dumps({"features": len(defs), "rows": int(fm.shape[0]), "seconds": seconds,
                      "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "featuretools": ft.__version__}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
