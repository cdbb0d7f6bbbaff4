"""Parquet tables in schema.json: the same database as the CSV of the same data, the same loop run, clear errors."""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from streamforest.relational.schema import load_schema, save_schema
from streamforest.relational.tables import Database

from .test_loop import MUTAGENESIS, needs_data
from .test_tables import GOOD, M


@pytest.fixture
def pa() -> ModuleType:
    import pyarrow  # in the dev extra: a machine without it fails here rather than skipping

    return pyarrow


def assert_same(a: Database, b: Database) -> None:
    """Every part of two databases equal: columns in the same order, types, values, categories, links, times."""
    assert (a.target, a.label, a.key) == (b.target, b.label, b.key)
    assert a.ids.tolist() == b.ids.tolist() and a.labels.tolist() == b.labels.tolist()
    assert (a.cutoff is None) == (b.cutoff is None)
    if a.cutoff is not None:
        np.testing.assert_array_equal(a.cutoff, b.cutoff)
    assert list(a.tables) == list(b.tables)
    for name, t in a.tables.items():
        u = b.tables[name]
        assert (t.n_rows, t.time_column) == (u.n_rows, u.time_column), name
        assert list(t.columns) == list(u.columns), name
        for c, col in t.columns.items():
            other = u.columns[c]
            assert col.categories == other.categories, (name, c)
            assert col.values.dtype == other.values.dtype, (name, c)
            np.testing.assert_array_equal(col.values, other.values, err_msg=f"{name}.{c}")
        assert [(lk.column, lk.parent) for lk in t.links] == [(lk.column, lk.parent) for lk in u.links], name
        for lk, other in zip(t.links, u.links, strict=True):
            np.testing.assert_array_equal(lk.index, other.index, err_msg=f"{name}.{lk.column}")
        assert (t.time is None) == (u.time is None), name
        if t.time is not None:
            np.testing.assert_array_equal(t.time, u.time, err_msg=f"{name} time")


def as_parquet(pa: ModuleType, schema: Path, out: Path, tables: set[str] | None = None,
               dictionary: tuple[str, ...] = ()) -> Path:
    """A copy of a CSV schema with its tables (or some) converted to Parquet, the columns typed by pyarrow's reader.

    The tables named in ``dictionary`` get their text columns dictionary-encoded.
    """
    from pyarrow import csv as pcsv
    from pyarrow import parquet as pq

    spec = json.loads(schema.read_text())
    out.mkdir(parents=True, exist_ok=True)
    for name, t in spec["tables"].items():
        src = schema.parent / t["path"]
        if tables is not None and name not in tables:
            (out / t["path"]).write_bytes(src.read_bytes())
            continue
        data = pcsv.read_csv(src, convert_options=pcsv.ConvertOptions(auto_dict_encode=name in dictionary,
                                                                         strings_can_be_null=True))
        pq.write_table(data, out / f"{name}.parquet")
        t["path"] = f"{name}.parquet"
    (out / "schema.json").write_text(json.dumps(spec))
    return out / "schema.json"


def run_cli(schema: Path, out: Path) -> None:
    from streamforest.cli import main

    assert main(["relational", "run", "--schema", str(schema), "--budget", "10", "--out", str(out), "--seed", "2",
                 "--transport", "inprocess", "--quiet"]) == 0


# ----------------------------------------------------------------------------- Mutagenesis


