"""Where a JSON text first stops being JSON, found by schedlens itself: the facts its error messages are made of.

msgspec refuses a malformed body with a sentence of its own, whose wording changes between releases (0.23 turned
"invalid UTF-8" into "Invalid UTF-8 encoded string"). schedlens answers in its own words instead, from facts this
module establishes: the kind of problem, its byte offset, and what the grammar expected there. It runs only after
msgspec has refused a document (never on a verb's success path), scans bytes iteratively (any nesting depth), and
refuses what msgspec refuses: NaN and Infinity, control characters in strings, unpaired UTF-16 surrogate escapes,
invalid UTF-8 anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ProblemKind = Literal["empty", "utf8", "malformed", "truncated", "trailing"]


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    kind: ProblemKind
    at: int
    """Byte offset of the problem (for ``truncated``: the length of the text, where it ends)."""
    detail: str = ""
    """For ``malformed``: what is wrong there, in schedlens's words. For ``truncated``: what was left unfinished."""


@dataclass(frozen=True, slots=True)
class Scan:
    problem: SyntaxProblem | None
    """The first problem in the text, or None for well-formed JSON."""
    depth: int
    """The deepest nesting of arrays and objects seen (up to the problem, if any)."""
    deepest_at: int
    """Byte offset of the bracket that first reached ``depth``."""


_WS = re.compile(rb"[ \t\n\r]*+")
_STRING_BODY = rb'"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+'
_STRING = re.compile(_STRING_BODY + rb'"')
_STRING_START = re.compile(_STRING_BODY)
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?(?:[eE][+-]?[0-9]++)?")
_NUMBER_TAIL = re.compile(rb"[-+.eE0-9]*+")
_ESCAPE = re.compile(rb"\\(?:u([0-9a-fA-F]{4})|.)")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # may also match an escaped backslash and text: only a hint
_SCALAR = rb"(?:" + _STRING_BODY + rb'"|' + _NUMBER.pattern + rb"(?![-+.eE0-9])|true|false|null)"
_SPACE = rb"[ \t\n\r]*+"
_HEAD = _SPACE + _STRING_BODY + rb'"' + _SPACE + rb":" + _SPACE
_MEMBERS = re.compile(
    rb"(?:" + _HEAD + _SCALAR + _SPACE + rb",)*+"
    rb"(?:" + _HEAD + rb"(?P<open>(?=[{\[]))|" + _HEAD + _SCALAR + _SPACE + rb"(?P<close>\}))?"
)
"""Object members with a plain value; then the next key if its value is an array or object, or the last member
and the closing brace."""
_ITEMS = re.compile(rb"(?:" + _SPACE + _SCALAR + _SPACE + rb",)*+(?:" + _SPACE + _SCALAR + _SPACE + rb"(?P<close>\]))?")
"""Array items that are plain values, up to the next array or object, or to the closing bracket."""
_NOT_NUMBERS = (b"NaN", b"Infinity", b"-Infinity")
_LITERALS = (b"true", b"false", b"null")

# What the grammar expects next.
_VALUE, _FIRST_VALUE, _KEY, _FIRST_KEY, _COLON, _NEXT, _END = range(7)
_OPEN_OBJECT, _OPEN_ARRAY = 0x7B, 0x5B
_EXPECTED = {
    _VALUE: "a value",
    _FIRST_VALUE: "a value or ']'",
    _KEY: "a key (a string in double quotes)",
    _FIRST_KEY: "a key (a string in double quotes) or '}'",
    _COLON: "':'",
}


