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
U+FFF9-U+FFFB and the tag characters U+E0000-U+E007F) and lone surrogates (which no UTF-8
page can carry). Everything else is kept as it is, right-to-left
letters included: where text is laid out, each value is also isolated (``<bdi>``), so such
letters order only themselves.
"""

from __future__ import annotations

import re

#: The characters :func:`visible` escapes (the module's docstring says why each).
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]"
)
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


def visible(text: str) -> str:
    """``text`` with every character of :data:`UNSAFE` written as ``\\uXXXX``."""
    return UNSAFE.sub(_escape, text)


def isolated(text: str) -> str:
    """``text`` made visible and marked as one isolated value inside a longer plain text."""
    return f"{ISOLATE_START}{visible(text)}{ISOLATE_END}"