@needs_data
def test_mutagenesis_as_parquet_is_the_csv_database_and_run(pa, tmp_path):
    from streamforest.relational.documents import load_documents

    db = load_documents(MUTAGENESIS, "mutagenic")
    db.labels[::5] = ""  # unlabelled rows: null labels in the Parquet file
    csv_schema = save_schema(db, tmp_path / "csv")
    pq_schema = as_parquet(pa, csv_schema, tmp_path / "pq", dictionary=("atoms",))
    import pyarrow.parquet as pq

    # what the comparison rests on: integer keys and labels with nulls, dictionary-encoded text, float columns
    atoms, root = pq.read_schema(tmp_path / "pq" / "atoms.parquet"), pq.read_schema(tmp_path / "pq" / "root.parquet")
    assert pa.types.is_integer(atoms.field("atoms_row").type) and pa.types.is_integer(atoms.field("root_row").type)
    assert pa.types.is_dictionary(atoms.field("element").type)
    assert pa.types.is_floating(atoms.field("charge").type)
    assert pa.types.is_integer(root.field("id").type) and pa.types.is_integer(root.field("mutagenic").type)
    assert pq.read_table(tmp_path / "pq" / "root.parquet").column("mutagenic").null_count == 38

    from_csv, from_pq = load_schema(csv_schema), load_schema(pq_schema)
    assert_same(from_csv, from_pq)
    assert from_pq.tables["atoms"].columns["element"].categories == ("b", "c", "f", "h", "i", "n", "o")
    assert (from_pq.labels == "").sum() == 38 and from_pq.ids[:3].tolist() == ["0", "1", "2"]
    np.testing.assert_array_equal(from_pq.tables["bonds"].links[0].index, db.tables["bonds"].links[0].index)

    run_cli(csv_schema, tmp_path / "out_csv")
    run_cli(pq_schema, tmp_path / "out_pq")
    for name in ("candidates.jsonl", "features.csv", "predictions.csv"):
        assert (tmp_path / "out_csv" / name).read_bytes() == (tmp_path / "out_pq" / name).read_bytes(), name
    assert len((tmp_path / "out_pq" / "candidates.jsonl").read_text().splitlines()) == 10


# ----------------------------------------------------------------------------- types against their CSV text

M_CSV = """mid,y,w,grade,flag,cut
a,1,0.5,hi,true,2020-01-02
b,0,,lo,false,2020-01-03
c,,2,,,
"""
EVENT_CSV = """eid,mid,at,code,v,note
1,a,2020-01-01T12:00:00,7,1.5,x
2,a,2020-01-02T12:00:30,1,,y
3,b,,7,-2,
4,,2019-12-31,,3,x
"""
SCHEMA = {"target": {"table": "m", "label": "y", "cutoff": "cut"},
          "tables": {"m": {"path": "m.csv", "key": "mid"},
                     "event": {"path": "event.csv", "key": "eid", "parents": [{"table": "m", "column": "mid"}],
                               "time": "at", "nominal": ["code"]}}}


