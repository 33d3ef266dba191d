"""First paint of the widgets in Debian's Chromium: page load → widget drawn (targets: GPT-2 grad graph ≤ 1 s,
a 1,024-program Triton grid ≤ 500 ms).

The page loads the real bundle (torchlens_widgets/static/*.js) over a loopback HTTP server and calls its
anywidget `render` with a stand-in model holding the picture Python computed. Reported: the time from
navigation start to the first animation frame after render, and render() alone. For comparison, the
SVG that torchviz + Graphviz `dot` make of the same graphs is loaded as a page and timed the same way. Needs /usr/bin/chromium
and the playwright package (no browser download). Run: .venv/bin/python benchmarks/bench_first_paint.py
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

PAGE = """<!doctype html><html><body><div id="w"></div><script type="module">
const t0 = performance.now();
const mod = await import("./{bundle}.js");
const traits = await (await fetch("./traits.json")).json();
const model = {{ get: (k) => traits[k], set() {{}}, save_changes() {{}}, on() {{}}, off() {{}} }};
const r0 = performance.now();
mod.default.render({{ model, el: document.getElementById("w") }});
const r1 = performance.now();
requestAnimationFrame(() => requestAnimationFrame(() => {{
  window.__paint = {{ render_ms: r1 - r0, paint_ms: performance.now(), script_ms: performance.now() - t0 }};
}}));
</script></body></html>"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def grad_graph_cases() -> list[tuple[str, str, dict[str, Any]]]:
    from bench_grad_graph import deep_model
    from models import gpt2_small

    from torchlens_widgets.lenses.autograd import grad_graph, record_backward
    from torchlens_widgets.render.grad_graph import grad_graph_model

    model, x = gpt2_small()
    loss = model(x).float().pow(2).mean()
    graph = grad_graph(loss, params=model)
    rec = record_backward(loss, graph=graph)
    gd, rd = graph.to_dict(), rec.to_dict()
    deep_loss, ws = deep_model(1150)
    deep = grad_graph(deep_loss, params={f"w.{i}": w for i, w in enumerate(ws)}).to_dict()
    base = {"selected": None, "step": -1, "focus": None, "hops": 2}
    return [
        ("GPT-2 small, collapsed ×12 (default)", "gradgraph", {**base, "model": grad_graph_model(gd, rd)}),
        ("GPT-2 small, every node", "gradgraph", {**base, "model": grad_graph_model(gd, rd, collapse=False)}),
        ("deep chain, 4,602 nodes", "gradgraph", {**base, "model": grad_graph_model(deep, collapse=False, max_nodes=None)}),
    ]


STATIC_PAGE = """<!doctype html><html><body>{svg}<script>
requestAnimationFrame(() => requestAnimationFrame(() => {{
  window.__paint = {{ render_ms: 0, paint_ms: performance.now(), script_ms: 0 }};
}}));
</script></body></html>"""


def torchviz_cases() -> list[tuple[str, str, str]]:
    """The same graphs drawn by torchviz + Graphviz dot, as the SVG a browser would show (skipped if absent)."""
    try:
        from torchviz import make_dot
    except ImportError:
        return []
    if not shutil.which("dot"):
        return []
    from bench_grad_graph import deep_model
    from models import gpt2_small

    model, x = gpt2_small()
    loss = model(x).float().pow(2).mean()
    cases = [("GPT-2 small, torchviz + dot SVG", "", make_dot(loss, params=dict(model.named_parameters())))]
    deep_loss, ws = deep_model(1150)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        cases.append(("deep chain 4,602, torchviz + dot SVG", "", make_dot(deep_loss, params={f"w.{i}": w for i, w in enumerate(ws)})))
    finally:
        sys.setrecursionlimit(old)
    return [(name, "", dot.pipe(format="svg").decode()) for name, _, dot in cases]


def stride_cases() -> list[tuple[str, str, dict[str, Any]]]:
    import torch

    from torchlens_widgets import stride_diagram

    x = torch.randn(100, 100)
    return [("stride diagram, 10^4 elements (summarised)", "stride",
             {"model": stride_diagram(x, x.t()).model, "selection": {}})]


def memory_cases() -> list[tuple[str, str, dict[str, Any]]]:
    """The memory timeline of a synthetic 100,000-event trace (target: first paint ≤ 1.5 s)."""
    from bench_memory import synthetic_trace

    from torchlens_widgets.lenses.memory import load_snapshot
    from torchlens_widgets.render.memory import memory_model

    model = memory_model(load_snapshot(synthetic_trace(100_000)))
    return [("memory timeline, 100,000 events", "memory",
             {"model": model, "panel": {}, "selected_event": None, "hovered_band": None, "x_axis": "event"})]


def triton_grid_cases() -> list[tuple[str, str, dict[str, Any]]]:
    """A masked kernel over a vector, 1,024 programs, run through the grid lens (the interpreter takes a few
    seconds); the last program (the ragged one) shown. Skipped without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return []
    import torch

    from torchlens_widgets.lenses.triton_grid import program_grid
    from torchlens_widgets.render.triton_grid import program_grid_model

    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)

    n = 1024 * 64 - 20
    grid = program_grid(scale_kernel, (1024,), torch.randn(n), torch.empty(n), n, BLOCK=64)
    return [("Triton grid, 1,024 programs", "tgrid", {"model": program_grid_model(grid.to_dict()), "program": [1023]})]


def main() -> None:
    if not Path(CHROMIUM).exists():
        print(f"skipped: {CHROMIUM} is missing (apt-get install -y chromium)")
        return
    from playwright.sync_api import sync_playwright

    cases: list[tuple[str, str, Any]] = (stride_cases() + grad_graph_cases() + torchviz_cases() + memory_cases()
                                         + triton_grid_cases())
    with tempfile.TemporaryDirectory() as tmp:
        for js in (ROOT / "torchlens_widgets" / "static").glob("*.js"):
            shutil.copy(js, tmp)
        handler = functools.partial(_QuietHandler, directory=tmp)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        print(f"{'widget':<44} {'payload KB':>10} {'render ms':>10} {'first paint ms':>15}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            for name, bundle, traits in cases:
                payload = json.dumps(traits) if bundle else traits
                best: dict[str, float] | None = None
                for k in range(3):
                    page_dir = Path(tmp)
                    (page_dir / "traits.json").write_text(payload)
                    html = PAGE.format(bundle=bundle) if bundle else STATIC_PAGE.format(svg=traits)
                    (page_dir / f"p{k}.html").write_text(html)
                    page = browser.new_page()
                    page.goto(f"http://127.0.0.1:{port}/p{k}.html")
                    page.wait_for_function("window.__paint !== undefined", timeout=60_000)
                    got = page.evaluate("window.__paint")
                    page.close()
                    if best is None or got["paint_ms"] < best["paint_ms"]:
                        best = got
                assert best is not None
                print(f"{name:<44} {len(payload) / 1024:>10.0f} {best['render_ms']:>10.1f} {best['paint_ms']:>15.1f}")
            browser.close()
        server.shutdown()


if __name__ == "__main__":
    main()
