// The widgets' colours come from the same table as Python's, turned into the same CSS (golden copy).
import { describe, expect, it } from "vitest";
import golden from "../../tests/fixtures/theme/theme.txt?raw";
import { themeCss, themeVar } from "../src/common/theme";

describe("theme", () => {
  it("generates exactly the CSS Python's render/theme.py does", () => {
    expect(themeCss() + "\n").toBe(golden);
  });
  it("names colours as CSS variables and rejects unknown names", () => {
    expect(themeVar("fg")).toBe("var(--tlw-fg)");
    expect(() => themeVar("fgg")).toThrow(/no theme colour/);
  });
});
