"""What the loaders share about their input: telling XML text from a file path."""

from __future__ import annotations

__all__ = ["BOM", "is_xml_text", "strip_bom"]

#: the byte-order mark as a character (editors on Windows start UTF-8 files with it)
BOM = "\ufeff"


def strip_bom(text: str) -> str:
    """``text`` without a leading byte-order mark."""
    return text[1:] if text.startswith(BOM) else text


def is_xml_text(source: str) -> bool:
    """Whether a `str` argument is XML text rather than a path: its first character,
    after a byte-order mark and blanks, is ``<`` (no file name starts with ``<``
    after blanks in practice, and a path never holds a byte-order mark).

    Example:
        >>> is_xml_text("\\ufeff  <robot/>"), is_xml_text("robots/arm.urdf")
        (True, False)
    """
    return strip_bom(source).lstrip().startswith("<")
