/** SVG helpers shared by the widgets that mirror Python's SVG renderers element for element. */

export const SVG_NS = "http://www.w3.org/2000/svg";

export type Attrs = Record<string, string | number>;

/** Python's `_n`: one decimal (round half to even on exact ties, as Python's format does), no ".0". */
export function num(v: number): string {
  const a = Math.abs(v);
  let s: string;
  if (Number.isInteger(a * 4) && !Number.isInteger(a * 2)) {
    const tenths = a % 1 === 0.25 ? Math.floor(a * 10) : Math.ceil(a * 10); // x.25 -> x.2, x.75 -> x.8
    s = `${Math.floor(tenths / 10)}.${tenths % 10}`;
  } else {
    s = a.toFixed(1);
  }
  if (v < 0 && s !== "0.0") s = `-${s}`;
  return s.endsWith(".0") ? s.slice(0, -2) : s;
}

/** Create `<tag attrs>text</tag>` in the SVG namespace and append it to `parent`. */
export function el<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs, parent: Element, text?: string): SVGElementTagNameMap[K] {
  const node = parent.ownerDocument.createElementNS(SVG_NS, tag);
  for (const k in attrs) node.setAttribute(k, String(attrs[k]));
  if (text !== undefined) node.textContent = text;
  parent.appendChild(node);
  return node;
}

/** A new `<svg class=…>` whose viewBox is the whole `w`×`h` picture, styled by `style` (Python's root attributes). */
export function svgRoot(doc: Document, w: number, h: number, className: string, style: string): SVGSVGElement {
  const root = doc.createElementNS(SVG_NS, "svg");
  const attrs: Attrs = { viewBox: `0 0 ${num(w)} ${num(h)}`, class: className, "font-family": "monospace", "font-size": 11 };
  for (const k in attrs) root.setAttribute(k, String(attrs[k]));
  el("style", {}, root, style);
  return root;
}
