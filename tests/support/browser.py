"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
NUL-terminated JSON on file descriptors 3 and 4, so no WebSocket client is needed): load a
page, then evaluate JavaScript in it, where the layout the browser made can be measured.

``laid_out(url)`` is what a person reads: for every list item and table cell of the page,
its characters in the order the browser placed them on screen beside their order in the
document. The two differ when text a node sent (a right-to-left override, say) reorders the
page around it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from tests.support.programs import require_program
from tests.support.waiting import wait_until

#: For every ``li`` and ``td``: its visible characters (not spaces, not the invisible
#: bidirectional controls) in document order and in the order they appear on screen, line
#: by line (a character joins the line whose band holds its centre), left to right.
_LAYOUT = r"""
(() => {
  const invisible = /[\s\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]/;
  const found = [];
  for (const element of document.querySelectorAll('li, td')) {
    const chars = [];
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.data.length; i++) {
        if (invisible.test(node.data[i])) continue;
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const box = range.getBoundingClientRect();
        if (box.width === 0) continue;
        chars.push({c: node.data[i], x: box.left, top: box.top, bottom: box.bottom});
      }
    }
    const lines = [];
    for (const ch of chars) {
      const centre = (ch.top + ch.bottom) / 2;
      let line = lines.find(l => l.top <= centre && centre <= l.bottom);
      if (!line) { line = {top: ch.top, bottom: ch.bottom, chars: []}; lines.push(line); }
      line.chars.push(ch);
    }
    lines.sort((a, b) => a.top - b.top);
    const onScreen = lines.map(l => l.chars.sort((a, b) => a.x - b.x).map(c => c.c).join(''));
    found.push([chars.map(c => c.c).join(''), onScreen.join('')]);
  }
  return JSON.stringify(found);
})()
"""


@dataclass(frozen=True)
class LaidOut:
    """One list item or table cell: its text in document order and as laid out on screen."""

    text: str
    on_screen: str


class DevTools:
    """One headless Chromium; ``call`` sends a DevTools command and returns its result."""

    def __init__(self, width: int = 1600, height: int = 1000) -> None:
        chromium = require_program("chromium", "chromium-browser")
        to_browser, self._commands = os.pipe()
        self._answers, from_browser = os.pipe()

        # the pipe ends Chromium reads and writes become its file descriptors 3 and 4 (bash:
        # dash takes single-digit descriptors only)
        moved = (
            f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-'
        )
        self.process = subprocess.Popen(
            ["bash", "-c", moved, chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--hide-scrollbars", f"--window-size={width},{height}", "--remote-debugging-pipe",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(to_browser, from_browser),
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command (to a page's ``session``, if given) and wait for its answer."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 60
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer["result"]
                return result

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._answers], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer over the DevTools pipe")
            chunk = os.read(self._answers, 65536)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def open(self, url: str) -> str:
        """A page showing ``url``, loaded: its session id."""
        target = self.call("Target.createTarget", url=url)["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        loaded = "document.readyState == 'complete' && location.href"  # not about:blank's
        wait_until(
            lambda: self.evaluate(session, loaded) == url,
            timeout=60,
            interval=0.1,
            message=f"{url} did not load",
        )
        return str(session)

    def evaluate(self, session: str, expression: str) -> Any:
        """The value of a JavaScript expression in the page (the page's own Content Security
        Policy does not apply to the DevTools)."""
        result = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def close(self) -> None:
        os.close(self._commands)
        os.close(self._answers)
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def in_page(url: str, expression: str) -> Any:
    """The value of a JavaScript expression in the page at ``url``, once loaded."""
    browser = DevTools()
    try:
        return browser.evaluate(browser.open(url), expression)
    finally:
        browser.close()


def laid_out(url: str) -> list[LaidOut]:
    """Every list item and table cell of the page at ``url``, as written and as laid out."""
    found = json.loads(in_page(url, _LAYOUT))
    return [LaidOut(text, on_screen) for text, on_screen in found]
