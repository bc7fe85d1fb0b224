#!/usr/bin/env python3
"""Update the web chat's vendored rendering libraries (static/vendor/) from the npm registry.

The page has no build step and makes no third-party request, so the browser builds of
markdown-it, highlight.js and KaTeX are committed as static files. This script fetches each
package with ``npm pack`` (the registry's own tarball, checked against its integrity hash),
copies the browser build and the licence, and writes ``static/vendor/manifest.json`` (name,
version, tarball integrity, files). Run it, then the web chat's browser tests:

    python3 tools/vendor_web.py                      # the versions pinned below
    python3 tools/vendor_web.py --version katex=0.16.48
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[1] / "src/chatgate/platforms/webchat/static/vendor"


@dataclass(frozen=True)
class Package:
    """One npm package: where its files go and which of them (paths inside the tarball's ``package/``)."""

    npm: str
    version: str
    folder: str
    files: tuple[str, ...]
    globs: tuple[str, ...] = ()
    """Patterns of further files (KaTeX's fonts: the woff2 ones only, what every current browser loads)."""


PACKAGES = [
    Package("markdown-it", "14.3.3", "markdown-it", ("dist/markdown-it.min.js", "LICENSE")),
    Package("@highlightjs/cdn-assets", "11.12.0", "highlight", ("es/highlight.min.js", "LICENSE")),
    Package(
        "katex",
        "0.16.47",
        "katex",
        ("dist/katex.min.js", "dist/katex.min.css", "LICENSE"),
        ("dist/fonts/*.woff2",),
    ),
]


def pack(package: Package, version: str, work: Path) -> tuple[Path, str]:
    """The package's tarball from the registry, and its integrity (sha512) as npm reports it."""
    out = subprocess.run(
        ["npm", "pack", "--json", f"{package.npm}@{version}"],
        cwd=work,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    info = json.loads(out)[0]
    tarball = work / info["filename"]
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if digest != info["integrity"]:
        raise SystemExit(f"{package.npm}: the tarball does not match its integrity {info['integrity']}")
    return tarball, digest


def install(package: Package, version: str, work: Path) -> dict[str, object]:
    """Copy the package's browser files into static/vendor/<folder>/, replacing what was there."""
    tarball, integrity = pack(package, version, work)
    unpacked = work / package.folder
    with tarfile.open(tarball) as tar:
        tar.extractall(unpacked, filter="data")
    root = unpacked / "package"
    chosen = [root / name for name in package.files]
    for pattern in package.globs:
        chosen += sorted(root.glob(pattern))
    target = VENDOR / package.folder
    shutil.rmtree(target, ignore_errors=True)
    files = []
    for source in chosen:
        # dist/ is dropped, the rest of the path kept: katex.min.css finds fonts/ beside it
        relative = source.relative_to(root)
        relative = relative.relative_to("dist") if relative.parts[0] == "dist" else relative
        dest = target / (relative.name if relative.parts[0] == "es" else relative)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        files.append(str(dest.relative_to(VENDOR)))
    license_name = json.loads((root / "package.json").read_text())["license"]
    return {"version": version, "license": license_name, "integrity": integrity, "files": sorted(files)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--version", action="append", default=[], help="NAME=VERSION to fetch another version"
    )
    args = parser.parse_args()
    wanted = dict(item.split("=", 1) for item in args.version)
    manifest = {}
    with tempfile.TemporaryDirectory() as tmp:
        for package in PACKAGES:
            version = wanted.get(package.npm, package.version)
            manifest[package.npm] = {"folder": package.folder, **install(package, version, Path(tmp))}
            print(f"{package.npm} {version} -> static/vendor/{package.folder}/")
    (VENDOR / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
