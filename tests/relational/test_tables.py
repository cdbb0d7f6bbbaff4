"""schema.json and nested documents -> tables: the mutagenesis converter, round trips, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streamforest.relational.documents import documents_to_tables, load_documents
from streamforest.relational.schema import load_schema, save_schema
from streamforest.relational.synthetic import make_relational

MUTAGENESIS = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "mutagenesis" / "data.json"
needs_data = pytest.mark.skipif(not MUTAGENESIS.exists(), reason="../shared/datasets/mutagenesis is not here")


@needs_data
def test_mutagenesis_converter():
    db = load_documents(MUTAGENESIS, "mutagenic")
    assert (db.target, sorted(db.tables)) == ("root", ["atoms", "bonds", "root"])
    assert [db.tables[t].n_rows for t in ("root", "atoms", "bonds")] == [188, 4893, 10486]
    assert sorted(db.tables["root"].columns) == ["ind1", "inda", "logp", "lumo"]
    assert (db.labels == "1").sum() == 125 and (db.labels == "0").sum() == 63
    atoms, bonds = db.tables["atoms"], db.tables["bonds"]
    assert atoms.columns["element"].categories == ("b", "c", "f", "h", "i", "n", "o")
    assert not atoms.columns["charge"].nominal
    # the bags keep their owners: per molecule atom counts and per atom bond counts add up
    assert np.bincount(atoms.links[0].index, minlength=188).sum() == 4893
    raw = json.loads(MUTAGENESIS.read_text())
    assert np.bincount(atoms.links[0].index, minlength=188).tolist() == [len(m["atoms"]) for m in raw]
    first_bonds = [len(a["bonds"]) for a in raw[0]["atoms"]]
    assert np.bincount(bonds.links[0].index)[: len(first_bonds)].tolist() == first_bonds
    assert bonds.columns["charge"].values[0] == raw[0]["atoms"][0]["bonds"][0]["charge"]


@needs_data
def test_documents_and_schema_give_the_same_tables(tmp_path):
    db = load_documents(MUTAGENESIS, "mutagenic")
    back = load_schema(save_schema(db, tmp_path))
    assert sorted(back.tables) == sorted(db.tables)
    assert back.ids.tolist() == db.ids.tolist() and back.labels.tolist() == db.labels.tolist()
    for name, t in db.tables.items():
        b = back.tables[name]
        assert b.n_rows == t.n_rows
        for c, col in t.columns.items():
            assert b.columns[c].categories == col.categories
            np.testing.assert_array_equal(b.columns[c].values, col.values)
        for lk, blk in zip(t.links, b.links, strict=True):
            np.testing.assert_array_equal(lk.index, blk.index)


def test_synthetic_with_time_round_trips(tmp_path):
    db = make_relational(n_targets=30, time=True, unlabelled=0.3, seed=0)
    back = load_schema(save_schema(db, tmp_path))
    np.testing.assert_array_equal(back.cutoff, db.cutoff)
    np.testing.assert_array_equal(back.tables["order"].time, db.tables["order"].time)
    assert back.labels.tolist() == db.labels.tolist()


def test_documents_bad_input():
    with pytest.raises(ValueError, match="non-empty JSON list"):
        documents_to_tables({"a": 1}, "y")
    with pytest.raises(ValueError, match="no document has the label field 'y'"):
        documents_to_tables([{"x": 1}], "y")
    with pytest.raises(ValueError, match=r"documents\[1\].bag\[0\]: a bag item must be an object or a scalar"):
        documents_to_tables([{"y": 1, "bag": []}, {"y": 0, "bag": [[1]]}], "y")
    with pytest.raises(ValueError, match=r"documents\[1\]: duplicate key 'a'"):
        documents_to_tables([{"y": 1, "k": "a"}, {"y": 0, "k": "a"}], "y", key="k")


def test_documents_scalars_lists_and_nested_objects():
    db = documents_to_tables([{"y": True, "m": {"a": 1, "b": "x"}, "tags": ["p", "q"]}, {"y": False, "tags": []}],
                             "y", name="doc")
    assert db.labels.tolist() == ["true", "false"]
    assert sorted(db.tables["doc"].columns) == ["m_a", "m_b"]
    assert db.tables["tags"].columns["value"].categories == ("p", "q")


def write(d: Path, schema: dict, **tables: str) -> Path:
    for name, text in tables.items():
        (d / f"{name}.csv").write_text(text)
    (d / "schema.json").write_text(json.dumps(schema))
    return d / "schema.json"


GOOD = {"target": {"table": "m", "label": "y", "cutoff": None},
        "tables": {"m": {"path": "m.csv", "key": "mid"},
                   "atom": {"path": "atom.csv", "key": "aid", "parents": [{"table": "m", "column": "mid"}]},
                   "bond": {"path": "bond.csv", "parents": [{"table": "atom", "column": "aid"}],
                            "nominal": ["t"]}}}
M = "mid,y,w\na,1,0.5\nb,0,\nc,,2\n"
ATOM = "aid,mid,el,q\nx1,a,c,0.1\nx2,a,o,-0.2\nx3,b,c,\n"
BOND = "aid,t\nx1,7\nx1,1\nx3,7\n"


def test_good_schema(tmp_path):
    db = load_schema(write(tmp_path, GOOD, m=M, atom=ATOM, bond=BOND))
    assert db.tables["bond"].columns["t"].categories == ("1", "7")
    assert db.tables["bond"].links[0].index.tolist() == [0, 0, 2]
    assert np.isnan(db.tables["atom"].columns["q"].values[2])
    assert db.labelled.tolist() == [True, True, False]
    assert "aid" not in db.tables["atom"].columns and "mid" not in db.tables["atom"].columns


def _bad(schema_edit=None, **tables):
    schema = json.loads(json.dumps(GOOD))
    if schema_edit:
        schema_edit(schema)
    return schema, {"m": M, "atom": ATOM, "bond": BOND, **tables}


BAD = [
    (_bad(lambda s: s["tables"]["atom"].update(parent=[])), r"table 'atom': unknown field 'parent'"),
    (_bad(lambda s: s["target"].update(table="molecule")), r"target: unknown table 'molecule'"),
    (_bad(lambda s: s["tables"]["bond"]["parents"][0].update(table="atoms")),
     r"table 'bond' parents\[0\]: unknown table 'atoms'"),
    (_bad(lambda s: s["tables"]["bond"]["parents"][0].update(column="atom_id")),
     r"table 'bond': parents column 'atom_id' is missing from bond.csv"),
    (_bad(lambda s: s["target"].update(label="label")), r"table 'm': label column 'label' is missing"),
    (_bad(lambda s: s.pop("tables")), r"missing field 'tables'"),
    (_bad(lambda s: s["tables"]["m"].pop("key")), r"table 'atom' parents\[0\]: table 'm' has no key"),
    (_bad(atom="aid,mid,el,q\nx1,a,c,0.1\nx1,a,o,-0.2\n"),
     r"table 'atom': duplicate key 'x1' in column 'aid', rows 1 and 2 \(lines 2 and 3\)"),
    (_bad(bond="aid,t\nx1,7\nx9,1\n"),
     r"table 'bond': column 'aid', row 2 \(line 3\): unknown parent key 'x9' \(not a key of table 'atom'\)"),
    (_bad(atom="aid,mid,el,q\nx1,a,c\n"), r"table 'atom': atom.csv line 2 has 3 cells, the header 4"),
    (_bad(atom="aid,mid,el,q\n,a,c,1\n"), r"table 'atom': key column 'aid' is empty in row 1"),
    (_bad(lambda s: s["tables"]["atom"].update(time="el")),
     r"table 'atom': time column 'el', row 1 \(line 2\): 'c' is neither a number nor an ISO date"),
    (_bad(lambda s: s["target"].update(cutoff="w"), m="mid,y,w\na,1,2020-01-01\nb,0,\nc,,x\n"),
     r"table 'm': cutoff column 'w', row 3 \(line 4\): 'x' is neither a number nor an ISO date"),
    (_bad(lambda s: (s["target"].update(cutoff="w"), s["tables"]["atom"].update(time="q")),
          atom="aid,mid,el,q\nx1,a,c,2020-01-01\nx2,a,o,2020-01-02T10:00:00\nx3,b,c,\n"),
     r"table 'atom': time column 'q' holds datetimes but the cutoff column 'w' of table 'm' holds numbers"),
    (_bad(atom="aid,mid,el,el\nx1,a,c,0.1\n"), r"table 'atom': atom.csv repeats columns \['el'\]"),
    (_bad(lambda s: s["tables"]["atom"].update(time="aid")),
     r"table 'atom': column 'aid' is named twice \(as key and as time\)"),
    (_bad(lambda s: s["tables"]["bond"].update(nominal=["t", "t"])),
     r"table 'bond': column 't' is named twice \(as nominal and as nominal\)"),
    (_bad(lambda s: s["target"].update(cutoff="y")),
     r"table 'm': column 'y' is named twice \(as label and as cutoff\)"),
]


@pytest.fixture(params=["arrow", "csv"])
def reader(request, monkeypatch):
    """Both CSV readers: pyarrow's (the default where installed) and the csv module's (the fallback)."""
    if request.param == "csv":
        from streamforest.relational import readers

        monkeypatch.setattr(readers, "arrow_modules", lambda: None)
    return request.param


@pytest.mark.parametrize(("case", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_bad_schemas_and_tables(tmp_path, case, message, reader):
    schema, tables = case
    path = write(tmp_path, schema, **tables)
    with pytest.raises(ValueError, match=message):
        load_schema(path)


TRICKY_M = 'mid,y,w,cut,grade\n a ,1, 0.5 ,2020-01-01T10:00:00.7,"hi, there"\nb,0,1_000,2020-01-02,\xe9t\xe9\n' \
           'c,,nan,,zebra\n"d\nx",1,,2019-12-31T23:59,"hi, there"\n'
TRICKY_ATOM = "aid,mid,el,q,at\n1,a ,c,inf,5\n2,a,o,-0.2,\n3,b,c,,7.5\n 4 ,\"d\nx\",10,1e3,1\n"


def test_both_csv_readers_give_the_same_database(tmp_path, monkeypatch):
    from streamforest.relational import readers

    from .test_parquet import assert_same

    rng = np.random.default_rng(0)
    n = 3000
    words = np.array(["x", "y", "\u00e9", "Z", "10", "9", "a b"])
    m = "mid,y,w,cut,grade\n" + "".join(f"m{i},{i % 2 if i % 7 else ''},{rng.normal():.6f},"
                                        f"2020-01-{1 + i % 28:02d}T{i % 24:02d}:00:00,{words[i % 7]}\n"
                                        for i in range(n))
    atom = "aid,mid,el,q,at\n" + "".join(f"{j},m{rng.integers(n)},{words[rng.integers(7)]},"
                                         f"{'' if j % 11 == 0 else rng.normal()},{rng.integers(100)}\n"
                                         for j in range(4 * n))
    spec = {"target": {"table": "m", "label": "y", "cutoff": "cut"},
            "tables": {"m": {"path": "m.csv", "key": "mid"},
                       "atom": {"path": "atom.csv", "key": "aid", "parents": [{"table": "m", "column": "mid"}],
                                "nominal": ["el"]}}}
    tricky = {**spec, "tables": {**spec["tables"], "atom": {**spec["tables"]["atom"], "nominal": []}}}
    (tmp_path / "big").mkdir()
    (tmp_path / "tricky").mkdir()
    cases = [write(tmp_path / "big", spec, m=m, atom=atom), write(tmp_path / "tricky", tricky, m=TRICKY_M,
                                                                  atom=TRICKY_ATOM)]
    for path in cases:
        for name in ("m", "atom"):  # Arrow reads these files: the comparison is not the fallback against itself
            assert readers.read_csv_arrow(path.parent / f"{name}.csv", name) is not None
        by_arrow = load_schema(path)
        with monkeypatch.context() as mp:
            mp.setattr(readers, "arrow_modules", lambda: None)
            by_csv = load_schema(path)
        assert_same(by_arrow, by_csv)
    tricky_db = load_schema(cases[1])
    assert tricky_db.ids.tolist() == ["a", "b", "c", "d\nx"]
    w = tricky_db.tables["m"].columns["w"]
    np.testing.assert_array_equal(w.values, [0.5, 1000.0, np.nan, np.nan])
    np.testing.assert_array_equal(tricky_db.cutoff, [1577872800, 1577923200, np.nan, 1577836740])
    assert tricky_db.tables["m"].columns["grade"].categories == ("hi, there", "zebra", "\u00e9t\u00e9")
    assert tricky_db.tables["atom"].links[0].index.tolist() == [0, 0, 1, 3]


def test_not_json(tmp_path):
    (tmp_path / "schema.json").write_text("{nope")
    with pytest.raises(ValueError, match=r"schema\.json: not valid JSON"):
        load_schema(tmp_path / "schema.json")
    with pytest.raises(ValueError, match="does not exist"):
        load_schema(write(tmp_path, GOOD, m=M, atom=ATOM))


def test_columns_limits_what_is_read(tmp_path, reader):
    schema = json.loads(json.dumps(GOOD))
    schema["tables"]["atom"]["columns"] = ["q"]
    db = load_schema(write(tmp_path, schema, m=M, atom="aid,mid,el,q,junk\nx1,a,c,0.1,\nx2,a,o,-0.2,\nx3,b,c,,z\n",
                           bond=BOND))
    assert list(db.tables["atom"].columns) == ["q"] and db.tables["atom"].n_rows == 3
    assert db.tables["bond"].links[0].index.tolist() == [0, 0, 2]
    assert list(db.tables["m"].columns) == ["w"]  # no columns list: every data column
    schema["tables"]["atom"]["columns"] = ["q", "zz"]
    with pytest.raises(ValueError, match=r"table 'atom': data column 'zz' is missing from atom.csv"):
        load_schema(write(tmp_path, schema, m=M, atom=ATOM, bond=BOND))
    schema["tables"]["atom"]["columns"] = ["q", "aid"]
    with pytest.raises(ValueError, match=r"table 'atom': column 'aid' is named twice \(as key and as columns\)"):
        load_schema(write(tmp_path, schema, m=M, atom=ATOM, bond=BOND))


def test_csv_read_in_blocks_gives_the_whole_files_tables(tmp_path, monkeypatch):
    """Blocks of about 20 rows: columns whose kind changes between blocks (numbers then text, text then numbers,
    empty blocks, numbers numpy alone parses, datetimes after empty cells) come out as the whole file's."""
    from streamforest.relational import readers

    from .test_parquet import assert_same

    n = 400
    rows = []
    for i in range(n):
        late = i >= 300
        rows.append(",".join([
            f"m{i}", "" if i % 5 == 0 else str(i % 2),
            f"{i / 7:.4f}" if not late else ("x" if i % 3 else f"{i}.5"),  # numbers, then some text
            "a" if i < 30 else str(i),  # text, then numbers
            "" if i < 200 else f"{i * 0.5}",  # empty blocks, then numbers
            f"{i}" if i != 350 else "1_000",  # a number only numpy reads, late
            "" if i < 100 else f"2020-02-{1 + i % 28:02d}T{i % 24:02d}:00:00",  # the cutoff: empty, then datetimes
            f"{(i * 37) % 11}",  # a declared nominal of integer text
        ]))
    m = "mid,y,w,v,e,u,cut,k\n" + "\n".join(rows) + "\n"
    atom = "mid,q,at\n" + "".join(f"m{(j * 13) % n},{'' if j % 9 == 0 else j / 3},"
                                  f"{'' if j < 150 else 2 * j}\n" for j in range(3 * n))
    spec = {"target": {"table": "m", "label": "y", "cutoff": "cut"},
            "tables": {"m": {"path": "m.csv", "key": "mid", "nominal": ["k"]},
                       "atom": {"path": "atom.csv", "parents": [{"table": "m", "column": "mid"}]}}}
    path = write(tmp_path, spec, m=m, atom=atom)
    tricky = tmp_path / "tricky"
    tricky.mkdir()
    tricky_path = write(tricky, {"target": {"table": "m", "label": "y", "cutoff": "cut"},
                                 "tables": {"m": {"path": "m.csv", "key": "mid"},
                                            "atom": {"path": "atom.csv", "key": "aid",
                                                     "parents": [{"table": "m", "column": "mid"}]}}},
                        m=TRICKY_M, atom=TRICKY_ATOM)
    whole = {p: load_schema(p) for p in (path, tricky_path)}
    monkeypatch.setattr(readers, "CSV_BLOCK_BYTES", 1024)
    raw = readers.read_csv_arrow(tmp_path / "m.csv", "m", roles={"cut": "time", "k": "text", "y": "text"})
    assert raw is not None and len(raw.cells["y"]._chunks) > 5  # the file was read in blocks
    kinds = {c: raw.cells[c]._kind for c in ("w", "v", "e", "u", "cut")}
    assert kinds == {"w": "whole", "v": "text", "e": "number", "u": "whole", "cut": "datetime"}
    for p, db in whole.items():
        blocks = load_schema(p)
        assert_same(blocks, db)
        with monkeypatch.context() as mp:
            mp.setattr(readers, "arrow_modules", lambda: None)
            assert_same(blocks, load_schema(p))
    db = whole[path]
    assert db.tables["m"].columns["w"].nominal and not db.tables["m"].columns["e"].nominal
    assert db.tables["m"].columns["v"].nominal and db.tables["m"].columns["u"].values[350] == 1000.0


