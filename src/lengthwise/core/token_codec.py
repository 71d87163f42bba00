"""How token vectors are kept small: a projection to fewer dimensions and a scalar code per dimension.

A token index holds one vector per token, tens of times more rows than a window index, so each row must be small.
`TokenCodec` keeps a token as ``codes = round((v @ basis) / scale)`` in ``bits`` bits per dimension (16: float16, no
scale; 8: int8; 4: two codes a byte) and decodes it as ``codes * scale``; or, with ``bin``, as the sign of each
dimension, eight a byte, decoded as ±1 (the query's side stays float: an asymmetric score, as binary rescoring does). A
query's tokens are projected, not coded. The basis is the top right singular vectors of a sample of the corpus's own
token vectors, *not* centred: with unit rows the best rank-d approximation of their dot products is what late
interaction needs, and the shared direction of a contextual encoder's tokens is kept rather than subtracted. The scale
of each dimension is its largest magnitude over the sample (clipped at the 99.99th percentile) over the code's range.
Both are fitted once on the first documents encoded, saved beside the codes (`to_arrays`), and read back with no pickle.

Spec strings name a codec: ``fp32``, ``fp16``, ``int8``, ``int4``, ``bin`` (every dimension), ``pca128-int8``,
``pca256-bin``, ``pca96-fp16``, … (a projection to that many dimensions first).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lengthwise.core.errors import SettingError

if TYPE_CHECKING:
    import torch

__all__ = ["CODEC_BITS", "CODEC_FILE", "TokenCodec", "parse_codec", "read_codec"]

CODEC_FILE = "codec.npz"  # where a token folder keeps its codec
CODEC_BITS = {"fp32": 32, "fp16": 16, "int8": 8, "int4": 4, "bin": 1}
_SPEC = re.compile(r"^(?:pca(?P<dims>\d+)-)?(?P<code>fp32|fp16|int8|int4|bin)$")
_CLIP = 99.99  # the percentile of each dimension's magnitude its scale covers (a few outliers saturate)
_FIT_ROWS = 200_000  # at most this many sample rows are used to fit (evenly spaced: deterministic)


def parse_codec(spec: str) -> tuple[int | None, int]:
    """(projected dimensions or None, bits) of a codec spec; a `SettingError` naming ``codec`` when it is not one."""
    match = _SPEC.match(str(spec).strip().lower())
    if match is None or (match["dims"] is not None and int(match["dims"]) < 1):
        raise SettingError(
            "codec", spec, "use fp32, fp16, int8, int4 or bin, optionally after a projection: pca256-bin"
        )
    dims = None if match["dims"] is None else int(match["dims"])
    bits = CODEC_BITS[match["code"]]
    if bits == 4 and dims is not None and dims % 2:
        raise SettingError("codec", spec, "int4 packs two dimensions a byte: give an even number of dimensions")
    if bits == 1 and dims is not None and dims % 8:
        raise SettingError("codec", spec, "bin packs eight dimensions a byte: give a multiple of 8 dimensions")
    return dims, bits


@dataclass(frozen=True, eq=False)
class TokenCodec:
    """A fitted codec: `basis` (D, d) float32 (None: no projection), `scale` (d,) float32 (bits 8 and 4), `bits`."""

    spec: str
    basis: np.ndarray | None
    scale: np.ndarray | None
    bits: int
    dimension: int  # D, the encoder's

    @classmethod
    def fit(cls, spec: str, sample: np.ndarray) -> TokenCodec:
        """The codec `spec` fitted on `sample` (n, D) float token vectors (unit rows, as they are encoded)."""
        dims, bits = parse_codec(spec)
        sample = np.asarray(sample, dtype=np.float32)
        if sample.ndim != 2 or len(sample) == 0:
            raise SettingError("sample", sample.shape, "fit a codec on (n, D) token vectors, n ≥ 1")
        if dims is not None and dims > sample.shape[1]:
            raise SettingError("codec", spec, f"projects to more dimensions than the encoder's {sample.shape[1]}")
        rows = sample[np.linspace(0, len(sample) - 1, min(len(sample), _FIT_ROWS)).astype(np.int64)]
        basis = None
        if dims is not None:
            _, _, vt = np.linalg.svd(rows.astype(np.float64), full_matrices=False)  # (D, D): top directions first
            basis = _signed(vt[:dims].T).astype(np.float32)  # (D, d)
        scale = None
        if bits in (8, 4):
            projected = rows if basis is None else rows @ basis
            top = np.percentile(np.abs(projected), _CLIP, axis=0).astype(np.float32)
            scale = np.maximum(top, np.float32(1e-8)) / np.float32(127 if bits == 8 else 7)
        return cls(spec, basis, scale, bits, sample.shape[1])

    @property
    def dims(self) -> int:
        """Dimensions a token keeps."""
        return self.dimension if self.basis is None else self.basis.shape[1]

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token's codes take."""
        return (self.dims * self.bits + 7) // 8

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """(n, d) float32: the vectors in the codec's space, not coded (how queries are scored)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        return vectors if self.basis is None else vectors @ self.basis

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """(n, bytes_per_token) or (n, d) codes of (n, D) token vectors: float16/float32, int8, or packed uint8."""
        projected = self.project(vectors)
        if self.bits == 1:
            return np.packbits(projected > 0, axis=1)
        if self.bits == 32:
            return np.ascontiguousarray(projected, dtype=np.float32)
        if self.bits == 16:
            return projected.astype(np.float16)
        assert self.scale is not None
        limit = 127 if self.bits == 8 else 7
        codes = np.clip(np.rint(projected / self.scale), -limit, limit).astype(np.int8)
        if self.bits == 8:
            return codes
        nibbles = (codes.astype(np.int16) + 8).astype(np.uint8)  # 1..15
        return (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """(n, d) float32 token vectors from their codes."""
        if self.bits == 1:  # 0/1 bits, then 2·bit − 1 written once into float32 (5× a table gather here)
            bits = np.unpackbits(codes, axis=1, count=self.dims)
            signs = np.empty(bits.shape, dtype=np.float32)
            np.multiply(bits, 2, out=signs, casting="unsafe")
            signs -= 1
            return signs
        if self.bits in (32, 16):
            return np.asarray(codes, dtype=np.float32)
        assert self.scale is not None
        if self.bits == 8:
            return codes.astype(np.float32) * self.scale
        high, low = (codes >> 4).astype(np.int8) - 8, (codes & 15).astype(np.int8) - 8
        out = np.empty((len(codes), self.dims), dtype=np.float32)
        out[:, 0::2], out[:, 1::2] = high, low
        return out * self.scale

    def prepare(self, queries: np.ndarray) -> PreparedQueries:
        """The query side of `products`, computed once for several blocks of codes: the projected rows and, for one
        bit a dimension, their fixed-point digits (`_sign_digits`)."""
        return PreparedQueries(queries, _sign_digits(queries) if self.bits == 1 else None)

    def products(self, queries: np.ndarray | PreparedQueries, codes: np.ndarray) -> np.ndarray:
        """(q, n) float32: each projected query row (`project`; or `prepare`d once for many calls) · each coded
        token's decoded vector, without writing the decoded vectors where a code allows: one bit a dimension as
        ``2 · (query · bits) − Σ query`` (the 0/1 bits as they unpack; the same dot products up to float rounding),
        int8 as ``(query ⊙ scale) · codes``."""
        import torch

        prepared = queries if isinstance(queries, PreparedQueries) else self.prepare(queries)
        bits = np.unpackbits(codes, axis=1, count=self.dims) if self.bits == 1 else None  # (n, d) 0/1
        if bits is not None and prepared.digits is not None:
            found = _sign_products(prepared.digits, bits)
            if found is not None:
                return found
        query = torch.from_numpy(np.ascontiguousarray(prepared.rows, dtype=np.float32))
        if bits is not None:  # no integer product here: the bits as float32 (numpy's cast: 5× torch's)
            ones = query @ torch.from_numpy(bits.astype(np.float32)).T
            return ones.mul_(2).sub_(query.sum(dim=1, keepdim=True)).numpy()
        if self.bits == 8:
            assert self.scale is not None
            query = query * torch.from_numpy(self.scale)
            return (query @ torch.from_numpy(codes.astype(np.float32)).T).numpy()
        return (query @ torch.from_numpy(np.ascontiguousarray(self.decode(codes))).T).numpy()

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The codec as plain arrays (``np.savez``; read back by `from_arrays`, no pickle)."""
        out = {"spec": np.asarray(self.spec), "bits": np.asarray(self.bits), "dimension": np.asarray(self.dimension)}
        if self.basis is not None:
            out["basis"] = self.basis
        if self.scale is not None:
            out["scale"] = self.scale
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray] | np.lib.npyio.NpzFile) -> TokenCodec:
        names = set(arrays.keys())
        return cls(str(arrays["spec"]), arrays["basis"] if "basis" in names else None,
                   arrays["scale"] if "scale" in names else None, int(arrays["bits"]),
                   int(arrays["dimension"]))  # fmt: skip


