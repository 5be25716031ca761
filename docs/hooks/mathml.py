"""mkdocs hook: formulas typeset as MathML when the site is built, so pages need no script and no
network to show them (browsers render MathML natively).

Pages write LaTeX between ``$...$`` (inline) or ``$$...$$`` (display); ``pymdownx.arithmatex`` (generic
mode) marks them up as ``<span class="arithmatex">\\(...\\)</span>`` / ``<div class="arithmatex">\\[...\\]</div>``
and leaves code alone; this hook replaces each with the MathML ``latex2mathml`` writes.
"""
from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.S)
BLOCK = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S)


def _mathml(match: re.Match, display: str) -> str:
    latex = html.unescape(match.group(1)).strip()
    try:
        return convert(latex, display=display)
    except Exception as err:  # a formula that does not convert fails the build, naming it
        raise ValueError(f"cannot typeset the formula {latex!r}: {err}") from None


def on_page_content(content: str, page, config, files) -> str:
    content = BLOCK.sub(lambda m: _mathml(m, "block"), content)
    return INLINE.sub(lambda m: _mathml(m, "inline"), content)
