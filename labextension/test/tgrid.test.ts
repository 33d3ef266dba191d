import { describe, expect, it } from "vitest";
import widget from "../src/tgrid/index";
import {
  asFlat,
  cellStates,
  decodeProgram,
  defaultProgram,
  flatPid,
  MAX_ROWS,
  pidOf,
  pidText,
  programIndex,
  reach,
  runsText,
  tensorWindow,
  windowNotes,
  type TgridModel,
} from "../src/tgrid/model";
import { renderGrid, STYLE } from "../src/tgrid/render";
import { themeVar } from "../src/common/theme";
import { FakeModel } from "./fake_model";
import { bigModel, CASE_NAMES, tgridCase, tgridModel } from "./tgrid_fixture";

function draw(model: TgridModel, program: unknown = null, onSelect?: (pid: number[]) => void) {
  const el = document.createElement("div");
  document.body.appendChild(el);
  const view = renderGrid(el, model, onSelect ? { program, onSelect } : { program });
  return { el, view };
}

function click(node: Element | null): void {
  expect(node).not.toBeNull();
  node!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
}

/** `state` of each drawn element cell of a tensor, by index. */
function drawnStates(el: HTMLElement, tensor: string): Map<number, string> {
  const out = new Map<number, string>();
  for (const c of el.querySelectorAll(`.detail .c[data-tensor="${tensor}"]`)) {
    const cls = [...c.classList].filter((k) => k !== "c" && k !== "dim");
    out.set(Number(c.getAttribute("data-i")), cls[0] ?? "");
  }
  return out;
}

describe("tgrid model helpers", () => {
  it("numbers programs axis 0 fastest, as Python's flat_pid", () => {
    expect(flatPid([1, 2], [2, 3])).toBe(5);
    expect(pidOf(5, [2, 3])).toEqual([1, 2]);
    expect(pidOf(7, [2, 2, 2])).toEqual([1, 1, 1]);
    for (let f = 0; f < 24; f++) expect(flatPid(pidOf(f, [2, 3, 4]), [2, 3, 4])).toBe(f);
    expect(pidText([3])).toBe("(3,)");
    expect(pidText([1, 2])).toBe("(1, 2)");
  });

  it("writes runs as Python's format_runs does", () => {
    expect(runsText([0, 4, 8, 9])).toBe("0..3, 8");
    expect(runsText([])).toBe("-");
  });

  it("takes a trait value only when it names a recorded program; the default is Python's", () => {
    const stencil = tgridModel("stencil");
    expect(asFlat(stencil, [1])).toBe(1);
    for (const bad of [[4], [7], 1, [1, 0], null, ["1"]]) expect(asFlat(stencil, bad)).toBeNull();
    expect(defaultProgram(tgridModel("add"))).toBe(0);
    expect(defaultProgram({ ...tgridModel("add"), programs: [] })).toBeNull();
    const oob = tgridModel("oob");
    oob.programs.reverse(); // the erroring program is the default wherever it is
    expect(defaultProgram(oob)).toBe(0);
  });

  it("colours every element as Python's static picture does, for every program of every case", () => {
    let compared = 0;
    for (const name of CASE_NAMES) {
      const c = tgridCase(name);
      for (const [flat, expected] of Object.entries(c.programs)) {
        const p = decodeProgram(c.model, c.model.programs[programIndex(c.model).get(Number(flat))!]!);
        expect(p.pid).toEqual(expected.pid);
        c.model.tensors.forEach((t, ti) => {
          const want = expected.states[t.name];
          if (!want) {
            expect(reach(p.accesses, ti)).toBeNull();
            return;
          }
          const span = reach(p.accesses, ti);
          const win = tensorWindow(t, span);
          expect(win, `${name} ${flat} ${t.name}`).toEqual(want.window);
          const { cells, before } = cellStates(c.model, p, ti, win);
          expect(before, `${name} ${flat} ${t.name}`).toBe(want.before);
          expect(windowNotes(t, win, span, before)).toEqual(want.notes);
          cells.forEach((state, k) => {
            const i = win.start + k;
            expect(state, `${name} program ${flat} ${t.name}[${i}]`).toBe(want.cells[String(i)] ?? (i < t.numel ? "" : "ghost"));
            compared++;
          });
        });
      }
    }
    expect(compared).toBeGreaterThan(300);
  });

  it("draws a window of a large tensor around what the program reached", () => {
    const big = bigModel();
    const t = big.tensors[0]!;
    const p = decodeProgram(big, big.programs[900]!);
    const win = tensorWindow(t, reach(p.accesses, 0));
    expect(win.start).toBe(900 * 64 - 32);
    expect(win.stop).toBe(901 * 64 + 32);
    const last = decodeProgram(big, big.programs[1023]!);
    const end = tensorWindow(t, reach(last.accesses, 0));
    expect(end.stop).toBe(1024 * 64); // masked lanes past the end are drawn
    expect((end.stop - end.start) / end.cols).toBeLessThanOrEqual(MAX_ROWS);
    expect(tensorWindow({ ...t, numel: 10, shape: [10] }, [0, 12])).toEqual({ cols: 10, start: 0, stop: 12, matrix: false });
    expect(tensorWindow({ ...t, numel: 12, shape: [3, 4] }, [2, 4]).matrix).toBe(true);
  });
});

