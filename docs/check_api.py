"""After ``mkdocs build``: every public name (``__all__``) of the documented packages has its entry in
the built API reference (an anchor ``id="petrov.PACKAGE.NAME"`` on the package's page).

    python docs/check_api.py site        # exit 1, naming what is missing
"""
from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

PACKAGES = ("operators", "datasets", "train", "evaluate", "inverse")


def missing_names(site: Path) -> list[str]:
    """``petrov.PACKAGE.NAME`` of every public name without an entry in ``site/api/PACKAGE.html``."""
    missing = []
    for package in PACKAGES:
        page = site / "api" / f"{package}.html"
        anchors = set(re.findall(r'id="(petrov\.[\w.]+)"', page.read_text())) if page.is_file() else set()
        module = importlib.import_module(f"petrov.{package}")
        missing += [f"petrov.{package}.{name}" for name in module.__all__ if f"petrov.{package}.{name}" not in anchors]
    return missing


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "site")
    missing = missing_names(site)
    if missing:
        print(f"the API reference in {site} lacks: {', '.join(missing)}", file=sys.stderr)
        return 1
    print(f"API reference: every public name of petrov.{{{','.join(PACKAGES)}}} is documented")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
