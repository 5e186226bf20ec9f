"""The dashboard's stylesheet: every text colour it sets reads at 4.5:1 or more against every
background text can sit on (WCAG 2's contrast ratio for normal text, level AA), computed from
the colours in ``dashboard/static/style.css`` itself, custom properties resolved."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STYLE = Path(__file__).resolve().parent.parent / "dashboard" / "static" / "style.css"
AA = 4.5
# Rules whose boxes hold no text (the GPU cards are empty, aria-hidden boxes).
NO_TEXT = frozenset({".card", ".card.used"})

_RULE = re.compile(r"([^{}]+)\{([^}]*)\}")
_HEX = re.compile(r"#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})\b")


def _rules(css: str) -> list[tuple[tuple[str, ...], dict[str, str]]]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    out = []
    for selectors, body in _RULE.findall(css):
        decls = {}
        for decl in body.split(";"):
            name, colon, value = decl.partition(":")
            if colon:
                decls[name.strip()] = value.strip()
        out.append((tuple(s.strip() for s in selectors.split(",")), decls))
    return out


def _resolve(value: str, props: dict[str, str]) -> str:
    return re.sub(r"var\((--[\w-]+)\)", lambda m: props[m.group(1)], value)


def _rgb(value: str) -> tuple[float, float, float]:
    match = _HEX.search(value)
    assert match is not None, f"not a #hex colour: {value!r}"
    digits = match.group(1)
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    r, g, b = (int(digits[i : i + 2], 16) / 255 for i in (0, 2, 4))
    return r, g, b


def luminance(colour: str) -> float:
    """WCAG 2's relative luminance of a #hex colour."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _colours() -> tuple[dict[str, str], dict[str, str]]:
    """(text colours, backgrounds), each by the selector that sets it."""
    rules = _rules(STYLE.read_text())
    props = {k: v for sel, decls in rules if ":root" in sel for k, v in decls.items()}
    texts: dict[str, str] = {}
    backgrounds: dict[str, str] = {}
    for selectors, decls in rules:
        where = ", ".join(selectors)
        if "color" in decls:
            texts[where] = _resolve(decls["color"], props)
        for key in ("background", "background-color"):
            if key in decls and not set(selectors) <= NO_TEXT:
                backgrounds[where] = _resolve(decls[key], props)
    return texts, backgrounds


def test_the_formula_is_wcags() -> None:
    assert contrast("#000", "#fff") == pytest.approx(21.0)
    assert contrast("#fff", "#fff") == pytest.approx(1.0)
    assert contrast("#767676", "#fff") == pytest.approx(4.54, abs=0.01)  # the known AA grey
    assert contrast("#777777", "#fff") < AA


def test_every_text_colour_reads_on_every_background() -> None:
    texts, backgrounds = _colours()
    assert len(texts) >= 8
    assert len(backgrounds) >= 3
    assert "body" in backgrounds
    weak = [
        f"{text_sel} ({fg}) on {bg_sel} ({bg}): {contrast(fg, bg):.2f}:1"
        for text_sel, fg in texts.items()
        for bg_sel, bg in backgrounds.items()
        if contrast(fg, bg) < AA
    ]
    assert weak == []
