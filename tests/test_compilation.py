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
