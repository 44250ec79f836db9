"""``baton.text.terminal_safe``: what a tool result may carry (issue 19, item 6).

Escape sequences are removed whole, other controls become U+FFFD, ``\\n`` and ``\\t`` stay, CRLF
becomes LF, and nothing else changes. The properties every surface relies on: the output holds
no control character but ``\\n`` and ``\\t``, any piece of it is left as it is (so a page of safe
text is safe, and paging it is exact), and it is never longer in UTF-16 code units.
"""

from __future__ import annotations

import random

import pytest

from baton.paging import utf16_len
from baton.text import terminal_safe, terminal_safe_json

R = "\ufffd"
CONTROLS = {chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}


@pytest.mark.parametrize(
    ("hostile", "safe"),
    [
        ("a\x1b]52;c;cHduZWQ=\x07b", "ab"),  # OSC 52 clipboard write, BEL-terminated
        ("a\x1b]0;PWNED\x1b\\b", "ab"),  # window title, ST-terminated
        ("a\x1b[2J\x1b[?1000h\x1b[1;31mb\x1b[0m", "ab"),  # clear, mouse mode, colours (CSI)
        ("\x1b]8;;https://x.invalid\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC 8 hyperlink
        ("a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
        ("a\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\b", "ab"),  # APC, PM, SOS
        ("a\x1b(B\x1b7\x1b8\x1bc\x1bM\x1b=b", "ab"),  # charset, cursor save/restore, reset
        ("a\x9b2Jb\x9d0;t\x9cc", "abc"),  # 8-bit CSI and OSC with 8-bit ST
        ("a\x07b\x08c\x00d\x7fe\x85f", f"a{R}b{R}c{R}d{R}e{R}f"),  # BEL, BS, NUL, DEL, NEL
        ("one\r\ntwo\rthree\n", f"one\ntwo{R}three\n"),  # CRLF kept as LF; a lone CR is not
        ("tab\there\n", "tab\there\n"),
        ("a\x1b]0;unterminated", f"a{R}]0;unterminated"),  # not a sequence without its end
        ("a\x1b[12", f"a{R}[12"),  # an unfinished CSI
        ("end\x1b", f"end{R}"),
        ("a\ud83d\ude00b\udc00", f"a😀b{R}"),  # halves joined, a lone one replaced
        ("é中😀 plain", "é中😀 plain"),
    ],
)
def test_sequences_are_removed_and_controls_replaced(hostile: str, safe: str) -> None:
    assert terminal_safe(hostile) == safe


def _hostile(rng: random.Random) -> str:
    pieces = [
        "\x1b]52;c;YQ==\x07", "\x1b]0;t\x1b\\", "\x1b[2J", "\x1b[?1000h", "\x1b", "\x1b[",
        "\x9b", "\x9d", "\x9c", "\r", "\n", "\r\n", "\t", "\x07", "\x00", "\x7f", "\x85",
        "\ud83d", "\ude00", "😀", "é", "中", "a", "b", "[", "]", "\\", ";", " ",
    ]  # fmt: skip
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))


def test_output_is_printable_shorter_and_safe_in_every_piece() -> None:
    rng = random.Random(19)
    for _ in range(2000):
        text = _hostile(rng)
        safe = terminal_safe(text)
        assert not CONTROLS & set(safe), repr(safe)
        assert utf16_len(safe) <= utf16_len(text)
        safe.encode("utf-8")  # encodable: no lone surrogate is left
        for start in range(len(safe)):
            piece = safe[start : start + rng.randint(1, 8)]
            assert terminal_safe(piece) == piece


def test_safe_json_is_returned_as_it_is_and_keys_are_made_safe() -> None:
    clean = {"a": ["x", {"b": 1}], "c": None}
    assert terminal_safe_json(clean) is clean
    dirty = {"k\x1b[1m": ["x\x07", {"b": "\x1b]0;t\x07y"}], "n": 2}
    assert terminal_safe_json(dirty) == {"k": [f"x{R}", {"b": "y"}], "n": 2}