def test_a_table_that_links_to_itself_subsets_and_loops(tmp_path):
    # an order's previous order: the link makes a cycle below the target; subsetting keeps the rows by the parents
    # kept so far rather than waiting for the table itself
    rng = np.random.default_rng(0)
    (tmp_path / "c.csv").write_text("cid,y\n" + "".join(f"c{i},{i % 2}\n" for i in range(60)))
    rows = [f"o{k},c{k % 60},{f'o{k - 60}' if k >= 60 else ''},{rng.normal() + (k % 60) % 2}\n" for k in range(180)]
    (tmp_path / "o.csv").write_text("oid,cid,prev,amount\n" + "".join(rows))
    (tmp_path / "schema.json").write_text(json.dumps({
        "target": {"table": "c", "label": "y"},
        "tables": {"c": {"path": "c.csv", "key": "cid"},
                   "o": {"path": "o.csv", "key": "oid", "parents": [{"table": "c", "column": "cid"},
                                                                     {"table": "o", "column": "prev"}]}}}))
    db = load_schema(tmp_path / "schema.json")
    sub = db.subset(np.array([3, 1]))
    orders = sub.tables["o"]
    assert orders.n_rows == 6
    assert orders.link("cid").index.tolist() == [1, 0, 1, 0, 1, 0]
    assert orders.link("prev").index.tolist() == [-1, -1, 0, 1, 2, 3]
    from streamforest.relational.loop import run_loop

    result = run_loop(db, budget=5, seed=0, explore_rows=40)  # the exploration runs on a subset
    assert len(result.trials) == 5
