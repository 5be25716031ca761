"""mkdocs hook: the iframe-worker shim in the site, so that search works in pages opened from the file
system (``site/index.html``), where browsers refuse to start a web worker from a file.

mkdocs-material's ``offline`` plugin inlines the search index and runs the search worker through this
shim; it would load the shim from a CDN whenever a page is read unless ``extra.polyfills`` already
names one (mkdocs.yml names ``assets/javascripts/iframe-worker-shim.js``). ``make docs`` fetches the
pinned npm package into the virtual environment (``share/petrov-docs/``); this hook copies it in.
"""
from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File

SHIM = Path(sys.prefix) / "share" / "petrov-docs" / "iframe-worker-shim.js"
TARGET = "assets/javascripts/iframe-worker-shim.js"


def on_config(config):
    if not SHIM.is_file():
        raise FileNotFoundError(f"{SHIM} is missing: build the site with `make docs` (it fetches the shim "
                                f"that search needs in pages opened from the file system)")
    if TARGET not in config.extra.get("polyfills", []):
        raise ValueError(f"mkdocs.yml must list {TARGET} under extra.polyfills (else the offline plugin "
                         f"loads the shim from a CDN)")
    return config


def on_files(files, config):
    files.append(File.generated(config, TARGET, abs_src_path=str(SHIM)))
    return files
