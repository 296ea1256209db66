"""The pure-torch sgl_kernel stand-in: its one op against a plain reference, and loud failures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")

PACKAGE = Path(__file__).resolve().parents[2] / "k26ctl" / "lab" / "real" / "cpu_ops" / "sgl_kernel"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "k26_sgl_kernel_under_test", PACKAGE / "__init__.py", submodule_search_locations=[str(PACKAGE)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference(rows, starts, ends, locs, table):  # type: ignore[no-untyped-def]
    """SGLang's Triton kernel's contract, written out element by element."""
    out = [list(r) for r in table]
    pos = 0
    for row, start, end in zip(rows, starts, ends, strict=True):
        for col in range(start, end):
            out[row][col] = locs[pos]
            pos += 1
    return out


def test_assign_req_to_token_pool_matches_the_reference() -> None:
    ops = _load()
    gen = torch.Generator().manual_seed(3)
    for _ in range(20):
        pool = torch.zeros((6, 40), dtype=torch.int32)
        batch = int(torch.randint(1, 5, (1,), generator=gen))
        rows = torch.randperm(6, generator=gen)[:batch].to(torch.int64)
        starts = torch.randint(0, 20, (batch,), generator=gen)
        lengths = torch.randint(0, 15, (batch,), generator=gen)
        ends = starts + lengths
        locs = torch.randint(1, 10_000, (int(lengths.sum()),), generator=gen, dtype=torch.int64)
        expected = _reference(rows.tolist(), starts.tolist(), ends.tolist(), locs.tolist(), pool.tolist())
        ops.assign_req_to_token_pool_cpu(rows, pool, starts, ends, locs, pool.shape[1])
        assert pool.tolist() == expected


def test_an_end_beyond_the_pool_is_refused() -> None:
    ops = _load()
    pool = torch.zeros((2, 8), dtype=torch.int32)
    with pytest.raises(ValueError, match="beyond the pool's 8 slots"):
        ops.assign_req_to_token_pool_cpu(
            torch.tensor([0]), pool, torch.tensor([4]), torch.tensor([10]), torch.arange(6), 8
        )


def test_every_other_op_raises_naming_itself() -> None:
    ops = _load()
    from_import = ops.rmsnorm_cpu  # importing a name works (SGLang imports many at start-up) ...
    with pytest.raises(NotImplementedError, match=r"sgl_kernel\.rmsnorm_cpu is not implemented"):
        from_import(torch.zeros(2), torch.ones(2), 1e-6)  # ... calling it is loud
    with pytest.raises(AttributeError):
        ops.__wrapped__  # noqa: B018  dunders stay absent, so import machinery and inspect behave


def test_torch_ops_namespace_stays_empty() -> None:
    """Nothing registered under torch.ops.sgl_kernel: SGLang then sees no AMX kernels."""
    sys.modules.pop("k26_sgl_kernel_under_test", None)
    _load()
    assert not hasattr(torch.ops.sgl_kernel, "assign_req_to_token_pool_cpu")
    assert not hasattr(torch.ops.sgl_kernel, "weight_packed_linear")
