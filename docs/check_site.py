"""After ``mkdocs build``: the built site reads as a reference, offline, from the file system.

    python docs/check_site.py site          # exit 1, naming every page and what is wrong there

- every public name (``__all__``) of the documented packages has its entry in the API reference (an
  anchor ``id="petrov.PACKAGE.NAME"`` on the package's page);
- no page shows a raw Sphinx role (``:class:`...```) or an unresolved cross-reference (``[name][]``);
- no Markdown table fell apart (a row broken over two lines leaves ``| ... |`` text in a paragraph);
- no page loads a script, a stylesheet or an image from the network, and no formula is left untypeset;
- every link to an anchor of the same page (``href="#..."``) finds it there;
- search works from ``site/index.html``: the search index is inlined (``search/search_index.js``)
  and holds the public names, every page loads the local worker shim, and, where a Chromium is
  installed, a headless Chromium opening ``index.html?q=build_model`` from the file system lists
  ``petrov.operators.build_model`` among its results (without one this last step is skipped, saying so).
"""
from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

PACKAGES = ("grids", "operators", "datasets", "train", "evaluate", "inverse")
ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|obj|exc|const):")  # its name is code, so the role stands alone
UNRESOLVED = re.compile(r"\]\[(?:[\w.]*)\]")
SHIM = "assets/javascripts/iframe-worker-shim.js"
SEARCHED = ("build_model", "petrov.operators.build_model")  # a name, and the anchor its result must link


def missing_names(site: Path) -> list[str]:
    """``petrov.PACKAGE.NAME`` of every public name without an entry in ``site/api/PACKAGE.html``."""
    missing = []
    for package in PACKAGES:
        page = site / "api" / f"{package}.html"
        anchors = set(re.findall(r'id="(petrov\.[\w.]+)"', page.read_text())) if page.is_file() else set()
        module = importlib.import_module(f"petrov.{package}")
        missing += [f"petrov.{package}.{name}" for name in module.__all__ if f"petrov.{package}.{name}" not in anchors]
    return missing


