"""What this process's terminal can show: its width, colour and encoding, and text streams that
write only what it can print (the report's symbols become plain stand-ins on an ASCII terminal).
Used by the front door (grader/client.py), the commands and the daemon's answers alike."""

from __future__ import annotations

import os
import sys
from typing import TextIO


def terminal() -> dict[str, object]:
    """How this process's terminal shows output: width, colour, and the characters it can print."""
    try:
        columns = os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        columns = int(os.environ.get("COLUMNS", "80") or 80)
    color = (sys.stdout.isatty() or bool(os.environ.get("FORCE_COLOR"))) and "NO_COLOR" not in os.environ
    return {"columns": columns, "color": color, "encoding": encoding_of(sys.stdout)}


def encoding_of(stream: object) -> str:
    """The codec a text stream writes with, by its canonical name ("utf-8", "ascii")."""
    import codecs

    try:
        return codecs.lookup(str(getattr(stream, "encoding", None) or "utf-8")).name
    except LookupError:
        return "utf-8"


# Stand-ins for the report's symbols on a terminal that cannot print them.
PLAIN = {"✔": "+", "✘": "x", "⏱": "!", "☠": "!", "▲": "^", "🧪": ">>", "✅": "OK", "❌": "!!", "±": "~", "—": "-",
         "–": "-", "…": ".", "×": "x", "≤": "<", "≥": ">", "→": ">", "‘": "'", "’": "'", "“": '"', "”": '"'}


def printable(text: str, encoding: str) -> str:
    """``text`` with each character ``encoding`` cannot write replaced by plain text as wide as it
    (the report's symbols by a stand-in, anything else by ``?``), so that columns stay aligned."""
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        pass
    from rich.cells import cell_len

    out = []
    for ch in text:
        try:
            ch.encode(encoding)
            out.append(ch)
        except UnicodeEncodeError:
            width = cell_len(ch)
            plain = PLAIN.get(ch, "?")
            out.append(plain[:width].ljust(width) if width else "")
    return "".join(out)


class PrintableStream:
    """A text stream that writes only what its terminal's encoding can show (``printable``); rich,
    seeing its ``encoding``, draws ASCII boxes on an ASCII terminal."""

    def __init__(self, stream: TextIO, encoding: str) -> None:
        self._stream, self.encoding = stream, encoding

    def write(self, text: str) -> int:
        return self._stream.write(printable(text, self.encoding))

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return bool(getattr(self._stream, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._stream.fileno()

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def write_out(text: str, stream: TextIO) -> None:
    """Write a daemon's answer, in what this terminal can show."""
    stream.write(printable(text, encoding_of(stream)))
