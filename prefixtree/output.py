"""What a fitted prefix tree publishes: the public parameters its manifest records and its
``sequences.csv|parquet`` file (the release contract of :mod:`synth.release`; Chen et al. 2012).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from prefixtree.plan import PRESET_KEYS
from synth.release import ReleaseWriter, recorded_path
from synth.taxonomy import Taxonomy, taxonomy_note

__all__ = ["taxonomy_inputs", "tree_parameters", "write_sequences", "write_sequences_file"]


def tree_parameters(model: Any) -> dict[str, Any]:
    """The public parameters of the fitted :class:`~prefixtree.PrefixTreeSynthesizer` ``model``:
    the tree's settings and plan, and how its input was read (location column, unknown
    locations, time zone, taxonomy): configuration only, nothing of the data."""
    out: dict[str, Any] = {
        "generator": model.manifest_name(),
        "variant": model.variant,
        "epsilon": model.epsilon,
        "height": model.height,
        "time_bin_minutes": model.time_bin,
        "coarse_time_bin_minutes": model.coarse_time_bin,
        "seeded": model.noise_seeded_,
        "sub_levels": [
            {
                k: (
                    None
                    if v is None or (isinstance(v, float) and math.isnan(v))
                    else int(v)
                    if k == "hint_threshold"
                    else v
                )
                for k, v in row.items()
            }
            for row in model.sub_levels_.to_dict(orient="records")
        ],
    }
    cfg = model.config_
    out["preset"] = model.preset
    out["variant"] = cfg["variant"]
    out["completion"] = cfg["completion"]
    out["threshold_rule"] = cfg["threshold_rule"]
    if cfg["threshold_rule"] == "candidates":
        out["false_children"] = cfg["false_children"]
    for key in ("budget_split", "level_weights"):
        if cfg[key] is not None:
            out[key] = (
                {str(k): v for k, v in cfg[key].items()} if key == "budget_split" else cfg[key]
            )
    if model.thresholds is not None:
        out["thresholds"] = model.thresholds
    out["hybrid_skipped"] = bool(cfg.get("hybrid_skipped"))
    out["root_share"] = cfg["root_share"]
    out["completion_hints"] = cfg["completion_hints"]
    out["max_nodes"] = int(model.max_nodes)
    out.update(model.time_parameters())  # the time model and its tables (prefixtree.factorised)
    out["chosen_by_preset"] = sorted(k for k in PRESET_KEYS if getattr(model, k) is None)
    out["tightened"] = cfg.get("tightened", 0)
    out["expected_nodes"] = round(model.estimate_.total)
    out.update(_reading_parameters(model))
    return out


def _reading_parameters(model: Any) -> dict[str, Any]:
    """How the input was read (the constructor's reading parameters and the taxonomy)."""
    tax = model.taxonomy
    return {
        "taxonomy": recorded_path(tax.source),
        "location_column": model.location_column,
        "on_unknown": model.on_unknown,
        **({"gtfs_stations": True} if getattr(tax, "gtfs_stations", False) else {}),
        **taxonomy_note(tax),
        "timezone": model.timezone or "wall clock as written",
    }


def taxonomy_inputs(taxonomy: Taxonomy | None) -> dict[str, str | os.PathLike[str]]:
    """``{"taxonomy": file}`` when ``taxonomy`` was read from a file (a public input, whose
    fingerprint the manifest records), else ``{}`` (``fanout:N``, a frame)."""
    if taxonomy is None:
        return {}
    source = Path(str(taxonomy.source))
    return {"taxonomy": source} if source.is_file() else {}


def write_sequences_file(
    chunks: Iterable[pd.DataFrame], release: ReleaseWriter, format: str
) -> dict[str, int]:
    """Write the released chunks as ``sequences.<format>`` into ``release``; returns the number
    of ``rows`` and of whole ``sequences`` written (with ``location_name`` when the release
    has public location names, :attr:`~synth.release.ReleaseWriter.names`)."""
    written = {"sequences": 0}
    if release.names is not None:
        from synth.datasheet import with_location_names

        names = release.names
        chunks = (with_location_names(chunk, names) for chunk in chunks)
    rows = write_sequences(_counted(chunks, written), release.file(f"sequences.{format}"))
    return {"rows": rows, "sequences": written["sequences"]}


def _counted(chunks: Iterable[pd.DataFrame], written: dict[str, int]) -> Iterable[pd.DataFrame]:
    """The chunks as they are, counting their sequences (whole sequences per chunk)."""
    for chunk in chunks:
        written["sequences"] += int(chunk["seq_id"].nunique())
        yield chunk


def write_sequences(frames: pd.DataFrame | Iterable[pd.DataFrame], path: Path) -> int:
    """Write the released long-format frame, or its chunks in order (e.g.
    :meth:`~prefixtree.PrefixTreeSynthesizer.iter_sample`), as CSV or Parquet (chosen by
    ``path``'s suffix), one chunk at a time; returns the number of rows written. The chunks must
    share their columns and dtypes; the file is the same as for their concatenation.
    """
    chunks = [frames] if isinstance(frames, pd.DataFrame) else frames
    parquet = path.suffix == ".parquet"
    writer: pq.ParquetWriter | pacsv.CSVWriter | None = None
    rows = 0
    try:
        for frame in chunks:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            if not parquet:  # categorical columns stay dictionary-encoded in Parquet only
                columns = [
                    col.dictionary_decode() if pa.types.is_dictionary(col.type) else col
                    for col in (c.combine_chunks() for c in table.columns)
                ]
                table = pa.table(columns, names=table.column_names)
            if writer is None:
                writer = (
                    pq.ParquetWriter(path, table.schema, compression="zstd")
                    if parquet
                    else pacsv.CSVWriter(path, table.schema)
                )
            writer.write_table(table)
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        raise ValueError("write_sequences: no frame to write")
    return rows
