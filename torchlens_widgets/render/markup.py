"""Text into SVG/HTML markup: escaped, and with characters XML cannot hold shown instead of breaking it.

Tensor, module and span names come from users and traces: a name holding a control character (a stray
``\\x00`` or ``\\x1b`` from a terminal colour code) would make the SVG invalid and the picture vanish.
"""

from __future__ import annotations

import html
import re

__all__ = ["esc", "esc_ticks"]

# XML 1.0 forbids these (tab, newline and carriage return are allowed); lone surrogates cannot be encoded.
_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def esc(s: object) -> str:
    """Escape `s` for an SVG/HTML text node or attribute; unrepresentable characters become `\\xNN`."""
    text = _INVALID.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        str(s))
    return html.escape(text, quote=True)


_TICKS = re.compile(r"`([^`\n]+)`")


def esc_ticks(s: object) -> str:
    """`esc`, with `backticked` spans (how torch's own messages and hints quote code) set as <code>, not raw ticks."""
    return _TICKS.sub(lambda m: f"<code>{m.group(1)}</code>", esc(s))
