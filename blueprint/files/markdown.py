"""Names read from files, made safe for the Markdown the tools print (a pull-request comment, a report).

A resource, stack, team or node name comes from a graph, a stack file or a report another job wrote; rendered as it
is, ``# x`` would start a heading, ``![x](http://...)`` an image, ``[x](...)`` a link, ``|`` a new table cell,
``<img ...>`` an HTML tag, ``@someone`` a mention that notifies them, and a control character would reach the
terminal. Every renderer puts such a name through one of these helpers:

- :func:`md_code`: always an inline code span (in which GitHub parses no markup, link, tag or mention), with a
  fence longer than any run of backticks inside, ``|`` escaped in tables (GFM reads it as a cell break even in a
  code span) and control characters and line breaks shown as ``\\xNN``;
- :func:`md_name`: a plain name (letters, digits, ``-._:/``) as it is, anything else as :func:`md_code`;
- :func:`html_name`: the same inside an HTML block (``<summary>``), where Markdown is not read: a plain name as it
  is, anything else HTML-escaped in ``<code>``;
- :func:`md_text`: free text (a note): what starts a link, an image, a tag, a code span or a cell (``[ ] < > ` |``
  and ``\\``) backslash-escaped, ``&`` as ``&amp;`` (no entity), ``@`` kept from mentioning; emphasis is left, it
  cannot reach outside the text.
"""

from __future__ import annotations

import html
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]*\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_PUNCTUATION = re.compile(r"([\\`\[\]<>|])")
_WORD_JOINER = "\u2060"  # invisible; "@\u2060name" is no mention


def _visible(text: str) -> str:
    """Control characters and line breaks as ``\\xNN`` (``\\uNNNN`` above 0xff)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else
                        f"\\u{ord(m.group()):04x}", text)


def md_code(value: Any, table: bool = True) -> str:
    """``value`` as one inline code span (module docstring); ``table``: it sits in a table cell."""
    text = _visible(str(value))
    if table:
        text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_name(value: Any, table: bool = True) -> str:
    """A plain name as it is; anything else as :func:`md_code`."""
    text = str(value)
    return text if _PLAIN.match(text) else md_code(text, table)


def html_name(value: Any) -> str:
    """A plain name as it is; anything else HTML-escaped in ``<code>`` (for HTML blocks such as ``<summary>``)."""
    text = str(value)
    return text if _PLAIN.match(text) else f"<code>{html.escape(_visible(text), quote=True)}</code>"


def md_text(value: Any) -> str:
    """Free text with its Markdown punctuation escaped, ``@`` kept from mentioning and control characters shown."""
    text = _PUNCTUATION.sub(r"\\\1", _visible(str(value)))
    return text.replace("@", "@" + _WORD_JOINER).replace("&", "&amp;")
