"""output_bomb: make the trusted parent read far more than the outputs it expects.

Exploit, two ways at once. (1) torch.serialization's writer is replaced so that a saved
file is a small, highly compressed record that inflates on loading (seen before the fix:
a 2 MB file became 2 GiB in the root parent, once per trial). (2) The forward returns,
besides nothing else, an output far larger than the reference's: 64 times the rows, all
zeros (cheap to make, 256 MiB or more for the parent to read). The cheater hopes to take
the evaluation host's memory down from inside the trusted process.

What should catch it: the child's outputs travel as raw bytes with a declared layout
(harness/isolation/output_area.py), never through torch.save/torch.load; the parent compares the
layout with the reference's outputs first and refuses "output ... has shape ..., expected
..." without reading a byte, and never reads past the expected size. Its peak memory
stays what an honest candidate's evaluation takes.
"""

import io
import zipfile

import torch
import torch.serialization


def _bomb_writer(*args, **kwargs):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data/0", b"\0" * (64 * 2**20))
    return buffer.getvalue()


torch.serialization._save = lambda *args, **kwargs: _bomb_writer()  # type: ignore[assignment]
torch.serialization._open_zipfile_writer = lambda *args, **kwargs: _bomb_writer()  # type: ignore


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        rows = max(64 * x.shape[0], (256 * 2**20) // (x.shape[1] * x.element_size()))
        # on the inputs' device: a GPU host's parent checks the device first, and the bomb
        # must reach the layout check
        return torch.zeros(rows, x.shape[1], dtype=x.dtype, device=x.device)
