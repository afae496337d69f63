"""The little Markdown a post-mortem's own prose uses (code spans and emphasis), rendered to HTML and
re-written as safe Markdown with markdown-it-py, the CommonMark parser rich already depends on.

Recommendations are written by gpuwatch as Markdown (`` `dcgmi diag -r 3` ``) with any value from a
node or a log escaped by `escape`. Both renderers parse them with a parser that knows only code spans,
emphasis and backslash escapes (no links, images, raw HTML or entities), so even unescaped hostile
text can only ever come out as text.
"""

from __future__ import annotations

import re
from functools import cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&$!])")
_BACKTICKS = re.compile(r"`+")
# the inline rules kept: backslash escapes, code spans, emphasis and plain text (no links, images,
# autolinks, raw HTML or entities: text that looks like them stays text)
_INLINE = ["text", "escape", "backticks", "emphasis", "newline"]


def escape(text: str) -> str:
    """``text`` as literal Markdown: each character that could start markup is backslash-escaped."""
    return _SPECIAL.sub(r"\\\1", text)


@cache
def _parser() -> MarkdownIt:
    md = MarkdownIt("zero", {"html": False, "linkify": False, "typographer": False})
    md.enable(_INLINE)
    return md


def _inline(source: str) -> list[Token]:
    """The inline tokens of one line of ``source`` (a paragraph's children)."""
    tokens = _parser().parseInline(source.replace("\n", " "))
    return list(tokens[0].children or ()) if tokens else []


def to_html(source: str) -> str:
    """One line of the restricted Markdown as HTML: text escaped, code spans as ``<code>``, emphasis."""
    return _parser().renderInline(source.replace("\n", " ")).strip()


def _code_span(code: str) -> str:
    """A code span no backtick run in ``code`` can close (CommonMark strips one space each side)."""
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(code)), default=0) + 1)
    pad = " " if code.startswith("`") or code.endswith("`") or (code.startswith(" ") and code.endswith(" ")) else ""
    return f"{fence}{pad}{code}{pad}{fence}"


def to_markdown(source: str) -> str:
    """One line of the restricted Markdown re-written so that a full CommonMark viewer (links, images,
    raw HTML on) shows the same thing: code spans and emphasis kept, everything else escaped text."""
    out = []
    for token in _inline(source):
        if token.type == "text":
            out.append(escape(token.content))
        elif token.type == "code_inline":
            out.append(_code_span(token.content))
        elif token.type in ("em_open", "em_close"):
            out.append("*")
        elif token.type in ("strong_open", "strong_close"):
            out.append("**")
        elif token.type in ("softbreak", "hardbreak"):
            out.append(" ")
        else:  # nothing else is enabled; should a rule slip in, its text stays text
            out.append(escape(token.content))
    return "".join(out)