def write_schema(d: Path, schema: dict, **tables: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in tables.items():
        (d / f"{name}.csv").write_text(text)
    (d / "schema.json").write_text(json.dumps(schema))
    return d / "schema.json"


def typed_tables(pa: ModuleType) -> dict:
    """M_CSV and EVENT_CSV as typed Arrow tables: nulls, dictionary text, booleans, dates, zoned timestamps."""
    t0 = int(np.datetime64("2020-01-01T12:00:00", "ms").astype(np.int64))
    m = pa.table({
        "mid": pa.array(["a", "b", "c"]),
        "y": pa.array([1, 0, None], pa.int64()),
        "w": pa.array([0.5, None, 2.0]),
        "grade": pa.array([" hi", "lo", None]).dictionary_encode(),  # surrounding blanks go, as in CSV cells
        "flag": pa.array([True, False, None]),
        "cut": pa.array([datetime.date(2020, 1, 2), datetime.date(2020, 1, 3), None], pa.date32()),
    })
    event = pa.table({
        "eid": pa.array([1, 2, 3, 4], pa.int32()),
        "mid": pa.array(["a", "a", "b", None]).dictionary_encode(),
        # milliseconds in UTC: 30.25 s past the minute floors to 30 s, as numpy does with ISO text
        "at": pa.array([t0, t0 + 86_430_250, None, t0 - 86_400_000 - 43_200_000], pa.timestamp("ms", tz="UTC")),
        "code": pa.array([7, 1, 7, None], pa.int16()),
        "v": pa.array([1.5, float("nan"), -2.0, 3.0]),  # a NaN value, not a null: missing as well
        "note": pa.array(["x", "y", "", "x"], pa.large_string()),  # an empty string is missing, as an empty cell
    })
    return {"m": m, "event": event}


def write_parquet(pa: ModuleType, d: Path, schema: dict, **tables) -> Path:
    import pyarrow.parquet as pq

    d.mkdir(parents=True, exist_ok=True)
    spec = json.loads(json.dumps(schema))
    for name, table in tables.items():
        if isinstance(table, str):
            (d / f"{name}.csv").write_text(table)
            continue
        pq.write_table(table, d / f"{name}.parquet")
        spec["tables"][name]["path"] = f"{name}.parquet"
    (d / "schema.json").write_text(json.dumps(spec))
    return d / "schema.json"


def test_typed_columns_read_as_their_csv_text(pa, tmp_path):
    tables = typed_tables(pa)
    assert pa.types.is_dictionary(tables["m"].schema.field("grade").type)
    from_csv = load_schema(write_schema(tmp_path / "csv", SCHEMA, m=M_CSV, event=EVENT_CSV))
    from_pq = load_schema(write_parquet(pa, tmp_path / "pq", SCHEMA, **tables))
    assert_same(from_csv, from_pq)
    # and what both are, so that two equally wrong readers cannot pass
    m, event = from_pq.tables["m"], from_pq.tables["event"]
    assert from_pq.labels.tolist() == ["1", "0", ""] and from_pq.ids.tolist() == ["a", "b", "c"]
    assert (m.columns["grade"].categories, m.columns["grade"].values.tolist()) == (("hi", "lo"), [0, 1, -1])
    assert (m.columns["flag"].categories, m.columns["flag"].values.tolist()) == (("false", "true"), [1, 0, -1])
    np.testing.assert_array_equal(m.columns["w"].values, [0.5, np.nan, 2.0])
    day = 86_400
    np.testing.assert_array_equal(from_pq.cutoff, [18_263 * day, 18_264 * day, np.nan])
    np.testing.assert_array_equal(event.time, [18_262 * day + 43_200, 18_263 * day + 43_230, np.nan, 18_261 * day])
    assert (event.columns["code"].categories, event.columns["code"].values.tolist()) == (("1", "7"), [1, 0, 1, -1])
    np.testing.assert_array_equal(event.columns["v"].values, [1.5, np.nan, -2.0, 3.0])
    assert event.columns["note"].values.tolist() == [0, 1, -1, 0]
    assert event.links[0].index.tolist() == [0, 0, 1, -1]
    assert list(event.columns) == ["code", "v", "note"]


def test_chunked_dictionary_columns_with_different_dictionaries(pa, tmp_path):
    import pyarrow.parquet as pq

    # row groups written separately: each chunk has its own dictionary, in another order
    schema = pa.schema([("mid", pa.string()), ("y", pa.int64()), ("grade", pa.dictionary(pa.int32(), pa.string()))])
    d = tmp_path / "pq"
    d.mkdir()
    with pq.ParquetWriter(d / "m.parquet", schema) as w:
        w.write_table(pa.table({"mid": ["a", "b"], "y": [1, 0], "grade": pa.array(["lo", "hi"]).dictionary_encode()},
                               schema=schema))
        w.write_table(pa.table({"mid": ["c"], "y": [1], "grade": pa.array(["mid"]).dictionary_encode()},
                               schema=schema))
    (d / "schema.json").write_text(json.dumps({"target": {"table": "m", "label": "y"},
                                               "tables": {"m": {"path": "m.parquet", "key": "mid"}}}))
    grade = load_schema(d / "schema.json").tables["m"].columns["grade"]
    assert (grade.categories, grade.values.tolist()) == (("hi", "lo", "mid"), [1, 0, 2])


# ----------------------------------------------------------------------------- CSV and Parquet in one schema

ATOM = "aid,mid,el,q\n10,a,c,0.1\n11,a,o,-0.2\n12,b,c,\n"
BOND = "aid,t\n10,7\n10,1\n12,7\n,7\n"


def atom_table(pa: ModuleType, key_type=None):
    key_type = key_type or pa.int64()
    return pa.table({"aid": pa.array([10, 11, 12], key_type), "mid": ["a", "a", "b"], "el": ["c", "o", "c"],
                     "q": pa.array([0.1, -0.2, None])})


def test_mixed_csv_and_parquet_tables(pa, tmp_path):
    from_csv = load_schema(write_schema(tmp_path / "csv", GOOD, m=M, atom=ATOM, bond=BOND))
    assert from_csv.tables["bond"].links[0].index.tolist() == [0, 0, 2, -1]
    # a Parquet table between two CSV ones: its integer keys are the CSV child's key text
    mixed = write_parquet(pa, tmp_path / "mixed", GOOD, m=M, atom=atom_table(pa), bond=BOND)
    assert_same(from_csv, load_schema(mixed))
    # a Parquet child of a Parquet parent, under a CSV target; pandas' float foreign key with a null (10.0 = 10)
    bond = pa.table({"aid": pa.array([10.0, 10.0, 12.0, None]), "t": pa.array([7, 1, 7, 7], pa.uint8())})
    both = write_parquet(pa, tmp_path / "both", GOOD, m=M, atom=atom_table(pa, pa.uint16()), bond=bond)
    assert_same(from_csv, load_schema(both))


# ----------------------------------------------------------------------------- errors

def test_errors_name_the_table(pa, tmp_path):
    import pyarrow.parquet as pq

    cases = iter(range(100))

    def load(**edits):
        tables = {"m": M, "atom": atom_table(pa), "bond": BOND, **edits}
        return load_schema(write_parquet(pa, tmp_path / f"case{next(cases)}", GOOD, **tables))

    with pytest.raises(ValueError, match=r"table 'atom': parents column 'mid' is missing from atom\.parquet "
                                         r"\(columns: \['aid', 'el', 'q'\]\)"):
        load(atom=atom_table(pa).drop_columns(["mid"]))
    schema = write_parquet(pa, tmp_path / "corrupt", GOOD, m=M, atom=atom_table(pa), bond=BOND)
    (tmp_path / "corrupt" / "atom.parquet").write_bytes(b"PAR1 this is not a parquet file")
    with pytest.raises(ValueError, match=r"table 'atom': cannot read atom\.parquet as Parquet"):
        load_schema(schema)
    schema = write_parquet(pa, tmp_path / "cut", GOOD, m=M, atom=atom_table(pa), bond=BOND)
    whole = (tmp_path / "cut" / "atom.parquet").read_bytes()
    (tmp_path / "cut" / "atom.parquet").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"table 'atom': cannot read atom\.parquet as Parquet"):
        load_schema(schema)
    schema = write_parquet(pa, tmp_path / "gone", GOOD, m=M, atom=atom_table(pa), bond=BOND)
    (tmp_path / "gone" / "atom.parquet").unlink()
    with pytest.raises(ValueError, match=r"table 'atom': file .*atom\.parquet does not exist"):
        load_schema(schema)
    with pytest.raises(ValueError, match=r"table 'atom': column 'tags' of atom\.parquet has type list<"):
        load(atom=atom_table(pa).append_column("tags", pa.array([["x"], [], None])))
    # a column the schema's data columns leave out is never read
    spec = json.loads(json.dumps(GOOD))
    spec["tables"]["atom"]["columns"] = ["el"]
    db = load_schema(write_parquet(pa, tmp_path / "columns", spec, m=M, bond=BOND,
                                   atom=atom_table(pa).append_column("tags", pa.array([["x"], [], None]))))
    assert list(db.tables["atom"].columns) == ["el"]
    # row errors: rows, no CSV lines
    with pytest.raises(ValueError, match=r"table 'atom': duplicate key '10' in column 'aid', rows 1 and 3$"):
        load(atom=atom_table(pa).set_column(0, "aid", pa.array([10, 11, 10])))
    with pytest.raises(ValueError, match=r"table 'atom': key column 'aid' is empty in row 2$"):
        load(atom=atom_table(pa).set_column(0, "aid", pa.array([10, None, 12])))
    bond = pa.table({"aid": [10, 99], "t": [7, 1]})
    with pytest.raises(ValueError, match=r"table 'bond': column 'aid', row 2: unknown parent key '99' "
                                         r"\(not a key of table 'atom'\)"):
        load(bond=bond)
    with pytest.raises(ValueError, match=r"table 'atom': time column 'el', row 1: 'c' is neither a number"):
        load_schema(write_parquet(pa, tmp_path / "time", {**GOOD, "tables": {
            **GOOD["tables"], "atom": {**GOOD["tables"]["atom"], "time": "el"}}}, m=M, atom=atom_table(pa), bond=BOND))
    pq.write_table(atom_table(pa), tmp_path / "x.pq")  # the short suffix is Parquet as well
    spec = {"target": {"table": "atom", "label": "q"}, "tables": {"atom": {"path": "x.pq", "key": "aid"}}}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    assert load_schema(tmp_path / "s.json").ids.tolist() == ["10", "11", "12"]