def scan(data: bytes) -> Scan:
    """The first syntax problem of ``data`` as JSON (RFC 8259, UTF-8), and how deep its nesting goes."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The grammar is checked up to the first byte that is not UTF-8: a problem before it comes first.
        before = _scan(data[: exc.start], surrogates=_SURROGATE_ESCAPE.search(data, 0, exc.start) is not None)
        problem = before.problem
        if problem is None or problem.kind in ("empty", "truncated"):
            problem = SyntaxProblem("utf8", exc.start)
        return Scan(problem, before.depth, before.deepest_at)
    return _scan(data, surrogates=_SURROGATE_ESCAPE.search(data) is not None)


def _scan(data: bytes, *, surrogates: bool) -> Scan:
    """:func:`scan` of valid UTF-8; ``surrogates``: it holds escapes of UTF-16 surrogates, whose pairing is checked."""
    n = len(data)
    stack = bytearray()  # the open containers, innermost last
    depth = deepest_at = 0
    state = _VALUE
    pos = _WS.match(data, 0).end()  # type: ignore[union-attr]  # matches the empty string: never None
    if pos == n:
        return Scan(SyntaxProblem("empty", 0), 0, 0)
    members, items = (_MEMBERS, _ITEMS) if not surrogates else (None, None)
    while pos < n:
        c = data[pos]
        if members is not None and items is not None:
            # Runs of plain members and items in one regular expression, so that the loop below steps only
            # through containers and the odd token (a long body would otherwise take seconds to describe).
            run = None
            if state in (_KEY, _FIRST_KEY):
                run = members.match(data, pos)
                if run is not None and run.group("open") is not None:
                    state = _VALUE
                elif run is not None and run.end() > pos:
                    state = _KEY
            elif state == _FIRST_VALUE or (state == _VALUE and stack and stack[-1] == _OPEN_ARRAY):
                run = items.match(data, pos)
                if run is not None and run.end() > pos:
                    state = _VALUE
            if run is not None and run.end() > pos:
                if run.group("close") is not None:
                    stack.pop()
                    state = _NEXT if stack else _END
                pos = _WS.match(data, run.end()).end()  # type: ignore[union-attr]
                c = data[pos] if pos < n else 0
            if pos == n:
                break
        if state in (_VALUE, _FIRST_VALUE):
            if c in (_OPEN_OBJECT, _OPEN_ARRAY):
                stack.append(c)
                if len(stack) > depth:
                    depth, deepest_at = len(stack), pos
                state = _FIRST_KEY if c == _OPEN_OBJECT else _FIRST_VALUE
                pos += 1
            elif c == 0x5D and state == _FIRST_VALUE:  # ']' of an empty array
                stack.pop()
                state = _NEXT if stack else _END
                pos += 1
            else:
                end = _scalar(data, pos, surrogates)
                if isinstance(end, SyntaxProblem):
                    return Scan(end, depth, deepest_at)
                pos = end
                state = _NEXT if stack else _END
        elif state in (_KEY, _FIRST_KEY):
            if c == 0x22:
                end = _string(data, pos, surrogates)
                if isinstance(end, SyntaxProblem):
                    return Scan(end, depth, deepest_at)
                pos, state = end, _COLON
            elif c == 0x7D and state == _FIRST_KEY:  # '}' of an empty object
                stack.pop()
                state = _NEXT if stack else _END
                pos += 1
            else:
                return Scan(_unexpected(data, pos, _EXPECTED[state]), depth, deepest_at)
        elif state == _COLON:
            if c != 0x3A:
                return Scan(_unexpected(data, pos, _EXPECTED[state]), depth, deepest_at)
            state = _VALUE
            pos += 1
        elif state == _NEXT:
            in_object = stack[-1] == _OPEN_OBJECT
            if c == 0x2C:
                state = _KEY if in_object else _VALUE
                pos += 1
            elif c == (0x7D if in_object else 0x5D):
                stack.pop()
                state = _NEXT if stack else _END
                pos += 1
            else:
                expected = "',' or '}'" if in_object else "',' or ']'"
                return Scan(_unexpected(data, pos, expected), depth, deepest_at)
        else:
            return Scan(SyntaxProblem("trailing", pos), depth, deepest_at)
        pos = _WS.match(data, pos).end()  # type: ignore[union-attr]
    if state == _END:
        return Scan(None, depth, deepest_at)
    unfinished = "object" if stack and stack[-1] == _OPEN_OBJECT else "array"
    return Scan(SyntaxProblem("truncated", n, unfinished), depth, deepest_at)


def _scalar(data: bytes, pos: int, surrogates: bool) -> int | SyntaxProblem:
    """The end of the string, number or literal at ``pos``, or why there is none."""
    c = data[pos]
    if c == 0x22:
        return _string(data, pos, surrogates)
    for word in _NOT_NUMBERS:
        if data.startswith(word, pos):
            return SyntaxProblem("malformed", pos, f"{word.decode()} is not a JSON number")
    if c == 0x2D or 0x30 <= c <= 0x39:
        number = _NUMBER.match(data, pos)
        tail = _NUMBER_TAIL.match(data, pos).end()  # type: ignore[union-attr]
        if tail == len(data) and (number is None or number.end() < tail):
            return SyntaxProblem("truncated", len(data), "number")
        if number is None:
            return _unexpected(data, pos + 1, "a digit")
        return number.end()
    for word in _LITERALS:
        if data.startswith(word, pos):
            return pos + len(word)
        rest = data[pos : pos + len(word)]
        if pos + len(rest) == len(data) and word.startswith(rest):
            return SyntaxProblem("truncated", len(data), f"'{word.decode()}'")
    return _unexpected(data, pos, "a value")


def _string(data: bytes, pos: int, surrogates: bool) -> int | SyntaxProblem:
    """The end of the string starting at ``pos`` (a double quote), or its first problem."""
    whole = _STRING.match(data, pos)
    end = whole.end() if whole else _STRING_START.match(data, pos).end()  # type: ignore[union-attr]
    token = data[pos:end]
    if surrogates and b"\\u" in token:
        unpaired = _unpaired_surrogate(token)
        if unpaired is not None:
            return SyntaxProblem(
                "malformed",
                pos + unpaired,
                f"unpaired UTF-16 surrogate escape {_shown(data, pos + unpaired, 6)} in a string",
            )
    if whole:
        return end
    if end == len(data):
        return SyntaxProblem("truncated", end, "string")
    c = data[end]
    if c == 0x5C:  # a backslash the string's pattern did not take: a bad escape, or one cut short
        if len(data) - end < 6 and data[end + 1 : end + 2] in (b"u", b""):
            return SyntaxProblem("truncated", len(data), "string")
        return SyntaxProblem(
            "malformed",
            end,
            f"invalid escape {_shown(data, end, 6 if data[end + 1 : end + 2] == b'u' else 2)} in a string",
        )
    return SyntaxProblem("malformed", end, f"control character U+{c:04X} in a string (it must be written as an escape)")


def _unpaired_surrogate(token: bytes) -> int | None:
    """Offset in ``token`` of a ``\\uD800``–``\\uDFFF`` escape that is not half of a high-low pair, if any."""
    expect_low_at = -1
    for escape in _ESCAPE.finditer(token):
        hex_digits = escape.group(1)
        unit = int(hex_digits, 16) if hex_digits else -1
        if expect_low_at >= 0:
            if escape.start() != expect_low_at or not 0xDC00 <= unit <= 0xDFFF:
                return token.rfind(b"\\", 0, expect_low_at)
            expect_low_at = -1
            continue
        if 0xD800 <= unit <= 0xDBFF:
            expect_low_at = escape.end()
        elif 0xDC00 <= unit <= 0xDFFF:
            return escape.start()
    if expect_low_at >= 0:
        return token.rfind(b"\\", 0, expect_low_at)
    return None


def _unexpected(data: bytes, pos: int, expected: str) -> SyntaxProblem:
    if pos >= len(data):
        return SyntaxProblem("truncated", len(data), "number")
    char = _char_at(data, pos)
    if char is None:
        return SyntaxProblem("utf8", pos)
    shown = f"'{char}'" if char.isprintable() else f"U+{ord(char):04X}"
    return SyntaxProblem("malformed", pos, f"unexpected character {shown} where {expected} was expected")


def _char_at(data: bytes, pos: int) -> str | None:
    """The character whose UTF-8 encoding starts at ``pos``; None if the bytes there are not UTF-8."""
    for width in range(1, 5):
        try:
            return data[pos : pos + width].decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.reason != "unexpected end of data" or pos + width >= len(data):
                return None
    return None


def _shown(data: bytes, pos: int, width: int) -> str:
    return data[pos : pos + width].decode("ascii", "replace")


def line_and_column(data: bytes, pos: int) -> tuple[int, int]:
    """1-based line and column (in characters, as an editor counts them) of byte ``pos``."""
    line_start = data.rfind(b"\n", 0, pos) + 1
    column = len(data[line_start:pos].decode("utf-8", "replace")) + 1
    return data.count(b"\n", 0, pos) + 1, column
