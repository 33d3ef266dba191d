"""Wrong answers for notebook 16 (torch.compile): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong


def _center(body: str, decorator: str = "") -> str:
    return f"{decorator}def center(x):\n{body}\n"


def _prepare(body: str) -> str:
    return f"def prepare(x):\n{body}\n"


_GUESS = {"new random values": "none", "x.double()": "dtype", "a 5x3 x": "size",
          "x transposed from a 3x4 tensor": "stride", "x.requires_grad_()": "requires_grad", "scale = 3.0": "value",
          'mode = "max"': "value"}


def _predict(**changes: str) -> str:
    return f"PREDICT_FAILED_GUARD = {({**_GUESS, **changes})!r}\n"


def _backend(count: str, returns: str = "gm.forward", setup: str = "    counts = []\n") -> str:
    return (f"def make_counting_backend():\n{setup}\n    def backend(gm, example_inputs):\n"
            f"        {count}\n        return {returns}\n\n    return backend, counts\n")


WRONG = {
    "16-no-breaks": [
        Wrong("the original function, print and all",
              _center('    print("centering", tuple(x.shape))\n    m = x.mean().item()\n    y = x - m\n'
                      "    if y.abs().max() > 3:\n        y = y.clamp(-3, 3)\n    return y * 2"),
              "(graphs, breaks)"),
        Wrong("print removed, .item() kept",
              _center("    m = x.mean().item()\n    y = x - m\n    if y.abs().max() > 3:\n"
                      "        y = y.clamp(-3, 3)\n    return y * 2"), "(graphs, breaks)"),
        Wrong("a tensor mean, but the if kept",
              _center("    y = x - x.mean()\n    if y.abs().max() > 3:\n        y = y.clamp(-3, 3)\n    return y * 2"),
              "(graphs, breaks)"),
        Wrong("forgot the clamp", _center("    return (x - x.mean()) * 2"), "center(a spread-out vector)"),
        Wrong("clamps after doubling", _center("    return ((x - x.mean()) * 2).clamp(-3, 3)"),
              "center(a spread-out vector)"),
        Wrong("the broken code moved into a helper hidden with torch.compiler.disable",
              "@torch.compiler.disable\ndef _center_eager(x):\n    m = x.mean().item()\n    y = x - m\n"
              "    if y.abs().max() > 3:\n        y = y.clamp(-3, 3)\n    return y * 2\n\n\n"
              + _center("    return _center_eager(x)"), "(graphs, breaks)", gaming=True),
        Wrong("turns capture_scalar_outputs on for itself",
              "torch._dynamo.config.capture_scalar_outputs = True\n"
              + _center("    m = x.mean().item()\n    return (x - m).clamp(-3, 3) * 2"),
              "capture_scalar_outputs was changed", gaming=True),
        Wrong("fitted to the visible vector",
              "_seen = {}\n" + _center("    y = x - x.mean()\n    return y.clamp(-3, 3) * 2 if x.numel() == 1000 else x * 0"),
              "hidden case 1", gaming=True),
        Wrong("shows Dynamo another program (torch.compiler.is_compiling)",
              _center("    if torch.compiler.is_compiling():\n        return (x - x.mean()) * 2\n"
                      "    m = x.mean().item()\n    y = x - m\n    if y.abs().max() > 3:\n"
                      "        y = y.clamp(-3, 3)\n    return y * 2"),
              "compiled (what the compiled code returned)", gaming=True),
        Wrong("the broken code hidden in a custom op", '''
@torch.library.custom_op("tlw_wrong16::center", mutates_args=())
def _center_op(x: torch.Tensor) -> torch.Tensor:
    m = x.mean().item()
    y = x - m
    if y.abs().max() > 3:
        y = y.clamp(-3, 3)
    return y * 2


@_center_op.register_fake
def _(x):
    return torch.empty_like(x)


def center(x):
    return _center_op(x) * 1 + 0 - 0
''', "which Dynamo keeps opaque", gaming=True),
    ],
    "16-no-recompiles": [
        Wrong("returns the batch untouched", _prepare("    return x"), "(recompiles, graphs)"),
        Wrong("marks the wrong dimension dynamic", _prepare("    torch._dynamo.mark_dynamic(x, 1)\n    return x"),
              "(recompiles, graphs)"),
        Wrong("marks the batch static", _prepare("    torch._dynamo.mark_static(x, 0)\n    return x"),
              "(recompiles, graphs)"),
        Wrong("a copy, nothing marked", _prepare("    return x.clone()"), "(recompiles, graphs)"),
        Wrong("pads every batch to 128 rows",
              _prepare("    return torch.cat([x, x.new_zeros(128 - x.shape[0], x.shape[1])])"),
              "the batch itself, unchanged", gaming=True),
        Wrong("resets Dynamo before every call", _prepare("    torch._dynamo.reset()\n    return x"),
              "(recompiles, graphs)", gaming=True),
        Wrong("makes every later compile dynamic (assume_static_by_default)",
              "torch._dynamo.config.assume_static_by_default = False\n" + _prepare("    return x"),
              "assume_static_by_default", gaming=True),
    ],
    "16-count-backend": [
        Wrong("counts every node, inputs and output too",
              _backend("counts.append(len(gm.graph.nodes))"), "counts after compiling gelu_ish"),
        Wrong("counts torch functions only, not Tensor methods",
              _backend('counts.append(sum(1 for n in gm.graph.nodes if n.op == "call_function"))'),
              "counts after compiling split_in_two"),
        Wrong("counts each run of the graph, not each graph",
              "def make_counting_backend():\n    counts = []\n\n    def backend(gm, example_inputs):\n"
              '        n = sum(1 for node in gm.graph.nodes if node.op.startswith("call_"))\n\n'
              "        def run(*args):\n            counts.append(n)\n            return gm.forward(*args)\n"
              "        return run\n\n    return backend, counts\n", "counts after compiling gelu_ish"),
        Wrong("one list shared by every backend made",
              "_COUNTS = []\n\n\n" + _backend('counts.append(sum(1 for n in gm.graph.nodes if n.op.startswith("call_")))',
                                             setup="    counts = _COUNTS\n"),
              "counts should start as an empty plain list"),
        Wrong("forgets to return a callable",
              _backend('counts.append(sum(1 for n in gm.graph.nodes if n.op.startswith("call_")))', returns="None"),
              "running it compiled with your backend raised"),
        Wrong("fitted to the visible functions",
              "_PLAN = iter([[3], [2, 2]])\n\n\ndef make_counting_backend():\n    counts = []\n"
              "    want = next(_PLAN, [1])\n\n    def backend(gm, example_inputs):\n        if not counts:\n"
              "            counts.extend(want)\n        return gm.forward\n\n    return backend, counts\n",
              "hidden case 1", gaming=True),
        Wrong("a list that equals anything",
              "class _Yes(list):\n    def __eq__(self, other):\n        return True\n\n\n"
              "def make_counting_backend():\n    counts = _Yes()\n\n    def backend(gm, example_inputs):\n"
              "        return gm.forward\n\n    return backend, counts\n",
              "counts should start as an empty plain list", gaming=True),
    ],
    "16-predict-guard": [
        Wrong("nothing recompiles", "PREDICT_FAILED_GUARD = {k: 'none' for k in " + repr(list(_GUESS)) + "}\n",
              "your prediction for x.double()"),
        Wrong("a transposed view has the same size", _predict(**{"x transposed from a 3x4 tensor": "none"}),
              "your prediction for x transposed from a 3x4 tensor"),
        Wrong("values are guarded", _predict(**{"new random values": "value"}),
              "your prediction for new random values"),
        Wrong("requires_grad is a value", _predict(**{"x.requires_grad_()": "value"}),
              "your prediction for x.requires_grad_()"),
        Wrong("a new shape is a dtype change", _predict(**{"a 5x3 x": "dtype"}), "your prediction for a 5x3 x"),
        Wrong("a string that equals everything",
              "class _Any(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
              "PREDICT_FAILED_GUARD = {k: _Any('none') for k in " + repr(list(_GUESS)) + "}\n",
              "your prediction", gaming=True),
        Wrong("a dict whose lookups read the check's frames", '''
import sys


class _Peek(dict):
    def __getitem__(self, key):
        frame = sys._getframe(1)
        while frame is not None:
            for name, value in list(frame.f_locals.items()):
                if name.startswith("_v") and type(value) is str:
                    return value
            frame = frame.f_back
        return dict.__getitem__(self, key)


PREDICT_FAILED_GUARD = _Peek({k: "none" for k in ''' + repr(list(_GUESS)) + '''})
''', "PREDICT_FAILED_GUARD should be the dict above", gaming=True),
        Wrong("compiles nothing (force_eager), then nothing recompiles",
              "torch.compiler.set_stance('force_eager')\n"
              "PREDICT_FAILED_GUARD = {k: 'none' for k in " + repr(list(_GUESS)) + "}\n",
              "torch.compiler.set_stance('force_eager') was left on", gaming=True),
    ],
}