def test_a_failed_load_leaves_no_output(pa, tmp_path, capsys):
    from streamforest.cli import main

    schema = write_parquet(pa, tmp_path / "t", GOOD, m=M, atom=atom_table(pa), bond=BOND)
    (tmp_path / "t" / "atom.parquet").write_bytes(b"garbage")
    assert main(["relational", "run", "--schema", str(schema), "--budget", "3", "--out", str(tmp_path / "o"),
                 "--quiet"]) == 1
    assert "table 'atom': cannot read atom.parquet" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_first_repeated_key_in_row_order_is_named_for_both_formats(pa, tmp_path):
    atom = "aid,mid,el,q\nk2,a,c,1\nk1,a,c,1\nk2,b,c,1\nk1,b,c,1\n"  # sorted, k1 repeats first; by rows, k2 does
    with pytest.raises(ValueError, match=r"duplicate key 'k2' in column 'aid', rows 1 and 3 \(lines 2 and 4\)"):
        load_schema(write_schema(tmp_path / "csv", GOOD, m=M, atom=atom, bond="aid,t\n"))
    table = pa.table({"aid": ["k2", "k1", "k2", "k1"], "mid": ["a", "a", "b", "b"]})
    with pytest.raises(ValueError, match=r"duplicate key 'k2' in column 'aid', rows 1 and 3$"):
        load_schema(write_parquet(pa, tmp_path / "pq", GOOD, m=M, atom=table, bond="aid,t\n"))


