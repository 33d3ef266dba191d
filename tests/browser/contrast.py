"""Contrast of every piece of text in a rendered widget, measured in the page, and switching Lab's theme.

For each visible text element (SVG <text>, or an HTML element with its own text) the foreground is its
computed `fill` (SVG) or `color` (HTML), blended by its alpha and opacity; the background is, for SVG text, the first opaque thing under its centre (`elementsFromPoint`: a
shape's fill or an HTML element's background-color), for HTML text the nearest ancestor's opaque
background-color, else the page's. Text scrolled out of view is skipped.
"""

from __future__ import annotations

from typing import Any

# Returns [{text, fg, bg, ratio, size}] for each text element under `rootSelector` (first match).
JS_TEXT_CONTRAST = r"""(rootSelector) => {
  const root = document.querySelector(rootSelector);
  if (!root) return null;
  const parse = (c) => {
    const m = /rgba?\(([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)(?:[ ,/]+([\d.]+))?\)/.exec(c || '');
    return m ? [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]] : null;
  };
  const lum = (rgb) => {
    const l = rgb.slice(0, 3).map((v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  };
  const isSvg = (e) => e instanceof SVGElement;
  const paintOf = (e) => {
    const cs = getComputedStyle(e);
    if (isSvg(e)) {
      if (!(e instanceof SVGGeometryElement) || e.tagName === 'line' || e.tagName === 'polyline' || e.tagName === 'path' && cs.fill === 'none') return null;
      const c = parse(cs.fill);
      const op = parseFloat(cs.fillOpacity) * parseFloat(cs.opacity);
      return c && c[3] * op > 0.6 ? c : null;
    }
    const c = parse(cs.backgroundColor);
    return c && c[3] > 0.6 ? c : null;
  };
  const bodyBg = parse(getComputedStyle(document.body).backgroundColor) || [255, 255, 255, 1];
  const texts = [];
  for (const e of root.querySelectorAll('*')) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const cs = getComputedStyle(e);
    if (cs.visibility === 'hidden' || cs.display === 'none' || parseFloat(cs.opacity) === 0) continue;
    const r = e.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) continue;
    if (e.tagName === 'style' || e.tagName === 'title' || e.closest('title')) continue;
    const fg = parse(isSvg(e) ? cs.fill : cs.color);
    if (!fg) continue;
    const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
    // scrolled out of a scrolling box (or the window): not on screen, nothing to measure against
    let hidden = cx < 0 || cy < 0 || cx > innerWidth || cy > innerHeight;
    for (let a = e.parentElement; a && a !== document.body && !hidden; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
      const b = a.getBoundingClientRect();
      hidden = cx < b.left || cx > b.right || cy < b.top || cy > b.bottom;
    }
    if (hidden) continue;
    let bg = null;
    if (isSvg(e)) {
      for (const under of document.elementsFromPoint(cx, cy)) {
        if (under === e || e.contains(under)) continue;
        bg = paintOf(under);
        if (bg) break;
      }
    } else {  // HTML: the nearest ancestor (or itself) with an opaque background
      for (let a = e; a && !bg; a = a.parentElement) bg = paintOf(a);
    }
    bg = bg || bodyBg;
    const alpha = fg[3] * parseFloat(cs.opacity);  // a translucent text colour blends into what is under it
    const seen = [0, 1, 2].map((k) => fg[k] * alpha + bg[k] * (1 - alpha));
    const [a, b] = [lum(seen), lum(bg)].sort((x, y) => y - x);
    texts.push({ text: e.textContent.trim().slice(0, 40), fg: isSvg(e) ? cs.fill : cs.color, bg: `rgb(${bg.slice(0, 3).join(',')})`,
                 ratio: Math.round(((a + 0.05) / (b + 0.05)) * 100) / 100, size: parseFloat(cs.fontSize) * (r.height / (e.getBBox ? Math.max(e.getBBox().height, 1e-6) : r.height)) });
  }
  return texts;
}"""


def text_contrast(page: Any, root_selector: str) -> list[dict[str, Any]]:
    """Measured contrast (and on-screen font size in px) of each text in the first `root_selector`."""
    found = page.evaluate(JS_TEXT_CONTRAST, root_selector)
    assert found is not None, f"nothing matches {root_selector!r} on the page"
    return found


def low_contrast(texts: list[dict[str, Any]], minimum: float = 4.5) -> list[dict[str, Any]]:
    """The texts under `minimum` (WCAG AA for normal text is 4.5:1)."""
    return [t for t in texts if t["ratio"] < minimum]


def set_lab_theme(page: Any, theme: str) -> None:
    """Switch JupyterLab to "JupyterLab Dark" / "JupyterLab Light" and wait until the page says so."""
    page.evaluate("(t) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", theme)
    light = "true" if "Light" in theme else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=30_000)
    page.wait_for_timeout(300)  # the theme's stylesheet applies after the attribute flips