def read_codec(folder: str | os.PathLike[str]) -> TokenCodec | None:
    """The codec saved in a token folder (`CODEC_FILE`), or None before its first shard."""
    path = Path(folder) / CODEC_FILE
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as arrays:
        return TokenCodec.from_arrays(arrays)


def _signed(basis: np.ndarray) -> np.ndarray:
    """Each column with its largest-magnitude entry positive: the SVD's sign is arbitrary, the saved basis is not."""
    flip = np.sign(basis[np.abs(basis).argmax(axis=0), np.arange(basis.shape[1])])
    return basis * np.where(flip == 0, 1.0, flip)


_INT_DIGITS = 1 << 22  # a query row's largest value in fixed point: three signed bytes hold ±2²² (23 bits)


@dataclass(frozen=True)
class SignDigits:
    """Query rows in fixed point for `_sign_products`: 23 bits of each row's largest value (as float32's mantissa),
    cut into three signed bytes (``digits``: the high bytes of every row, then the middle, then the low), with what
    joins the products again (``twice``: 2 · each row's scale; ``sums``: each row's sum)."""

    digits: torch.Tensor  # (3q, d) int8
    twice: torch.Tensor  # (q, 1) float32
    sums: torch.Tensor  # (q, 1) float32


@dataclass(frozen=True)
class PreparedQueries:
    """`TokenCodec.prepare`: projected query rows and, for one-bit codes, their digits."""

    rows: np.ndarray
    digits: SignDigits | None


