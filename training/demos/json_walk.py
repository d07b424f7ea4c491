"""A large JSON document read one array element at a time.

A demo file is mostly numbers: ``json.loads`` makes each one a Python float in a Python
list (about 32 bytes for a number written in 10), so a 300 MB demo file peaked at 2.4 GB
before a single array was made. :class:`JsonWalker` decodes the document's outer object
or array one member at a time with the standard library's own decoder, so the caller can
turn each episode into numpy arrays and let its Python lists go before the next is read:
what stays in memory is the text and the arrays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class JsonWalker:
    """A cursor over JSON text: values decoded where it stands, arrays and objects entered
    one member at a time.

    Every fault is a :class:`json.JSONDecodeError` (a value nested past the interpreter's
    limit a :class:`RecursionError`), as ``json.loads`` raises them.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        match = _SPACE.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()
        return self.text[self.pos : self.pos + 1]

    def _expect(self, char: str) -> None:
        if self.peek() != char:
            raise json.JSONDecodeError(f"Expecting {char!r}", self.text, self.pos)
        self.pos += 1

    def value(self) -> Any:
        """The whole value that starts here."""
        self.peek()
        value, self.pos = _DECODER.raw_decode(self.text, self.pos)
        return value

    def items(self) -> Iterator[Any]:
        """The elements of the array that starts here, each decoded as it is reached."""
        self._expect("[")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            if self.peek() == ",":
                self.pos += 1
                continue
            self._expect("]")
            return

    def members(self) -> Iterator[str]:
        """The keys of the object that starts here; the caller reads each key's value
        (:meth:`value` or :meth:`items`) before asking for the next key."""
        self._expect("{")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            if self.peek() != '"':
                raise json.JSONDecodeError("Expecting property name", self.text, self.pos)
            key = self.value()
            self._expect(":")
            yield key
            if self.peek() == ",":
                self.pos += 1
                continue
            self._expect("}")
            return

    def end(self) -> None:
        """Nothing but white space may follow the document."""
        if self.peek():
            raise json.JSONDecodeError("Extra data", self.text, self.pos)
