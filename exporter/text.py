"""Text from a node made safe to show: characters that would reorder or drive a display
made visible, so the status page, the probe's debug answer and the logs show what was sent.

Made visible, as ``\\u202e``-style escapes (four hex digits, the code point): the C0 and C1
controls and DEL (a terminal's escape sequences, CR, NEL U+0085), the line and paragraph
separators U+2028 and U+2029, every bidirectional control (the embeddings and overrides
U+202A-U+202E, the isolates U+2066-U+2069, the marks U+200E, U+200F and U+061C), the
invisible format characters a hostile node could use to make its text look like another
node's (the soft hyphen U+00AD, U+180E, the zero-width space and joiners U+200B-U+200D, the
word joiner and invisible operators U+2060-U+2064, the deprecated format controls
U+206A-U+206F, the byte order mark U+FEFF, the interlinear annotation controls
U+FFF9-U+FFFB, the tag characters, and every other code point Unicode calls default
ignorable or a format character: the Hangul fillers, the combining grapheme joiner, the
variation selectors, the Arabic and Egyptian format controls, ...) and lone surrogates (which
no UTF-8 page can carry). Combining marks past the second on one character are made visible
too: hundreds stacked on one letter paint over the rest of the page. Everything else is kept
as it is, right-to-left
letters included: where text is laid out, each value is also isolated (``<bdi>``), so such
letters order only themselves.
"""

from __future__ import annotations

import functools
import re
import unicodedata

#: The characters :func:`visible` escapes (the module's docstring says why each).
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028\u2029\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\ud800-\udfff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]"
)
#: Combining marks shown as they are on one character; the rest of a run is made visible.
MARKS_PER_CHARACTER = 2
#: First strong isolate and pop directional isolate: around a value inside a longer text
#: (:func:`isolated`), the status page's renderer turns each such pair into ``<bdi>``.
ISOLATE_START, ISOLATE_END = "\u2068", "\u2069"
#: What an HTTP header value may hold: RFC 9110's field-value without obs-text (visible
#: ASCII, space and tab), so that it encodes as the Latin-1 http.server writes and splits
#: no answer. The web config refuses others; the server drops any that get past it.
FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")


def _escape(found: re.Match[str]) -> str:
    code = ord(found[0])
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


@functools.cache
def piled_marks() -> re.Pattern[str]:
    """A combining mark with MARKS_PER_CHARACTER marks before it (made once, when first
    needed: the class is read from ``unicodedata`` over the planes that hold marks)."""
    marks = "".join(
        chr(code)
        for code in range(0x300, 0x20000)
        if unicodedata.category(chr(code)) in {"Mn", "Me"} and not 0xD800 <= code <= 0xDFFF
    )
    mark = f"[{re.escape(marks)}]"
    return re.compile(f"(?<={mark * MARKS_PER_CHARACTER}){mark}")


def visible(text: str) -> str:
    """``text`` with every character of :data:`UNSAFE`, and every combining mark past
    MARKS_PER_CHARACTER on one character, written as ``\\uXXXX``."""
    shown = UNSAFE.sub(_escape, text)
    if text.isascii():
        return shown
    return piled_marks().sub(_escape, shown)


def isolated(text: str) -> str:
    """``text`` made visible and marked as one isolated value inside a longer plain text."""
    return f"{ISOLATE_START}{visible(text)}{ISOLATE_END}"