class _Text(HTMLParser):
    """The text of a page's article outside code, split into its paragraphs (and table cells, list
    items): what a reader sees as prose."""

    BLOCKS = {"p", "li", "td", "th", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "div"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = [""]
        self.code = 0
        self.article = 0

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            self.article += 1
        if tag in ("code", "pre", "script", "style", "math"):
            self.code += 1
        if tag in self.BLOCKS or tag == "br":
            self.blocks.append("")

    def handle_endtag(self, tag):
        if tag == "article":
            self.article -= 1
        if tag in ("code", "pre", "script", "style", "math"):
            self.code -= 1
        if tag in self.BLOCKS:
            self.blocks.append("")

    def handle_data(self, data):
        if self.article and not self.code:
            self.blocks[-1] += data


def prose(html: str) -> list[str]:
    """The prose blocks of a page (outside code, formulas and the navigation)."""
    parser = _Text()
    parser.feed(html)
    return [b.strip() for b in parser.blocks if b.strip()]


def broken_rows(html: str) -> list[str]:
    """Rows of a table that are the second half of a row a line break split: Markdown takes the line
    after the break as a row of its own, its prose in the first cell and the other cells empty."""
    found = []
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
        first = re.sub(r"<[^>]+>", "", cells[0]) if cells else ""
        if len(cells) > 1 and not any(c.strip() for c in cells[1:]) and len(first) > 40 and "<code>" not in cells[0][:7]:
            found.append(first.strip())
    return found


def page_problems(html: str) -> list[str]:
    """What is wrong on one built page (an empty list when nothing is)."""
    problems = []
    blocks = prose(html)
    for block in blocks:
        if ROLE.search(block):
            problems.append(f"a raw Sphinx role: {block[:90]!r}")
        if UNRESOLVED.search(block):
            problems.append(f"an unresolved cross-reference: {block[:90]!r}")
        lines = block.splitlines()
        if any(line.strip().startswith("|") or line.rstrip().endswith("|") and line.count("|") >= 2 for line in lines):
            problems.append(f"a broken table row: {block[:90]!r}")
    for row in broken_rows(html):
        problems.append(f"a table row broken over two lines: {row[:90]!r}")
    for tag, attr in (("script", "src"), ("link", "href"), ("img", "src")):
        for url in re.findall(rf"<{tag}\b[^>]*\b{attr}=\"(https?://[^\"]+)\"", html):
            problems.append(f"<{tag}> loads {url} from the network")
    if 'class="arithmatex"' in html:
        problems.append("a formula left untypeset (arithmatex markup without MathML)")
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    for anchor in sorted(set(re.findall(r'\bhref="#([^"]+)"', html)) - ids):
        problems.append(f"a link to #{anchor}, which is not on the page (a README link included as it is?)")
    return problems


def search_problems(site: Path) -> list[str]:
    """Why search would not find the public names from ``site/index.html`` (empty: it would)."""
    index = site / "search" / "search_index.js"
    if not index.is_file():
        return [f"{index} is missing: the offline plugin inlines the search index there"]
    text = index.read_text()
    prefix = "var __index = "
    if not text.startswith(prefix):
        return [f"{index} does not define __index"]
    locations = {doc["location"] for doc in json.loads(text[len(prefix):])["docs"]}
    problems = [f"the search index has no entry for {name}" for name in
                ("petrov.operators.build_model", "petrov.train.train", "petrov.inverse.invert")
                if not any(loc.endswith("#" + name) for loc in locations)]
    if not (site / SHIM).is_file():
        problems.append(f"{site / SHIM} is missing: search cannot start its worker from the file system")
    return problems


def browser_search(site: Path) -> str | None:
    """Search the site as opened from the file system in a headless Chromium (the query in the URL,
    as Material reads it): None when the first result links ``SEARCHED``'s anchor, else what went
    wrong; ``"skipped"`` where no Chromium is installed."""
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        return "skipped"
    name, anchor = SEARCHED
    url = (site / "index.html").resolve().as_uri() + f"?q={name}"
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", url],
            capture_output=True, text=True, timeout=120).stdout
    links = re.findall(r'class="md-search-result__link"[^>]*href="([^"]+)"|href="([^"]+)"[^>]*class="md-search-result__link"', dom)
    hrefs = [a or b for a, b in links]
    if not hrefs:
        meta = re.search(r'md-search-result__meta">([^<]*)', dom)
        return f"searching {name!r} in {url} found nothing ({meta.group(1).strip() if meta else 'no search box'})"
    if not any(h.endswith("#" + anchor) for h in hrefs):
        return f"searching {name!r} in {url} did not list #{anchor} (first result {hrefs[0]})"
    return None


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "site")
    failures = []
    missing = missing_names(site)
    if missing:
        failures.append(f"the API reference lacks: {', '.join(missing)}")
    pages = sorted(site.rglob("*.html"))
    for page in pages:
        failures += [f"{page.relative_to(site)}: {p}" for p in page_problems(page.read_text())]
        if SHIM not in page.read_text() and page.name != "404.html":
            failures.append(f"{page.relative_to(site)}: does not load the search worker's shim")
    failures += search_problems(site)
    browser = None if failures else browser_search(site)
    if browser not in (None, "skipped"):
        failures.append(browser)
    if failures:
        print(f"{site}: {len(failures)} problem(s)\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    searched = ("search checked in the index only (no Chromium installed for the browser check)"
                if browser == "skipped" else f"a headless Chromium found {SEARCHED[0]} from {site}/index.html")
    print(f"{site}: {len(pages)} pages; every public name of petrov.{{{','.join(PACKAGES)}}} documented; no raw "
          f"role, unresolved reference, broken table, remote asset or untypeset formula; {searched}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