def test_without_pyarrow_csv_loads_and_parquet_names_the_extra(monkeypatch, tmp_path):
    csv_only = write_schema(tmp_path / "csv", GOOD, m=M, atom=ATOM, bond=BOND)
    spec = json.loads(json.dumps(GOOD))
    spec["tables"]["atom"]["path"] = "atom.parquet"
    (tmp_path / "csv" / "atom.parquet").write_bytes(b"never read")
    (tmp_path / "csv" / "pq.json").write_text(json.dumps(spec))
    for name in list(sys.modules):
        if name == "pyarrow" or name.startswith("pyarrow."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now fails as if it were not installed
    assert load_schema(csv_only).tables["atom"].n_rows == 3
    with pytest.raises(ImportError, match=r"^table 'atom': reading atom\.parquet needs pyarrow, which is not "
                                          r"installed: pip install 'streamforest\[parquet\]'$"):
        load_schema(tmp_path / "csv" / "pq.json")


def test_pandas_unnamed_index_is_not_a_column(pa, tmp_path):
    # what pandas.DataFrame.to_parquet writes for a filtered frame: its row labels as __index_level_0__
    atom = atom_table(pa).append_column("__index_level_0__", pa.array([5, 9, 40]))
    meta = {"index_columns": ["__index_level_0__"], "columns": []}
    atom = atom.replace_schema_metadata({b"pandas": json.dumps(meta).encode()})
    db = load_schema(write_parquet(pa, tmp_path / "pq", GOOD, m=M, atom=atom, bond=BOND))
    assert list(db.tables["atom"].columns) == ["el", "q"]
    # without the pandas metadata it is an ordinary column
    db = load_schema(write_parquet(pa, tmp_path / "plain", GOOD, m=M, atom=atom.replace_schema_metadata(None),
                                   bond=BOND))
    assert list(db.tables["atom"].columns) == ["el", "q", "__index_level_0__"]


def test_integer_key_of_a_leaf_table_checked_on_the_integers(pa, tmp_path):
    """A key no table points to (a leaf's own id) is checked for repeats and nulls; a good one loads as with text."""
    schema = json.loads(json.dumps(GOOD))
    schema["tables"]["bond"]["key"] = "bid"

    def bonds(ids: list) -> object:
        return pa.table({"bid": pa.array(ids, pa.int64()), "aid": pa.array([10, 10, 12, None], pa.int64()),
                         "t": ["7", "1", "7", "7"]})

    db = load_schema(write_parquet(pa, tmp_path / "ok", schema, m=M, atom=atom_table(pa), bond=bonds([4, 3, 2, 1])))
    text = load_schema(write_parquet(pa, tmp_path / "csv", schema, m=M, atom=atom_table(pa),
                                     bond="bid,aid,t\n4,10,7\n3,10,1\n2,12,7\n1,,7\n"))
    assert_same(db, text)
    with pytest.raises(ValueError, match=r"duplicate key '3' in column 'bid', rows 2 and 4$"):
        load_schema(write_parquet(pa, tmp_path / "dup", schema, m=M, atom=atom_table(pa), bond=bonds([4, 3, 2, 3])))
    with pytest.raises(ValueError, match=r"key column 'bid' is empty in row 3$"):
        load_schema(write_parquet(pa, tmp_path / "null", schema, m=M, atom=atom_table(pa),
                                  bond=bonds([4, 3, None, 1])))