def _sign_digits(queries: np.ndarray) -> SignDigits:
    import torch

    rows = np.asarray(queries, dtype=np.float64)
    scale = np.abs(rows).max(axis=1, keepdims=True) / _INT_DIGITS
    scale[scale == 0] = 1.0
    fixed = np.rint(rows / scale).astype(np.int64)
    low = (fixed + 128) % 256 - 128
    middle = ((fixed - low) // 256 + 128) % 256 - 128
    high = (fixed - low - 256 * middle) // 65536  # within ±64
    return SignDigits(torch.from_numpy(np.concatenate([high, middle, low]).astype(np.int8)),
                      torch.from_numpy((2 * scale).astype(np.float32)),
                      torch.from_numpy(rows.sum(axis=1, keepdims=True).astype(np.float32)))  # fmt: skip


def _sign_products(query: SignDigits, bits: np.ndarray) -> np.ndarray | None:
    """(q, n) float32 ``queries · (2 · bits − 1)ᵀ`` for 0/1 `bits` (n, d), as ``2 · queries · bitsᵀ − Σ queries``
    with ``queries · bitsᵀ`` in integers: each byte's rows of the fixed-point queries (`SignDigits`) times the bits by
    ``torch._int_mm`` (int8 in, int32 out: exact; VNNI or AMX where the CPU has them: 1.6× float32 on this project's
    hosts), joined in float32. None where torch has no integer matrix product for these."""
    import torch

    try:
        parts = torch._int_mm(query.digits, torch.from_numpy(bits.view(np.int8)).T).to(torch.float32)  # each exact
    except (AttributeError, RuntimeError, NotImplementedError):
        return None
    count, twice = len(query.twice), query.twice
    out = parts[:count].mul_(twice * 65536).add_(parts[count : 2 * count].mul_(twice * 256))
    out.add_(parts[2 * count :].mul_(twice)).sub_(query.sums)
    return out.numpy()
