"""The web chat's vendored libraries (static/vendor/) are what their manifest says: every file
listed is there and every file there is listed, each package has its licence, and the versions
are the ones tools/vendor_web.py pins (so running it reproduces the commit). The fetch itself
needs the npm registry and is not run here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "src/chatgate/platforms/webchat/static/vendor"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vendor_web", ROOT / "tools/vendor_web.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["vendor_web"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_manifest_lists_exactly_the_vendored_files_with_their_licences() -> None:
    manifest = json.loads((VENDOR / "manifest.json").read_text())
    listed = {name for entry in manifest.values() for name in entry["files"]}
    present = {str(p.relative_to(VENDOR)) for p in VENDOR.rglob("*") if p.is_file()} - {"manifest.json"}
    assert listed == present
    for entry in manifest.values():
        assert f"{entry['folder']}/LICENSE" in entry["files"]
        assert entry["integrity"].startswith("sha512-")
        assert entry["license"] in {"MIT", "BSD-3-Clause"}


def test_the_manifest_has_the_versions_the_update_script_pins() -> None:
    manifest = json.loads((VENDOR / "manifest.json").read_text())
    pinned = {p.npm: (p.version, p.folder) for p in _script().PACKAGES}
    assert {name: (e["version"], e["folder"]) for name, e in manifest.items()} == pinned


def test_each_vendored_build_names_its_version() -> None:
    """The files are the builds the manifest names (each carries its version in a banner or
    its code), not left over from an earlier update."""
    manifest = json.loads((VENDOR / "manifest.json").read_text())
    scripts = {
        "markdown-it": "markdown-it/markdown-it.min.js",
        "@highlightjs/cdn-assets": "highlight/highlight.min.js",
        "katex": "katex/katex.min.js",
    }
    for name, path in scripts.items():
        assert manifest[name]["version"] in (VENDOR / path).read_text(), name
