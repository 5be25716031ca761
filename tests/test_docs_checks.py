"""docs/check_site.py, the check ``make docs`` runs on the built site, finds what it is there to find."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def check_site():
    spec = importlib.util.spec_from_file_location("check_site", ROOT / "docs" / "check_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page(body: str) -> str:
    """A built page: navigation outside the article, the content inside it."""
    return (f'<html><head><script src="assets/javascripts/iframe-worker-shim.js"></script></head><body>'
            f'<nav><p>:class: in the navigation is not content</p></nav><article>{body}</article></body></html>')


def test_a_clean_page_has_no_problems(check_site):
    clean = page("<p>See <a href='x.html'><code>build_model</code></a>; roles in code are fine: "
                 "<code>:class:`X`</code>.</p><table><tr><td><code>a</code></td><td>b</td></tr></table>")
    assert check_site.page_problems(clean) == []


@pytest.mark.parametrize("body, what", [
    ("<p>a <code>Foo</code> from :class:<code>Foo</code></p>", "raw Sphinx role"),
    ("<p>see [<code>chosen_samples</code>][] for more</p>", "unresolved cross-reference"),
    ("<table><tr><td><code>mesh_latent</code></td><td>pointwise lift at the nodes; averages</td></tr>"
     "<tr><td>cells outside the domain weigh 0); attention and a convolution there</td><td></td></tr></table>",
     "broken over two lines"),
    ("<p>| a | b |</p>", "broken table row"),
    ('<script src="https://unpkg.com/iframe-worker/shim"></script>', "from the network"),
    ('<p><span class="arithmatex">\\(x\\)</span></p>', "untypeset"),
    ('<h2 id="results">Results</h2><p>see <a href="#on-a-gpu">On a GPU</a></p>', "not on the page"),
])
def test_each_kind_of_problem_is_found(check_site, body, what):
    problems = check_site.page_problems(page(body))
    assert any(what in p for p in problems), problems
