"""HiCL under DDP: two processes (gloo, CPU), each with half the sequences, give the one-process loss and
gradients — the negatives are gathered across processes, as the pair losses' are (13.22)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from lengthwise.training.losses import HiCLLoss

SEGMENTS_PER_SEQUENCE = [3, 1, 2, 1]  # rank 0: sequences 0-1 (4 segments); rank 1: sequences 2-3 (3 segments)
OPTIONS = [("neither", "summation"), ("positive", "summation"), ("negative", "averaging"), ("neither", "averaging")]


class _Toy(nn.Module):
    """A deterministic "encoder" whose second call differs from its first, as two dropout views do."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first, self.second = nn.Linear(8, 6), nn.Linear(8, 6)
        self.calls = 0

    def forward(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        self.calls += 1
        x = features["x"]
        noise = 0.3 * self.second(x) if self.calls % 2 == 0 else 0.0
        return {"sentence_embedding": self.first(x) + noise}


def _batch(sequences: range) -> dict[str, torch.Tensor]:
    """Segments of the given sequences: (S, 8) inputs, owners renumbered from 0, lengths."""
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(sum(SEGMENTS_PER_SEQUENCE), 8, generator=generator)
    owner = torch.repeat_interleave(torch.arange(4), torch.tensor(SEGMENTS_PER_SEQUENCE))
    lengths = torch.tensor([32, 32, 5, 20, 32, 7, 11])
    keep = torch.isin(owner, torch.tensor(list(sequences)))
    return {"x": inputs[keep], "owner": owner[keep] - sequences.start, "segment_length": lengths[keep]}


def _run(rank: int, world: int, gather: bool) -> list[tuple[float, list[torch.Tensor]]]:
    """(loss, gradients) per option, averaged over processes as DDP averages them."""
    results = []
    half = 4 // world
    for same_sequence, denominator in OPTIONS:
        model = _Toy()
        loss = HiCLLoss(model, 0.3, same_sequence, denominator, scale=5.0, gather_across_devices=gather)
        parts = loss([_batch(range(rank * half, (rank + 1) * half))])
        total = sum(parts.values())
        total.backward()
        grads = [p.grad.detach().clone() for p in model.parameters()]
        value = total.detach().clone()
        if world > 1:
            for grad in [*grads, value]:
                dist.all_reduce(grad)
                grad /= world
        results.append((float(value), grads))
    return results


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = {gather: _run(rank, world, gather) for gather in (True, False)}
        if rank == 0:
            torch.save(results, out)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow  # two spawned processes import torch and sentence-transformers: about a minute on 2 cores
def test_two_processes_equal_one_for_every_option(tmp_path: Path) -> None:
    out = tmp_path / "two.pt"
    mp.spawn(_worker, args=(2, _free_port(), str(out)), nprocs=2, join=True)
    two = torch.load(out)
    one = _run(0, 1, gather=False)
    for (loss_one, grads_one), (loss_two, grads_two), option in zip(one, two[True], OPTIONS, strict=True):
        assert loss_two == pytest.approx(loss_one, rel=1e-5), option
        for a, b in zip(grads_one, grads_two, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=str(option))
    # what HiCL did before: each process contrasted its own half only, so the check above can fail
    assert any(abs(a[0] - b[0]) > 1e-3 for a, b in zip(one, two[False], strict=True))
