/** Colours for every widget, from the same table as Python's render/theme.py (theme.json): JupyterLab's
 * variables inside Lab, light/dark values outside it. Use `var(--tlw-NAME)` via `themeVar`. */
import table from "../../../torchlens_widgets/render/theme.json";

interface Token { jp?: string; light: string; dark: string; text?: boolean }

const TOKENS = table.tokens as Record<string, Token>;

/** `var(--tlw-name)`; an unknown name throws instead of drawing an invisible colour. */
export function themeVar(name: string): string {
  if (!(name in TOKENS)) throw new Error(`no theme colour ${JSON.stringify(name)}`);
  return `var(--tlw-${name})`;
}

function block(scheme: "light" | "dark"): string {
  return Object.entries(TOKENS)
    .map(([name, t]) => (t.jp ? `--tlw-${name}:var(${t.jp},${t[scheme]})` : `--tlw-${name}:${t[scheme]}`))
    .join(";");
}

/** The custom properties for `.tlw-theme` (identical to Python's theme_css()). */
export function themeCss(): string {
  const light = block("light");
  const dark = block("dark");
  return (
    `.tlw-theme{${light};color:var(--tlw-fg)}` +
    `@media (prefers-color-scheme:dark){.tlw-theme{${dark}}}` +
    `[data-jp-theme-light=true] .tlw-theme{${light}}` +
    `[data-jp-theme-light=false] .tlw-theme{${dark}}`
  );
}
