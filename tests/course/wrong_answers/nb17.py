"""Wrong answers for notebook 17 (Triton on a CPU): each must fail its check for the reason in `expect`."""

from __future__ import annotations

from tests.course.wrong_answers import Wrong

_DIFF_HEAD = "@triton.jit\ndef diff_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
_SOFTMAX_HEAD = ("@triton.jit\ndef softmax_kernel(x_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, "
                 "BLOCK: tl.constexpr):\n")
_OFFS = "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
_ROW = "    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n    inside = cols < n_cols\n"
_X_ROW = "x_ptr + row * x_row_stride + cols"
_OUT_ROW = "out_ptr + row * out_row_stride + cols"

# Python run from inside an interpreted kernel: the block's NumPy data through torch and back into a tl.tensor
_THROUGH_TORCH = '''
import numpy as _np
from triton.runtime.interpreter import TensorHandle as _Handle


def _as_torch(block):
    return torch.from_numpy(_np.array(block.handle.data))


def _as_block(t, like):
    return tl.tensor(_Handle(t.numpy(), like.handle.dtype.scalar), like.type)


'''


def _diff(body: str, before: str = "") -> str:
    return before + _DIFF_HEAD + body


def _softmax(body: str, before: str = "") -> str:
    return before + _SOFTMAX_HEAD + body


_TILES = {"programs": 6, "program storing out[9, 12]": (2, 1), "its masked lanes": 22,
          "programs with a masked lane": 4, "masked lanes in all": 62}


def _tiles(**changes: object) -> str:
    return f"PREDICT_TILES = {({**_TILES, **changes})!r}\n"


_TRANSPOSE_HEAD = ("@triton.jit\ndef transpose_kernel(x_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, "
                   "BC: tl.constexpr):\n")
_TILE = ("    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]\n"
         "    cols = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]\n")
_INSIDE = "    inside = (rows < n_rows) & (cols < n_cols)\n"


def _transpose(body: str) -> str:
    return _TRANSPOSE_HEAD + body


