"""Can the maze CNN of S seeds run as one call? `python -m benchmarks.suite.grouped_conv
[--json PATH]`.

The maze agents' encoder (`xlvin.nn.encoders.MazeCNN`) is three 3x3 convolutions on 8x8 grids.
S seeds' convolutions as one call is a grouped convolution (`groups=S`, each seed's channels a
group). For each (S, rows B, input channels), with one torch thread: whether the grouped call
gives each seed's own `F.conv2d` output and gradients (weights, inputs) bit for bit, and the CPU
time of forward + backward of the S seeds alone against grouped (min of 3). Prints a Markdown
table; `--json` writes the measurements for `xlvin.experiments.benchmark_pages`. Not part of
the test suite.
"""

import argparse
import itertools
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


def measure(seeds: int, rows: int, c_in: int, c_out: int = 32) -> dict[str, Any]:
    """One case: counts of seeds whose grouped output and gradients differ, and CPU times."""
    xs = [torch.randn(rows, c_in, 8, 8, requires_grad=True) for _ in range(seeds)]
    ws = [torch.randn(c_out, c_in, 3, 3, requires_grad=True) for _ in range(seeds)]
    bs = [torch.randn(c_out, requires_grad=True) for _ in range(seeds)]
    grads = [torch.randn(rows, c_out, 8, 8) for _ in range(seeds)]
    own = [F.conv2d(x, w, b, padding=1) for x, w, b in zip(xs, ws, bs)]
    for out, grad in zip(own, grads):
        out.backward(grad)
    own_w, own_x = [w.grad.clone() for w in ws], [x.grad.clone() for x in xs]
    for t in (*xs, *ws, *bs):
        t.grad = None
    x, w, b, grad = torch.cat(xs, 1), torch.cat(ws, 0), torch.cat(bs, 0), torch.cat(grads, 1)
    out = F.conv2d(x, w, b, padding=1, groups=seeds)
    out.backward(grad)
    parts = out.split(c_out, 1)

    def alone() -> None:
        for xi, wi, bi, gi in zip(xs, ws, bs, grads):
            F.conv2d(xi, wi, bi, padding=1).backward(gi)

    def grouped() -> None:
        F.conv2d(x, w, b, padding=1, groups=seeds).backward(grad)

    return {"seeds": seeds, "rows": rows, "c_in": c_in, "c_out": c_out,
            "output_differs": sum(not torch.equal(p, o) for p, o in zip(parts, own)),
            "weight_grad_differs": sum(not torch.equal(wi.grad, g) for wi, g in zip(ws, own_w)),
            "input_grad_differs": sum(not torch.equal(xi.grad, g) for xi, g in zip(xs, own_x)),
            "alone_ms": 1e3 * _cpu_time(alone), "grouped_ms": 1e3 * _cpu_time(grouped)}


def _cpu_time(fn) -> float:
    """The least CPU seconds of 3 calls, after one to warm up."""
    fn()
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args()
    from benchmarks.suite.population import commit, machine
    from xlvin.experiments.benchmark_pages import grouped_conv_table
    from xlvin.io.files import write_json
    from xlvin.process import prepare_process, set_threads

    prepare_process()
    set_threads(1)
    torch.manual_seed(0)
    cases = [measure(*case) for case in itertools.product((2, 4, 16), (32, 256), (3, 32))]
    data = {"cpu": machine(), "commit": commit(), "torch": torch.__version__, "cases": cases}
    if args.json:
        write_json(args.json, data)
    print(grouped_conv_table(data))


if __name__ == "__main__":
    main()
