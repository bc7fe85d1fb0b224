"""pytest's assert-rewritten ``.pyc`` of every test module, written once before the workers start.

pytest caches a rewritten module only where bytecode may be written, so with
``PYTHONDONTWRITEBYTECODE`` (these machines set it) each of the six workers parsed and rewrote
all 334 test modules itself at collection: about 7 s of CPU each, most of the minute before the
first test ran. Written here once, over every core, each worker reads them (pytest checks each
against its source's hash, so an edited module is rewritten as before). This uses pytest's own
private rewrite functions; if they change, nothing is written and the workers rewrite as before.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

NEEDED = ("_rewrite_test", "_write_pyc", "_read_pyc", "get_cache_dir", "PYC_TAIL")


def rewrite_test_modules_once(tests: Path) -> None:
    try:
        from _pytest.assertion import rewrite
    except ImportError:  # pragma: no cover - pytest moved it
        return
    if not all(hasattr(rewrite, name) for name in NEEDED):
        return
    modules = [str(p) for p in tests.rglob("*.py") if p.name.startswith("test_") or p.name == "conftest.py"]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(rewrite_one, modules, chunksize=16))


class _Quiet:
    """What ``_write_pyc`` reports a failed write to (a read-only checkout: the workers rewrite)."""

    def trace(self, message: str) -> None:
        pass


def rewrite_one(path: str) -> None:
    from _pytest.assertion import rewrite

    source = Path(path)
    cache_dir = rewrite.get_cache_dir(source)
    pyc = cache_dir / (source.name[:-3] + rewrite.PYC_TAIL)
    if rewrite._read_pyc(source, pyc) is not None:
        return
    source_hash, code = rewrite._rewrite_test(source, None)  # config only turns on an opt-in hook
    try:
        cache_dir.mkdir(exist_ok=True)
    except OSError:
        return
    rewrite._write_pyc(_Quiet(), code, source_hash, pyc)
