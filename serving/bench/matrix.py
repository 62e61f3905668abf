"""The bench's matrix: concurrency x prompt depth x temperature, clipped to what the engine takes.

The recipes' figures were taken at 1 and 64 streams, short and 100k-token prompts, and owners
quote both sampling settings: temperature 0 flatters speculative decoding (more drafts
accepted), so both are measured. Concurrency above ``max-num-seqs`` only queues, and a
depth past ``max_model_len`` is refused by the engine: each is clipped, with a note in the
method, rather than measured wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_CONCURRENCY = (1, 8, 64)
DEFAULT_DEPTHS = (1_000, 32_000, 100_000)
DEFAULT_TEMPERATURES = (0.0, 1.0)
DEFAULT_OUTPUT_TOKENS = 128
QUICK_CONCURRENCY = (1, 8)
QUICK_DEPTHS = (1_000, 32_000)
QUICK_OUTPUT_TOKENS = 32
VLLM_DEFAULT_MAX_NUM_SEQS = 256
MAX_CONCURRENCY = 1024
MAX_CELLS = 200
_DEPTH_RE = re.compile(r"^(\d+(?:\.\d+)?)([kKmM]?)$")


class BadAxis(ValueError):
    """An axis value that cannot be benchmarked; the message is one line naming it."""


def parse_depth(text: str) -> int:
    """``1000``, ``32k``, ``1m`` -> tokens (k = 1,000, as the recipes write 100k)."""
    match = _DEPTH_RE.match(text.strip())
    if match is None:
        raise BadAxis(f"depth {text!r}: expected a number of tokens such as 1000, 32k or 1m")
    unit = {"": 1, "k": 1_000, "m": 1_000_000}[match[2].lower()]
    tokens = int(float(match[1]) * unit)
    if tokens < 1:
        raise BadAxis(f"depth {text!r}: must be at least 1 token")
    return tokens


def depth_label(tokens: int) -> str:
    """Tokens as the recipes write them: 1k, 32k, 100k, 1m."""
    if tokens >= 1_000_000 and tokens % 1_000_000 == 0:
        return f"{tokens // 1_000_000}m"
    if tokens >= 1_000 and tokens % 1_000 == 0:
        return f"{tokens // 1_000}k"
    return str(tokens)


@dataclass(frozen=True, slots=True)
class Axes:
    """What a run asks for, before clipping."""

    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    depths: tuple[int, ...] = DEFAULT_DEPTHS
    temperatures: tuple[float, ...] = DEFAULT_TEMPERATURES
    output_tokens: int = DEFAULT_OUTPUT_TOKENS

    @classmethod
    def quick(cls) -> Axes:
        """The small matrix for a first look (about half a minute on a healthy rig)."""
        return cls(QUICK_CONCURRENCY, QUICK_DEPTHS, DEFAULT_TEMPERATURES, QUICK_OUTPUT_TOKENS)

    def check(self) -> None:
        """``BadAxis`` for an axis nothing can be measured on."""
        if not self.concurrency or not self.depths or not self.temperatures:
            raise BadAxis("every axis needs at least one value")
        for streams in self.concurrency:
            if not 1 <= streams <= MAX_CONCURRENCY:
                raise BadAxis(f"concurrency {streams}: must be 1 to {MAX_CONCURRENCY}")
        for temperature in self.temperatures:
            if not 0.0 <= temperature <= 2.0:
                raise BadAxis(f"temperature {temperature:g}: must be 0 to 2")
        if not 2 <= self.output_tokens <= 4096:
            raise BadAxis(f"output tokens {self.output_tokens}: must be 2 to 4096")
        cells = len(self.concurrency) * len(self.depths) * len(self.temperatures)
        if cells > MAX_CELLS:
            raise BadAxis(f"{cells} cells: at most {MAX_CELLS} in one run")


@dataclass(frozen=True, slots=True)
class Cell:
    """One point of the matrix."""

    concurrency: int
    depth_tokens: int
    temperature: float

    @property
    def key(self) -> str:
        """``c8-d32k-t0``: the cell's name in tables and the store."""
        return f"c{self.concurrency}-d{depth_label(self.depth_tokens)}-t{self.temperature:g}"


@dataclass(frozen=True, slots=True)
class Plan:
    """The cells to run, in order, and why some asked for were changed."""

    cells: tuple[Cell, ...]
    concurrency: tuple[int, ...]
    depths: tuple[int, ...]
    temperatures: tuple[float, ...]
    output_tokens: int
    notes: tuple[str, ...]


def _unique(values: list[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(values))


def plan(axes: Axes, max_num_seqs: int, max_model_len: int | None) -> Plan:
    """The matrix clipped to the engine: concurrency to ``max_num_seqs``, depths to fit."""
    axes.check()
    notes: list[str] = []
    concurrency: list[int] = []
    for streams in axes.concurrency:
        if streams > max_num_seqs:
            notes.append(
                f"concurrency {streams} clipped to {max_num_seqs} (max-num-seqs: more streams "
                "would only queue)"
            )
        concurrency.append(min(streams, max_num_seqs))
    depths: list[int] = []
    room = None if max_model_len is None else max_model_len - axes.output_tokens - 64
    for depth in axes.depths:
        if room is not None and depth > room:
            if room < 1:
                raise BadAxis(
                    f"max_model_len {max_model_len} leaves no room for {axes.output_tokens} "
                    "output tokens"
                )
            notes.append(
                f"depth {depth_label(depth)} clipped to {room} tokens (max_model_len "
                f"{max_model_len} less the output)"
            )
        depths.append(depth if room is None else min(depth, room))
    clipped_c, clipped_d = _unique(concurrency), _unique(depths)
    temperatures = tuple(dict.fromkeys(axes.temperatures))
    cells = tuple(
        Cell(streams, depth, temperature)
        for depth in clipped_d
        for streams in clipped_c
        for temperature in temperatures
    )
    return Plan(cells, clipped_c, clipped_d, temperatures, axes.output_tokens, tuple(notes))


def max_num_seqs_of(extra_args: tuple[str, ...]) -> int:
    """``--max-num-seqs`` from a recipe's flags (vLLM's default when it has none)."""
    for index, arg in enumerate(extra_args):
        if arg.startswith("--max-num-seqs="):
            value = arg.split("=", 1)[1]
        elif arg == "--max-num-seqs" and index + 1 < len(extra_args):
            value = extra_args[index + 1]
        else:
            continue
        try:
            return max(int(value), 1)
        except ValueError:
            break
    return VLLM_DEFAULT_MAX_NUM_SEQS