describe("tgrid view", () => {
  it("takes every colour from the theme: no literal colours, only known theme variables", () => {
    expect(STYLE).not.toMatch(/#[0-9a-fA-F]{3,8}\b|rgba?\(|hsl/);
    const names = [...STYLE.matchAll(/var\(--tlw-([a-z0-9]+)\)/g)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(20);
    for (const n of names) expect(themeVar(n)).toBe(`var(--tlw-${n})`);
    expect(STYLE.replace(/var\(--[a-z0-9-]+(,[^)]*)?\)/g, "")).not.toMatch(/\b(black|white|red|blue|green|gr[ae]y)\b(?!-)/);
  });


  it("draws one cell per program id, marked by what the program did", () => {
    const { el } = draw(tgridModel("add"));
    expect([...el.querySelectorAll(".pids .tlw-pid")].map((c) => c.textContent)).toEqual(["0", "1", "2"]);
    expect(el.querySelector(".tlw-pid.part")!.getAttribute("data-pid")).toBe("2");
    expect(el.querySelector(".tlw-pid.sel")!.getAttribute("data-pid")).toBe("0");
    expect(el.querySelector('.tlw-pid[aria-selected="true"]')!.getAttribute("data-pid")).toBe("0");
    // JupyterLab must leave the arrow keys to the grid (else ArrowDown moves to the next notebook cell)
    expect(el.querySelector(".pids")!.getAttribute("data-lm-suppress-shortcuts")).toBe("true");
    const oob = draw(tgridModel("oob")).el;
    expect(oob.querySelector(".pids .tlw-pid.err")!.getAttribute("data-pid")).toBe("0");
    expect(oob.querySelector(".pids .tlw-pid.idle")!.getAttribute("data-pid")).toBe("1");
    expect(oob.querySelectorAll(".msg.bad")).toHaveLength(1);
    expect(oob.querySelector(".msg.warn")!.textContent).toContain("neither read nor written");
    const stencil = draw(tgridModel("stencil")).el;
    expect([...stencil.querySelectorAll(".pids .tlw-pid.unrec")].map((c) => c.getAttribute("data-pid"))).toEqual(["3", "4"]);
    expect(stencil.textContent).toContain("2 of 5 programs ran but were not recorded");
  });

  it("draws 2-D grids as rows of axis 1 and 3-D grids as one block per axis-2 index", () => {
    const tiles = draw(tgridModel("tiles")).el;
    const rows = [...tiles.querySelectorAll(".pids .prow")].map((r) => [...r.querySelectorAll(".tlw-pid")].map((c) => c.textContent));
    expect(rows).toEqual([["0,0", "1,0"], ["0,1", "1,1"], ["0,2", "1,2"]]);
    const cube = draw(tgridModel("cube")).el;
    expect(cube.querySelectorAll(".pids .panel")).toHaveLength(2);
    expect([...cube.querySelectorAll(".panel")].map((p) => p.firstElementChild!.textContent)).toEqual(["axis 2 = 0", "axis 2 = 1"]);
    expect(cube.querySelector('.panel:nth-child(2) .tlw-pid[data-pid="1,0,1"]')!.textContent).toBe("1,0");
  });

  it("a click shows the program: its elements, masked lanes, and accesses by source line", () => {
    const picked: number[][] = [];
    const { el, view } = draw(tgridModel("add"), null, (pid) => picked.push(pid));
    click(el.querySelector('.tlw-pid[data-pid="2"]'));
    expect(picked).toEqual([[2]]);
    expect(view.selected).toBe(2);
    expect(el.querySelector(".tlw-pid.sel")!.getAttribute("data-pid")).toBe("2");
    const x = drawnStates(el, "x_ptr");
    expect([8, 9].map((i) => x.get(i))).toEqual(["ld", "ld"]);
    expect([10, 11].map((i) => x.get(i))).toEqual(["mk", "mk"]); // masked lanes past the end
    expect(x.get(0)).toBe("oth");
    expect(drawnStates(el, "out_ptr").get(9)).toBe("st");
    expect(el.querySelector('.detail .tensor[data-tensor="y_ptr"]')).toBeNull();
    expect(el.querySelector(".detail")!.textContent).toContain("not touched by this program: y_ptr");
    const rows = [...el.querySelectorAll("tr.tlw-acc")].map((r) => [...r.children].map((td) => td.textContent));
    expect(rows).toEqual([
      ["7", "x = tl.load(x_ptr + offs, mask=mask)", "tl.load", "x_ptr", "8..9", "2 of 4", "2", ""],
      ["8", "tl.store(out_ptr + offs, x, mask=mask)", "tl.store", "out_ptr", "8..9", "2 of 4", "2", ""],
    ]);
    click(el.querySelector('.tlw-pid[data-pid="2"]')); // the same program again: nothing new to say
    expect(picked).toHaveLength(1);
  });

  it("lists several accesses of one line together and out-of-bounds lanes in the error colour", () => {
    const { el } = draw(tgridModel("stencil"), [1]);
    const lines = [...el.querySelectorAll("tr.tlw-acc")].map((r) => [r.getAttribute("data-access"), r.children[0]!.textContent]);
    expect(lines).toEqual([["0", "7"], ["1", ""], ["2", "8"], ["3", ""]]);
    expect(drawnStates(el, "x").get(5)).toBe("both");
    const oob = draw(tgridModel("oob")).el;
    expect(drawnStates(oob, "x_ptr").get(12)).toBe("oob");
    expect(oob.querySelector("tr.tlw-acc td.oob")!.textContent).toBe("10..15");
  });

  it("matches Python's text for each access of each program", () => {
    for (const name of CASE_NAMES) {
      const c = tgridCase(name);
      for (const [flat, expected] of Object.entries(c.programs)) {
        const { el } = draw(c.model, pidOf(Number(flat), c.model.grid));
        const rows = [...el.querySelectorAll("tr.tlw-acc")]
          .sort((a, b) => Number(a.getAttribute("data-access")) - Number(b.getAttribute("data-access")))
          .map((r) => {
            const td = [...r.children].map((d) => d.textContent ?? "");
            const extra = (td[6] ? `, ${td[6]} lane(s) masked` : "") + (td[7] ? `, OUT OF BOUNDS ${td[7]}` : "");
            return `    ${td[2]!.slice(3).padEnd(5)} ${td[3]}[${td[4]}]${extra}`;
          });
        const lines = expected.text.split("\n");
        const at = lines.indexOf(`  program ${pidText(expected.pid)}:`);
        const want = lines.slice(at + 1).filter((l) => l.startsWith("    ") && !l.includes("no loads or stores"));
        expect(rows, `${name} ${flat}`).toEqual(want);
      }
    }
  });

  it("clicking an access picks out its elements; clicking it again lets go", () => {
    const { el } = draw(tgridModel("stencil"), [1]);
    click(el.querySelector('tr.tlw-acc[data-access="2"]'));
    expect(el.querySelector("tr.tlw-acc.on")!.getAttribute("data-access")).toBe("2");
    const lit = [...el.querySelectorAll('.detail .c[data-tensor="x"]:not(.dim)')].map((c) => c.getAttribute("data-i"));
    expect(lit).toEqual(["5", "6"]);
    click(el.querySelector('tr.tlw-acc[data-access="2"]'));
    expect(el.querySelectorAll(".detail .c.dim")).toHaveLength(0);
  });

  it("ignores clicks on programs that were not recorded; arrow keys step through the recorded ones", () => {
    const picked: number[][] = [];
    const { el, view } = draw(tgridModel("stencil"), null, (pid) => picked.push(pid));
    click(el.querySelector('.tlw-pid[data-pid="4"]'));
    expect(picked).toEqual([]);
    const pids = el.querySelector(".pids")!;
    const keys = [0, 1, 2].map(() => new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true, cancelable: true }));
    for (const key of keys) pids.dispatchEvent(key); // the third goes past the last recorded program
    expect(picked).toEqual([[1], [2]]);
    expect(keys.every((k) => k.defaultPrevented)).toBe(true);
    expect(view.select([0])).toBe(true);
    expect(view.select([3])).toBe(false);
  });

  it("draws 1,024 programs as dots with row labels, and at most 32 rows of a large tensor", () => {
    const { el } = draw(bigModel(), [900]);
    expect(el.querySelectorAll(".pids .tlw-pid")).toHaveLength(1024);
    expect(el.querySelector(".pids")!.classList.contains("dots")).toBe(true);
    expect(el.querySelector(".pids .tlw-pid")!.textContent).toBe("");
    expect([...el.querySelectorAll(".pids .rl")].slice(0, 3).map((r) => r.textContent)).toEqual(["0", "32", "64"]);
    expect(el.querySelector(".tlw-pid.part")!.getAttribute("data-pid")).toBe("1023");
    const x = drawnStates(el, "x_ptr");
    expect(x.size).toBe(128);
    expect(x.get(900 * 64)).toBe("ld");
    expect(x.get(900 * 64 - 1)).toBe("oth");
    expect(el.querySelector('.tensor[data-tensor="x_ptr"]')!.textContent).toContain("elements 0..57567 above not drawn");
    expect(el.querySelector('.tensor[data-tensor="x_ptr"]')!.textContent).toContain("elements 57696..65515 below not drawn");
  });
});

