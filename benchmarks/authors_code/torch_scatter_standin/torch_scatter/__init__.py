"""A stand-in for the two functions of ``torch_scatter`` that the authors' executor calls.

``torch_scatter`` 2.0.9 has no wheel for a current torch. dransyhe/CNAP's
``models/executor/gnn.py`` calls only ``scatter_max(src, index, dim=0, out=...)`` and
``scatter_sum(src, index, dim=0, out=...)``, always with a 1-D ``index`` over ``dim`` 0 and an
``out`` that it reads afterwards (the return value of ``scatter_max`` is ignored). Both are
written here on ``torch.Tensor.scatter_reduce_`` with torch_scatter's documented semantics:

- ``index`` is broadcast over the trailing dimensions of ``src``;
- with ``out`` given, the reduction includes the values already in ``out`` and writes into it
  in place (``include_self=True``);
- ``scatter_max`` returns ``(out, argmax)``, where ``argmax`` is the row of ``src`` that won
  and ``src.size(dim)`` where no row of ``src`` reached that output (or ``out``'s own value won).

Gradients: torch_scatter sends ``scatter_max``'s gradient to the arg-max row only;
``scatter_reduce_`` splits it evenly between exact ties. The two agree whenever there is no
exact tie, which is the case for real-valued messages.
"""

import torch

__all__ = ["scatter_add", "scatter_max", "scatter_sum"]


def _broadcast(index: torch.Tensor, src: torch.Tensor, dim: int) -> torch.Tensor:
    dim = dim % src.dim()
    shape = [1] * src.dim()
    shape[dim] = -1
    return index.view(shape).expand_as(src)


def _output(src, index, dim, out, dim_size, fill):
    if out is not None:
        return out
    dim = dim % src.dim()
    size = list(src.shape)
    size[dim] = dim_size if dim_size is not None else (int(index.max()) + 1 if index.numel() else 0)
    return src.new_full(size, fill)


def scatter_sum(src, index, dim=-1, out=None, dim_size=None):
    out = _output(src, index, dim, out, dim_size, 0)
    return out.scatter_add_(dim, _broadcast(index, src, dim), src)


scatter_add = scatter_sum


def scatter_max(src, index, dim=-1, out=None, dim_size=None):
    given = out is not None
    lowest = torch.finfo(src.dtype).min if src.is_floating_point() else torch.iinfo(src.dtype).min
    out = _output(src, index, dim, out, dim_size, lowest)
    full_index = _broadcast(index, src, dim)
    out.scatter_reduce_(dim, full_index, src, reduce="amax", include_self=True)
    if not given:
        reached = torch.zeros_like(out, dtype=torch.bool).scatter_(dim, full_index, True)
        out = out.masked_fill(~reached, 0)
    dim = dim % src.dim()
    rows = torch.arange(src.size(dim), device=src.device)
    rows = _broadcast(rows, src, dim)
    won = src == out.detach().gather(dim, full_index)
    candidate = torch.where(won, rows, torch.full_like(rows, src.size(dim)))
    arg = torch.full(out.shape, src.size(dim), dtype=torch.long, device=src.device)
    arg.scatter_reduce_(dim, full_index, candidate, reduce="amin", include_self=True)
    return out, arg
