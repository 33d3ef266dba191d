"""Static HTML that survives a sanitizer: what a saved notebook shows when JupyterLab exports it with
"Sanitize HTML output" ticked (nbconvert's `clean_html`, bleach) or a kernel-less viewer cleans it.

nbconvert's sanitizer keeps only a, abbr, acronym, b, blockquote, code, em, i, li, ol, strong, ul, div,
pre, span, table, tr and td, and of attributes only `class` and `id` (and href/title on links); any other
tag is escaped and shown as text (so a `<style>` block becomes a wall of CSS and an inline `<svg>` a wall
of markup). `portable_html` rewrites a renderer's themed HTML into those tags only, with its stylesheet
inlined as `style=` attributes: unsanitized it looks as before; sanitized, the styles go but the
structure (tables, rows, labels, glyphs) still reads. Colours become JupyterLab variables with a light
fallback, and tints are translucent so text on them reads in the dark theme too.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from .markup import esc
from .theme import TOKENS

__all__ = ["SAFE_TAGS", "STATIC_NOTE", "portable_html", "portable_svg", "static_caption", "token_value"]

#: Tags nbconvert's `clean_html` keeps (bleach's defaults plus div, pre, code, span, table, tr, td).
SAFE_TAGS = frozenset({"a", "abbr", "acronym", "b", "blockquote", "code", "em", "i", "li", "ol", "strong", "ul",
                       "div", "pre", "span", "table", "tr", "td"})
STATIC_NOTE = "static picture: run the cell to interact"
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "wbr", "col"})
_UNWRAP = frozenset({"thead", "tbody", "tfoot", "colgroup"})
_SVG_SHAPES = frozenset({"rect", "line", "text", "title", "g", "tspan", "circle", "path", "polyline", "polygon"})

# Lab variables for the tokens theme.json gives no `jp` name (its light value is the fallback).
_JP_EXTRA = {"fg2": "--jp-content-font-color2", "warn": "--jp-warn-color0", "bad": "--jp-error-color0",
             "good": "--jp-success-color0", "accent": "--jp-brand-color1"}


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def token_value(name: str) -> str:
    """A theme colour as an inline-style value: Lab's variable with the light value as fallback; a tint is
    its category colour made translucent, so it reads as a tint on a light and on a dark background."""
    t = TOKENS[name]
    if name.startswith("tint") and f"cat{name[4:]}" in TOKENS:
        return _rgba(TOKENS[f"cat{name[4:]}"]["light"], 0.28)
    jp = t.get("jp") or _JP_EXTRA.get(name)
    return f"var({jp},{t['light']})" if jp else str(t["light"])


_TLW_VAR = re.compile(r"var\(--tlw-([a-z0-9]+)\)")


def _resolve(value: str) -> str:
    return _TLW_VAR.sub(lambda m: token_value(m.group(1)) if m.group(1) in TOKENS else "inherit", value)


# ---- a small tree ---------------------------------------------------------------------------------------------

class _Node:
    __slots__ = ("tag", "attrs", "children", "parent", "style")

    def __init__(self, tag: str, attrs: dict[str, str], parent: _Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[_Node | str] = []
        self.style: dict[str, str] = {}

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Node("#root", {}, None)
        self.cur = self.root
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "style":
            self._in_style = True
            return
        node = _Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in _VOID:
            self.cur = node

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.cur.children.append(_Node(tag, {k: v or "" for k, v in attrs}, self.cur))

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False
            return
        node: _Node | None = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)
        else:
            self.cur.children.append(data)


# ---- the stylesheet, inlined ----------------------------------------------------------------------------------

_Compound = tuple[str, frozenset[str]]  # (tag or "", classes)
_Rule = tuple[tuple[int, int, int], list[_Compound], list[tuple[str, str]]]


def _strip_at_rules(css: str) -> str:
    out, i = [], 0
    while i < len(css):
        j = css.find("@", i)
        if j < 0:
            out.append(css[i:])
            break
        out.append(css[i:j])
        k = css.find("{", j)
        depth, m = 1, k + 1
        while m < len(css) and depth:
            depth += {"{": 1, "}": -1}.get(css[m], 0)
            m += 1
        i = m
    return "".join(out)


def _parse_css(css: str) -> list[_Rule]:
    rules: list[_Rule] = []
    for order, m in enumerate(re.finditer(r"([^{}]+)\{([^{}]*)\}", _strip_at_rules(css))):
        decls = []
        for d in m.group(2).split(";"):
            if ":" in d:
                k, v = d.split(":", 1)
                if not k.strip().startswith("--"):
                    decls.append((k.strip(), v.strip()))
        for sel in m.group(1).split(","):
            sel = sel.strip()
            if not sel or any(c in sel for c in ":[>+~*"):
                continue  # hover, attribute and sibling rules: not needed for a static picture
            parts = []
            for comp in sel.split():
                tag, *classes = comp.split(".")
                parts.append((tag, frozenset(classes)))
            spec = (sum(len(c) for _, c in parts), sum(bool(t) for t, _ in parts), order)
            rules.append((spec, parts, decls))
    return rules


def _matches(node: _Node, comp: _Compound) -> bool:
    tag, classes = comp
    return (not tag or node.tag == tag) and classes <= node.classes


def _selector_matches(node: _Node, parts: list[_Compound]) -> bool:
    if not _matches(node, parts[-1]):
        return False
    anc = node.parent
    for comp in reversed(parts[:-1]):
        while anc is not None and not _matches(anc, comp):
            anc = anc.parent
        if anc is None:
            return False
        anc = anc.parent
    return True


def _inline(node: _Node, rules: list[_Rule]) -> dict[str, str]:
    style: dict[str, str] = {}
    for _spec, _parts, decls in sorted((r for r in rules if _selector_matches(node, r[1])), key=lambda r: r[0]):
        style.update(decls)
    for d in node.attrs.get("style", "").split(";"):
        if ":" in d:
            k, v = d.split(":", 1)
            style[k.strip()] = v.strip()
    # nothing in a static picture responds to the pointer, so nothing says it would
    return {k: _resolve(v) for k, v in style.items() if k != "cursor"}


# not white-space: on each inline-block item it keeps the item whole, on their parent it stops the line breaking
# between them (the program grid's legend ran off the edge of a narrow page)
_INHERITED = ("color", "font", "font-family", "font-size", "line-height")
_USES_COLOUR = re.compile(r"^(border|outline|box-shadow|text-decoration|column-rule)")


def _compute(node: _Node, rules: list[_Rule], in_svg: bool = False) -> None:
    """Each element's inlined style; then an inherited property every child element sets alike moves up to
    their parent (one declaration instead of one per cell: saved notebooks stay small)."""
    in_svg = in_svg or node.tag == "svg"
    node.style = _inline(node, rules)
    kids = [c for c in node.children if isinstance(c, _Node)]
    for kid in kids:
        _compute(kid, rules, in_svg)
    if in_svg or len(kids) < 2 or any(isinstance(c, str) and c.strip() for c in node.children):
        return
    if any(_USES_COLOUR.match(k) for k in node.style):
        return
    for prop in _INHERITED:
        values = {kid.style.get(prop, "") for kid in kids}
        if prop not in node.style and len(values) == 1 and "" not in values:
            node.style[prop] = values.pop()
            for kid in kids:
                del kid.style[prop]


# ---- SVG shapes as positioned boxes -----------------------------------------------------------------------------

def _num(v: str | None, default: float = 0.0) -> float:
    try:
        return float(str(v).replace("px", ""))
    except (TypeError, ValueError):
        return default


def _svg_box(node: _Node, style: dict[str, str]) -> tuple[str, dict[str, str]]:
    """An SVG element as a div: rect → a box, line → a rule, text → a positioned label, svg → the canvas."""
    a = node.attrs
    out: dict[str, str] = {}
    fill = style.pop("fill", a.get("fill", ""))
    stroke = style.pop("stroke", a.get("stroke", ""))
    dashed = "stroke-dasharray" in style or "stroke-dasharray" in a
    for k in ("stroke-width", "stroke-dasharray", "text-anchor", "dominant-baseline", "pointer-events"):
        style.pop(k, None)
    if node.tag == "svg":
        out.update({"position": "relative", "width": f"{_num(a.get('width'))}px",
                    "height": f"{_num(a.get('height'))}px", "overflow": "hidden", "flex": "none"})
    elif node.tag == "rect":
        out.update({"position": "absolute", "box-sizing": "border-box", "left": f"{_num(a.get('x'))}px",
                    "top": f"{_num(a.get('y'))}px", "width": f"{_num(a.get('width'))}px",
                    "height": f"{_num(a.get('height'))}px"})
        if fill and fill != "none":
            out["background"] = fill
        if stroke and stroke != "none":
            out["border"] = f"1px {'dashed' if dashed else 'solid'} {stroke}"
    elif node.tag == "line":
        x1, y1, x2, y2 = (_num(a.get(k)) for k in ("x1", "y1", "x2", "y2"))
        out.update({"position": "absolute", "left": f"{min(x1, x2)}px", "top": f"{min(y1, y2)}px",
                    "width": f"{max(abs(x2 - x1), 1)}px", "height": f"{max(abs(y2 - y1), 1)}px",
                    "background": stroke or "currentColor"})
    elif node.tag == "text":
        size = 11.0
        shift = {"middle": "translateX(-50%)", "end": "translateX(-100%)"}.get(a.get("text-anchor", ""), "")
        out.update({"position": "absolute", "left": f"{_num(a.get('x'))}px", "top": f"{_num(a.get('y')) - size}px",
                    "white-space": "nowrap", "line-height": f"{size + 2}px", "font-size": f"{size}px"})
        if shift:
            out["transform"] = shift
        if fill:
            out["color"] = fill
    out.update({k: v for k, v in style.items() if k in ("opacity", "font-family", "font-size", "font")})
    return "div", out


# ---- writing it back ---------------------------------------------------------------------------------------------

_KEEP_ATTRS = ("class", "id", "title", "href")
# between cells: not drawn while styled (whitespace between CSS table cells is ignored), a column rule once a
# sanitizer drops the styles
_SEP = ' <i style="display:none">|</i> '


def _text_of(node: _Node) -> str:
    return "".join(c if isinstance(c, str) else _text_of(c) for c in node.children)


def _keep_spaces(text: str) -> str:
    """Indentation and runs of spaces as no-break spaces: CSS `white-space:pre` goes with the styles, these stay."""
    return re.sub(r"(?<= ) |^ | (?= )", "\xa0", text, flags=re.M)


def _write(node: _Node, rules: list[_Rule], out: list[str], in_svg: bool = False, spaces: bool = False) -> None:
    tag = node.tag
    if tag == "title" and in_svg:
        return  # became the parent's title attribute
    style = dict(node.style)
    attrs = {k: v for k, v in node.attrs.items() if k in _KEEP_ATTRS or k.startswith("data-")}
    bold = False
    svg = in_svg or tag == "svg"
    if svg and tag in _SVG_SHAPES | {"svg"}:
        title = next((c for c in node.children if isinstance(c, _Node) and c.tag == "title"), None)
        if title is not None:
            attrs["title"] = _text_of(title)
        tag, style = _svg_box(node, style)
    elif tag == "table":
        tag = "div"
        style = {"display": "table", **style}
    elif tag == "tr":
        tag = "div"
        style = {"display": "table-row", **style}
    elif tag in ("td", "th"):
        # a sanitizer escapes the <tbody> its parser adds to any table (shown as text), so no tables: CSS
        # table cells, with a rule between them that shows only once the styles are gone
        bold = tag == "th"
        style = {"display": "table-cell", **style}
        if bold:
            style.setdefault("font-weight", "600")
        tag = "span"
        if any(isinstance(s, _Node) and s.tag in ("td", "th") for s in node.parent.children[:node.parent.children.index(node)]
               ) if node.parent is not None else False:
            out.append(_SEP)
    elif tag in ("details", "p", "figure", "section", "header", "footer", "nav", "main", "article", "caption"):
        tag = "div"
    elif tag == "summary" or re.fullmatch(r"h[1-6]", tag):
        tag, bold = "div", True
    elif tag == "br":
        out.append("<div></div>")
        return
    elif tag in _VOID:
        return
    elif tag not in SAFE_TAGS:
        tag = "span"
    if style:
        attrs["style"] = ";".join(f"{k}:{v}" for k, v in style.items())
    out.append(f"<{tag}" + "".join(f' {k}="{esc(v)}"' for k, v in attrs.items()) + ">")
    if bold:
        out.append("<b>")
    ws = node.style.get("white-space", "")
    spaces = (spaces or ws.startswith(("pre", "break-spaces"))) and node.tag != "pre" and ws != "normal"
    flex = node.style.get("display", "").endswith("flex")
    for i, child in enumerate(node.children):
        if isinstance(child, str):
            if child.strip() or not svg:
                out.append(esc(_keep_spaces(child) if spaces and child.strip() else child))
        elif child.tag in _UNWRAP:
            for grand in child.children:
                if isinstance(grand, _Node):
                    _write(grand, rules, out, svg, spaces)
        else:
            _write(child, rules, out, svg, spaces)
            after = node.children[i + 1:i + 2]
            if not svg and (_is_swatch(child, after) or flex and after and isinstance(after[0], _Node)):
                out.append(" ")  # keeps words apart once the styles are gone (ignored between flex items)
    if bold:
        out.append("</b>")
    out.append(f"</{tag}>")


_INLINE = frozenset({"span", "i", "b", "code", "em", "strong", "a", "abbr"})


def _is_swatch(node: _Node, after: list[_Node | str]) -> bool:
    """An empty inline element (a colour swatch) or an inline block, right against the next thing: a space
    keeps the words either side apart once a sanitizer drops the styles (in the styled view it is at most a
    space's width, none where the font size is 0)."""
    if not after or node.tag not in _INLINE:
        return False
    nxt = after[0]
    if isinstance(nxt, str):
        return not nxt[:1].isspace() and not _text_of(node).strip()
    if "none" in (node.style.get("display"), nxt.style.get("display")):
        return False  # a marker shown only unstyled says where its own spaces go
    return nxt.tag in _INLINE and (not _text_of(node).strip() or node.style.get("display") == "inline-block")


def portable_html(html: str, caption: str | None = None) -> str:
    """`html` with its `<style>` blocks inlined and every tag one a sanitizer keeps (see the module doc);
    `caption`, when given, is a muted line at the bottom (the static picture says it is static)."""
    b = _Builder()
    b.feed(html)
    b.close()
    rules = _parse_css("".join(b.styles))
    out: list[str] = []
    for child in b.root.children:
        if isinstance(child, str):
            out.append(esc(child))
        else:
            _compute(child, rules)
            _write(child, rules, out)
    if caption:
        out.append(static_caption(caption))
    return "".join(out)


def static_caption(text: str = STATIC_NOTE) -> str:
    """A short muted line under a static picture (never in the live view)."""
    return (f'<div class="tlw-static-note" style="margin:4px 0 0;font:italic 11px var(--jp-ui-font-family,sans-serif);'
            f'color:{token_value("fg2")}"><i>{esc(text)}</i></div>')


def _fmt(v: float) -> str:
    return str(int(v)) if v == int(v) else f"{v:g}"


_NO_POINTER = "<style>.tlw-static,.tlw-static *{cursor:default}</style>"


def portable_svg(svg: str, caption: str = STATIC_NOTE, size: int = 11) -> str:
    """An SVG picture with a caption line added at its bottom (the height and viewBox grow to hold it), and
    no pointer cursor over parts that respond to clicks only in the live view. SVG is exported as an
    `<img>` (a data: URI), which no sanitizer touches, so the rest stays as drawn."""
    m = re.match(r"<svg\b[^>]*>", svg)
    if not m:
        return svg
    head = m.group(0)
    hm = re.search(r'\bheight="([\d.]+)"', head)
    wm = re.search(r'\bwidth="([\d.]+)"', head)
    vb = re.search(r'\bviewBox="([-\d.]+) ([-\d.]+) ([\d.]+) ([\d.]+)"', head)
    if not hm or not wm:
        return svg
    h, w = float(hm.group(1)), float(wm.group(1))
    extra = size + 8
    need = 8 + 0.62 * size * len(caption)  # a narrow picture widens to hold its caption
    new_w = max(w, need)
    new_head = head.replace(hm.group(0), f'height="{_fmt(h + extra)}"', 1).replace(
        wm.group(0), f'width="{_fmt(round(new_w))}"', 1)
    x, y, scale = 4.0, h + size + 2, 1.0
    if vb:
        x0, y0, vw, vh = (float(v) for v in vb.groups())
        scale = vh / h if h else 1.0
        sx = vw / w if w else 1.0
        new_vw = vw + (round(new_w) - w) * sx
        new_head = new_head.replace(vb.group(0), f'viewBox="{_fmt(x0)} {_fmt(y0)} {_fmt(new_vw)} '
                                                 f'{_fmt(vh + extra * scale)}"')
        y, x = y0 + vh + (size + 2) * scale, x0 + 4 * sx
    if 'class="' in new_head:  # nothing responds to the pointer in a static picture (inlined after a restart)
        new_head = new_head.replace('class="', 'class="tlw-static ', 1) + _NO_POINTER
    note = (f'<text class="tlw-static-note" x="{_fmt(x)}" y="{_fmt(y)}" font-size="{_fmt(size * scale)}" '
            f'font-style="italic" text-anchor="start" style="fill:var(--tlw-fg2,#6b6b6b);text-anchor:start">'
            f'{esc(caption)}</text>')
    end = svg.rfind("</svg>")
    return new_head + svg[m.end():end] + note + svg[end:]