describe("tgrid anywidget entry", () => {
  function setup(values: Record<string, unknown> = { model: tgridModel("add"), program: [0] }) {
    const m = new FakeModel(values);
    const el = document.createElement("div");
    const cleanup = widget.render({ model: m, el });
    return { m, el, cleanup };
  }

  it("a click sets and saves the program trait once", () => {
    const { m, el } = setup();
    click(el.querySelector('.tlw-pid[data-pid="1"]'));
    expect(m.sets).toEqual([["program", [1]]]);
    expect(m.saves).toBe(1);
    expect(el.querySelector(".tlw-pid.sel")!.getAttribute("data-pid")).toBe("1");
  });

  it("shows a program set from Python without echoing it", () => {
    const { m, el } = setup();
    m.fromPython("program", [2]);
    expect(el.querySelector(".tlw-pid.sel")!.getAttribute("data-pid")).toBe("2");
    expect(el.querySelectorAll('.detail .c.mk[data-tensor="x_ptr"]')).toHaveLength(2);
    expect(m.saves).toBe(0);
  });

  it("says so instead of failing on an empty model, and redraws on change:model", () => {
    const { m, el } = setup({ model: {}, program: null });
    expect(el.textContent).toContain("no program-grid model");
    m.fromPython("model", tgridModel("tiles"));
    m.fromPython("program", [1, 2]);
    expect(el.querySelector(".tlw-pid.sel")!.getAttribute("data-pid")).toBe("1,2");
  });

  it("the cleanup function removes its listeners and the drawing", () => {
    const { m, el, cleanup } = setup();
    expect(m.count()).toBe(2);
    cleanup();
    expect(m.count()).toBe(0);
    expect(el.querySelector(".tlw-tg")).toBeNull();
  });
});
