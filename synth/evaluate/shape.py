"""What a report shows of a release besides its scores: chain lengths, pattern supports, rows.

- :func:`length_profile`: the share of sequences of each length (lengths above ``height`` counted
  at ``height``, as a release of height h holds them) and the share with two or more boardings
  (the chains transfer analysts study);
- :func:`pattern_supports`: how many sequences of a release contain each given pattern (the
  original's top patterns, Chen et al. 2012, section 3.3), to plot real against synthetic;
- :func:`sample_rows`: rows spread through a released table, as the report shows them.

All JSON-ready; the report (:mod:`synth.report`) renders them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from synth.evaluate.patterns import pattern_support
from synth.records import encode_sequences

__all__ = ["SAMPLE_ROWS", "length_profile", "pattern_supports", "sample_rows"]

#: rows of each released table shown in the report
SAMPLE_ROWS = 8


def length_profile(seqs: pd.DataFrame, height: int) -> dict[str, Any]:
    """``{"lengths": [[length, share], ...], "multi_share": share of length >= 2}``."""
    sizes = seqs.groupby("seq_id", sort=False).size().clip(upper=height)
    n = len(sizes)
    if n == 0:
        return {"lengths": [], "multi_share": 0.0}
    shares = sizes.value_counts(normalize=True).sort_index()
    return {
        "lengths": [[int(k), float(v)] for k, v in zip(shares.index, shares, strict=True)],
        "multi_share": float((sizes >= 2).mean()),
    }


def pattern_supports(seqs: pd.DataFrame, patterns: Sequence[Sequence[str]]) -> list[int]:
    """Sequences of ``seqs`` containing each pattern (in order, gaps allowed); 0 for a pattern
    naming a location the release lacks."""
    if len(seqs) == 0:
        return [0] * len(patterns)
    locations = sorted(seqs["location"].astype(str).unique())
    codes = encode_sequences(seqs.assign(location=seqs["location"].astype(str)), locations)
    index = {loc: i for i, loc in enumerate(locations)}
    out = []
    for pattern in patterns:
        known = [index.get(str(loc)) for loc in pattern]
        out.append(0 if None in known else pattern_support(codes, known))  # type: ignore[arg-type]
    return out


def sample_rows(frame: pd.DataFrame, n: int = SAMPLE_ROWS) -> dict[str, Any]:
    """Rows spread through ``frame`` (the release's own order, no randomness): for sequences the
    whole sequences of ``n // 2`` ids evenly spaced among the ids (at most ``3 * n`` rows), else
    ``n`` evenly spaced rows. ``{"columns": [...], "rows": [[...], ...], "what": ...}``, values
    as strings."""
    if len(frame) == 0:
        head = frame
        what = "the released file is empty"
    elif "seq_id" in frame.columns:
        ids = frame["seq_id"].drop_duplicates()
        picks = ids.iloc[np.unique(np.linspace(0, len(ids) - 1, max(n // 2, 1)).astype(int))]
        head = frame[frame["seq_id"].isin(set(picks))].head(3 * n)
        what = f"{len(picks)} whole sequences spread evenly through the released file"
    else:
        head = frame.iloc[np.unique(np.linspace(0, len(frame) - 1, n).astype(int))]
        what = f"{len(head)} rows spread evenly through the released file"
    return {
        "columns": [str(c) for c in head.columns],
        "rows": [[("" if pd.isna(v) else str(v)) for v in row] for row in head.itertuples(False)],
        "what": what,
    }