WRONG = {
    "17-masked-diff": [
        Wrong("no mask at all",
              _diff(_OFFS + "    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1) - tl.load(x_ptr + offs))\n"),
              "outside"),
        Wrong("masks with offs < n: one lane too many",
              _diff(_OFFS + "    m = offs < n\n"
                    "    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1, mask=m) - tl.load(x_ptr + offs, mask=m),"
                    " mask=m)\n"), "its mask (m) leaves these lanes on"),
        Wrong("masks the store only: the values come out right",
              _diff(_OFFS + "    m = offs < n - 1\n"
                    "    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1) - tl.load(x_ptr + offs), mask=m)\n"),
              "outside"),
        Wrong("subtracts the wrong way round",
              _diff(_OFFS + "    m = offs < n - 1\n"
                    "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) - tl.load(x_ptr + offs + 1, mask=m),"
                    " mask=m)\n"), "values differ"),
        Wrong("computes in float32 whatever the input (right for the visible float32 cases only)",
              _diff(_OFFS + "    m = offs < n - 1\n"
                    "    left = tl.load(x_ptr + offs, mask=m).to(tl.float32)\n"
                    "    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1, mask=m).to(tl.float32) - left, mask=m)\n"),
              "hidden case 3: stored values differ"),
        Wrong("forgot the program id: every program does block 0",
              _diff("    offs = tl.arange(0, BLOCK)\n    m = offs < n - 1\n"
                    "    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1, mask=m) - tl.load(x_ptr + offs, mask=m),"
                    " mask=m)\n"), "was never stored"),
        Wrong("a Python function that calls torch.diff",
              "def diff_kernel(x, out, n, BLOCK=8):\n    out.copy_(torch.diff(x))\n", "not a plain Python function",
              gaming=True),
        Wrong("loads and stores as a kernel should, but subtracts with torch inside it",
              _diff(_OFFS + "    m = offs < n - 1\n    left = tl.load(x_ptr + offs, mask=m)\n"
                    "    right = tl.load(x_ptr + offs + 1, mask=m)\n"
                    "    tl.store(out_ptr + offs, _as_block(_as_torch(right) - _as_torch(left), left), mask=m)\n",
                    before=_THROUGH_TORCH), "ran aten.", gaming=True),
        Wrong("a kernel in Triton for the block size of the first case, torch.diff inside it for the others",
              _diff(_OFFS + "    m = offs < n - 1\n    left = tl.load(x_ptr + offs, mask=m)\n"
                    "    right = tl.load(x_ptr + offs + 1, mask=m)\n"
                    "    if BLOCK == 8:\n"
                    "        tl.store(out_ptr + offs, right - left, mask=m)\n"
                    "    else:\n"
                    "        tl.store(out_ptr + offs, _as_block(_as_torch(right) - _as_torch(left), left), mask=m)\n",
                    before=_THROUGH_TORCH), "ran aten.", gaming=True),
        Wrong("rebinds the notebook's program_grid to a fake that sees no problem",
              "program_grid = lambda *a, **k: None\nshow_program_grid = program_grid\n"
              + _diff(_OFFS + "    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1) - tl.load(x_ptr + offs))\n"),
              "outside", gaming=True),
        Wrong("patches the lens's recorder so that out-of-bounds lanes look masked",
              "import numpy as _np\nimport torchlens_widgets.lenses.triton_grid as _lens\n"
              "_real = _lens._Recorder.access\n\n\n"
              "def _quiet(self, op, ptrs, mask, itemsize):\n"
              "    a = _np.asarray(ptrs).astype(_np.int64)\n"
              "    inside = _np.zeros(a.shape, dtype=bool)\n"
              "    for r in self.regions:\n"
              "        inside |= (a >= r.start) & (a + itemsize <= r.end)\n"
              "    return _real(self, op, ptrs, _np.asarray(mask, dtype=bool) & inside, itemsize)\n\n\n"
              "_lens._Recorder.access = _quiet\n"
              + _diff(_OFFS + "    tl.store(out_ptr + offs, tl.load(x_ptr + offs + 1) - tl.load(x_ptr + offs))\n"),
              "was replaced", gaming=True),
    ],
    "17-row-softmax": [
        Wrong("no max subtracted: exp overflows",
              _softmax(_ROW + f"    v = tl.load({_X_ROW}, mask=inside, other=-float('inf'))\n    e = tl.exp(v)\n"
                       f"    tl.store({_OUT_ROW}, e / tl.sum(e, axis=0), mask=inside)\n"), "values differ"),
        Wrong("masked lanes load 0.0: they join the sum",
              _softmax(_ROW + f"    v = tl.load({_X_ROW}, mask=inside, other=0.0)\n"
                       "    e = tl.exp(v - tl.max(v, axis=0))\n"
                       f"    tl.store({_OUT_ROW}, e / tl.sum(e, axis=0), mask=inside)\n"), "values differ"),
        Wrong("rows found with n_cols instead of the row stride",
              _softmax(_ROW + "    v = tl.load(x_ptr + row * n_cols + cols, mask=inside, other=-float('inf'))\n"
                       "    e = tl.exp(v - tl.max(v, axis=0))\n"
                       "    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=inside)\n"),
              "outside row"),
        Wrong("x's row stride used for out too",
              _softmax(_ROW + f"    v = tl.load({_X_ROW}, mask=inside, other=-float('inf'))\n"
                       "    e = tl.exp(v - tl.max(v, axis=0))\n"
                       "    tl.store(out_ptr + row * x_row_stride + cols, e / tl.sum(e, axis=0), mask=inside)\n"),
              "outside"),
        Wrong("loads the whole block unmasked and fixes the values with tl.where",
              _softmax(_ROW + f"    v = tl.where(inside, tl.load({_X_ROW}), -float('inf'))\n"
                       "    e = tl.exp(v - tl.max(v, axis=0))\n"
                       f"    tl.store({_OUT_ROW}, e / tl.sum(e, axis=0), mask=inside)\n"), "outside"),
        Wrong("stores the whole block",
              _softmax(_ROW + f"    v = tl.load({_X_ROW}, mask=inside, other=-float('inf'))\n"
                       "    e = tl.exp(v - tl.max(v, axis=0))\n"
                       f"    tl.store({_OUT_ROW}, e / tl.sum(e, axis=0))\n"), "outside"),
        Wrong("calls Triton's tl.softmax",
              _softmax(_ROW + f"    v = tl.load({_X_ROW}, mask=inside, other=-float('inf'))\n"
                       f"    tl.store({_OUT_ROW}, tl.softmax(v), mask=inside)\n"), "tl.softmax"),
        Wrong("calls the Python function behind tl.softmax, around the jit wrapper",
              _softmax(_ROW + f"    v = tl.load({_X_ROW}, mask=inside, other=-float('inf'))\n"
                       f"    tl.store({_OUT_ROW}, tl.softmax.fn(v), mask=inside)\n"), "called softmax", gaming=True),
        Wrong("a Triton softmax for the first case's block, torch.softmax inside the kernel for the others",
              _softmax(_ROW + f"    v = tl.load({_X_ROW}, mask=inside, other=-float('inf'))\n"
                       "    if BLOCK == 64:\n"
                       "        e = tl.exp(v - tl.max(v, axis=0))\n"
                       f"        tl.store({_OUT_ROW}, e / tl.sum(e, axis=0), mask=inside)\n"
                       "    else:\n"
                       f"        tl.store({_OUT_ROW}, _as_block(torch.softmax(_as_torch(v), dim=0), v), mask=inside)\n",
                       before=_THROUGH_TORCH), "ran aten._softmax", gaming=True),
        Wrong("a Python function that calls torch.softmax",
              "def softmax_kernel(x, out, x_row_stride, out_row_stride, n_cols, BLOCK=64):\n"
              "    out.copy_(torch.softmax(x, dim=1))\n", "not a plain Python function", gaming=True),
        Wrong("loads and stores as a kernel should, but computes the softmax with torch inside it",
              _softmax(_ROW + f"    v = tl.load({_X_ROW}, mask=inside, other=-float('inf'))\n"
                       f"    tl.store({_OUT_ROW}, _as_block(torch.softmax(_as_torch(v), dim=0), v), mask=inside)\n",
                       before=_THROUGH_TORCH), "ran aten._softmax", gaming=True),
    ],
    "17-tiled-transpose": [
        Wrong("stores the tile where it was: a copy, not a transpose",
              _transpose(_TILE + _INSIDE + "    tile = tl.load(x_ptr + rows * n_cols + cols, mask=inside)\n"
                         "    tl.store(out_ptr + rows * n_cols + cols, tile, mask=inside)\n"), "values differ"),
        Wrong("masks the rows only",
              _transpose(_TILE + "    inside = rows < n_rows\n"
                         "    tile = tl.load(x_ptr + rows * n_cols + cols, mask=inside)\n"
                         "    tl.store(out_ptr + cols * n_rows + rows, tile, mask=inside)\n"), "outside"),
        Wrong("out's rows taken as n_cols long",
              _transpose(_TILE + _INSIDE + "    tile = tl.load(x_ptr + rows * n_cols + cols, mask=inside)\n"
                         "    tl.store(out_ptr + cols * n_cols + rows, tile, mask=inside)\n"), "outside"),
        Wrong("forgot the second program id: only the first column of tiles is done",
              _transpose("    rows = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]\n"
                         "    cols = tl.arange(0, BC)[None, :]\n" + _INSIDE
                         + "    tile = tl.load(x_ptr + rows * n_cols + cols, mask=inside)\n"
                         "    tl.store(out_ptr + cols * n_rows + rows, tile, mask=inside)\n"), "was never stored"),
        Wrong("loads the whole tile unmasked and stores only real lanes: the values come out right",
              _transpose(_TILE + _INSIDE + "    tile = tl.load(x_ptr + rows * n_cols + cols)\n"
                         "    tl.store(out_ptr + cols * n_rows + rows, tile, mask=inside)\n"), "outside",
              gaming=True),
        Wrong("the visible cases' shapes written into the mask",
              _transpose(_TILE + "    if BR == 2:\n        inside = (rows < 5) & (cols < 7)\n"
                         "    else:\n        inside = (rows < 10) & (cols < 6)\n"
                         "    tile = tl.load(x_ptr + rows * n_cols + cols, mask=inside)\n"
                         "    tl.store(out_ptr + cols * n_rows + rows, tile, mask=inside)\n"), "hidden case 1",
              gaming=True),
        Wrong("a Python function that copies x.T",
              "def transpose_kernel(x, out, n_rows, n_cols, BR=2, BC=4):\n    out.copy_(x.t())\n",
              "not a plain Python function", gaming=True),
    ],
    "17-predict-tiles": [
        Wrong("the grid's axes swapped", _tiles(**{"program storing out[9, 12]": (1, 2)}),
              "your prediction for 'program storing out[9, 12]'"),
        Wrong("counted the stored lanes, not the masked ones", _tiles(**{"its masked lanes": 10}),
              "your prediction for 'its masked lanes'"),
        Wrong("the grid's shape instead of its number of programs", _tiles(programs=(3, 2)),
              "your prediction for 'programs'"),
        Wrong("only the corner program masks",
              _tiles(**{"programs with a masked lane": 1, "masked lanes in all": 22}),
              "your prediction for 'programs with a masked lane'"),
        Wrong("one program per element", _tiles(programs=130), "your prediction for 'programs'"),
        Wrong("an int that equals everything",
              "class _Any(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
              "PREDICT_TILES = {k: _Any(0) for k in " + repr(list(_TILES)) + "}\n", "your prediction", gaming=True),
        Wrong("a dict subclass whose lookups hand back the check's own expected value",
              "import sys as _sys\n\n\nclass _Echo(dict):\n"
              "    def __getitem__(self, key):\n"
              "        frame = _sys._getframe(1)\n"
              "        while frame is not None:\n"
              "            for name in ('_v', 'expected', 'value'):\n"
              "                if name in frame.f_locals:\n"
              "                    return frame.f_locals[name]\n"
              "            frame = frame.f_back\n"
              "        return None\n\n\n"
              "PREDICT_TILES = _Echo({k: None for k in " + repr(list(_TILES)) + "})\n",
              "PREDICT_TILES should be the dict above", gaming=True),
        Wrong("copies the truth a test cell left in the kernel's globals",
              "PREDICT_TILES = dict(globals().get('_t') or {k: None for k in " + repr(list(_TILES)) + "})\n",
              "your prediction for 'programs'", gaming=True),
        Wrong("patches the package's program_grid so the truth matches a guess",
              "import torchlens_widgets as _tlw\n_tlw.program_grid = lambda *a, **k: None\n"
              + _tiles(programs=4), "was replaced", gaming=True),
    ],
}
