"""The kernels' on-disk cache follows every numba source, not only the file that defines a kernel."""

import subprocess
import sys
import textwrap
from pathlib import Path

from streamforest.compilation import forget_stale_kernels


def _call(pkg: Path, forget: bool) -> str:
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(pkg.parent)!r})
        from pathlib import Path
        from streamforest.compilation import forget_stale_kernels
        if {forget}:
            forget_stale_kernels([Path({str(pkg)!r})])
        from kernelpkg.kern import outer
        print(outer())
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def _write_helper(pkg: Path, value: int) -> None:
    (pkg / "helper.py").write_text(f"from numba import njit\n\n\n@njit\ndef inner():\n    return {value}\n")


def test_a_changed_inlined_helper_is_not_served_from_the_cache(tmp_path):
    pkg = tmp_path / "kernelpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kern.py").write_text("from numba import njit\n\nfrom kernelpkg.helper import inner\n\n\n"
                                 "@njit(cache=True)\ndef outer():\n    return inner()\n")
    _write_helper(pkg, 1)
    assert _call(pkg, forget=True) == "1"
    assert list(pkg.glob("__pycache__/kern.outer-*.nbi"))
    _write_helper(pkg, 2)
    # numba alone checks kern.py only: the cached kernel still returns the old helper's value
    assert _call(pkg, forget=False) == "1"
    assert _call(pkg, forget=True) == "2"
    assert _call(pkg, forget=False) == "2"


def test_an_unchanged_source_keeps_its_cache(tmp_path):
    pkg = tmp_path / "kernelpkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "kern.py").write_text("import numba\n")
    assert not forget_stale_kernels([pkg])  # nothing cached yet: the stamp is written
    cached = pkg / "__pycache__" / "kern.f-1.py311.nbi"
    cached.write_bytes(b"")
    assert not forget_stale_kernels([pkg]) and cached.exists()
    (pkg / "kern.py").write_text("import numba  # changed\n")
    assert forget_stale_kernels([pkg]) and not cached.exists()


_ONE_TYPE_PER_ARGUMENT = """
import numpy as np
from helpers import bin_columns, grow_tree
from streamforest import FeatureStreamForest
from streamforest.tree.grow import _grow_nodes, _grow_one, grow_trees

rng = np.random.default_rng(0)
cols = [rng.normal(size=300) for _ in range(3)]
data = bin_columns(cols)
y = (cols[0] + 0.3 * cols[1] > 0).astype(np.int32)
grow_tree(data, y)  # one tree: its leaf size broadcast from one number is a read-only array
grow_tree(data, y, seeds=(1, 2, 3), bootstrap=True, min_samples_leaf=2.0)
grow_tree(data, np.repeat(y, 2)[::2])  # strided class codes
grow_tree(data, np.repeat(cols[2], 2)[::2], regression=True)  # a strided regression target
forest = FeatureStreamForest(trees_per_generation=4, random_state=1)
for j, col in enumerate(cols):
    forest.add_feature(f"x{j}", col, y=y)
print(len(grow_trees.signatures), len(_grow_one.signatures), len(_grow_nodes.signatures))
"""


def test_the_growth_kernels_are_compiled_for_one_type_of_each_argument():
    # Each combination of argument types is a compilation of its own (for the growth kernels, most of a first run's
    # compilation): a strided target, a read-only plan array or prange's unsigned index must not make one.
    code = f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n{_ONE_TYPE_PER_ARGUMENT}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    outer, one, nodes = (int(v) for v in out.split())
    # the inner kernels are typed only when grow_trees is compiled here, not when it is loaded from the cache
    assert outer == 1 and one <= 1 and nodes <= 1, out
