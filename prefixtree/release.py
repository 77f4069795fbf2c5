"""Fit a prefix tree on private data and write its release directory (the library side of
``transit-synth sequences``, ``run`` and ``demo``; Chen et al. 2012)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from prefixtree.synthesizer import PrefixTreeSynthesizer
from synth.errors import ConfigError, InputError
from synth.io import read_table, table_format
from synth.progress import Progress
from synth.provenance import private_inputs, write_provenance
from synth.records import load_sequences
from synth.release import check_format, warn_if_underspent
from synth.release import write_release as write_release_dir
from synth.taxonomy import Taxonomy, taxonomy_note
from synth.times import check_timezone

__all__ = ["read_locations", "release_sequences", "write_release"]


def read_locations(path: str) -> list[str]:
    """A public location list: a CSV/Parquet table (column ``location``, else the first column) or
    a text file with one location per line."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: file not found")
    if table_format(p) is not None:
        df = read_table(p, dtype={c: str for c in ("location",)})
        col = "location" if "location" in df.columns else df.columns[0]
        values = df[col].dropna().astype(str).str.strip().tolist()
    else:
        try:
            values = [line.strip() for line in p.read_text(encoding="utf-8").splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{p}: cannot read the location list (UTF-8 text): {exc}") from None
    out = [v for v in dict.fromkeys(values) if v]
    if not out:
        raise InputError(f"{p}: the location list is empty")
    return out


def write_release(frames: pd.DataFrame | Iterable[pd.DataFrame], path: Path) -> int:
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
        raise ValueError("write_release: no frame to write")
    return rows


def release_sequences(
    input: str | os.PathLike[str] | pd.DataFrame,
    out: str | os.PathLike[str],
    *,
    taxonomy: str,
    params: Mapping[str, Any],
    location_column: str | None = None,
    locations: str | os.PathLike[str] | None = None,
    on_unknown: str = "error",
    gtfs_stations: bool = False,
    gtfs_route_rule: str | None = None,
    format: str = "csv",
    seed: int | None = None,
    progress: Progress | None = None,
    source: str | os.PathLike[str] | None = None,
    timezone: str | None = None,
    provenance_key: bytes | None = None,
) -> str:
    """Write a prefix-tree release of ``input`` into ``out`` (atomically); returns a summary line.

    ``timezone``: how times are read (:mod:`synth.times`; default the wall clock as written).
    ``input`` is a file or a frame of taps or sequences (``source``: the file it came from, for
    the provenance record). With ``provenance_key``, the operator-only record of
    :mod:`synth.provenance` is written beside ``out`` (nothing about the private input goes into
    the manifest).
    ``taxonomy`` is a taxonomy spec (CSV edge list, GTFS zip or ``fanout:N`` with ``locations``);
    ``params`` are :class:`~prefixtree.PrefixTreeSynthesizer` keyword parameters other than
    ``taxonomy`` and ``random_state`` (``seed``); ``gtfs_stations``, ``gtfs_route_rule``: see
    :meth:`~synth.taxonomy.Taxonomy.from_gtfs`. What ``sequences`` and ``run`` both call.
    """
    started = time.perf_counter()
    progress = Progress(quiet=True) if progress is None else progress
    spec = str(taxonomy)
    public = _public_locations(spec, locations)
    check_format(format)
    recorded = source if source is not None else input
    provenance = (
        None if provenance_key is None else private_inputs(provenance_key, {"input": recorded})
    )
    with progress.steps("sequences", 4) as step:
        step("taxonomy")
        tax = _taxonomy(spec, public, gtfs_stations, gtfs_route_rule)
        synth = PrefixTreeSynthesizer(**params, taxonomy=tax, random_state=seed)
        synth.check_params()  # fail on bad parameters before reading the data
        check_timezone(timezone)
        step("load")
        seqs = _input_for(synth, input, tax, on_unknown, location_column, timezone)
        step("fit")
        with progress.counter("tree levels", unit="level") as levels:
            synth.set_params(
                progress=levels,
                on_unknown=on_unknown,
                location_column=location_column,
                timezone=timezone,
            )
            synth.fit(seqs)
        del seqs  # the input is not needed for the release
        step("release")
        public_inputs = {"taxonomy": spec} if Path(spec).exists() else {}
        if locations is not None:
            public_inputs["locations"] = str(locations)
        parameters = {
            **synth.parameters(),
            "taxonomy": spec,
            **_reading_parameters(tax, location_column, on_unknown, gtfs_stations, timezone),
        }
        name = f"sequences.{format}"
        written = {"sequences": 0}
        with write_release_dir(out) as release:  # streamed chunk by chunk: never held whole
            chunks = _counted(synth.iter_sample(), written)
            n_rows = write_release(chunks, release.file(name))
            release.manifest(synth.ledger_.to_dict(parameters, public_inputs))
    if provenance is not None:
        write_provenance(out, provenance, command="sequences")
    warn_if_underspent(synth.ledger_, str(out))
    return (
        f"sequences: {written['sequences']} synthetic sequences ({n_rows} rows) from a tree of "
        f"{len(synth.tree_)} nodes, epsilon {synth.ledger_.spent_epsilon:g} "
        f"-> {Path(out) / name} ({time.perf_counter() - started:.1f} s)"
    )


def _taxonomy(
    spec: str, public: list[str] | None, gtfs_stations: bool, gtfs_route_rule: str | None
) -> Taxonomy:
    """The taxonomy of ``spec`` (:meth:`~synth.taxonomy.Taxonomy.from_spec`)."""
    return Taxonomy.from_spec(
        spec, locations=public, use_stations=gtfs_stations, route_rule=gtfs_route_rule
    )


def _public_locations(spec: str, locations: str | os.PathLike[str] | None) -> list[str] | None:
    """The public location list of a ``fanout:N`` taxonomy (refused with any other taxonomy)."""
    if locations is not None and not spec.strip().lower().startswith("fanout:"):
        raise ConfigError("--locations is only used with a fanout:N taxonomy")
    return read_locations(str(locations)) if locations is not None else None


def _input_for(
    synth: PrefixTreeSynthesizer,
    input: str | os.PathLike[str] | pd.DataFrame,
    tax: Taxonomy,
    on_unknown: str,
    location_column: str | None,
    timezone: str | None,
) -> pd.DataFrame | str | os.PathLike[str]:
    """What ``fit`` reads: the file itself when an out-of-core engine counts it, else the loaded
    sequences (the per-value rules of :mod:`synth.records`)."""
    if synth.engine != "memory" and not isinstance(input, pd.DataFrame) and timezone is None:
        return input
    return load_sequences(
        input,
        taxonomy=tax,
        on_unknown=on_unknown,
        location_column=location_column,
        timezone=timezone,
    )


def _reading_parameters(
    tax: Taxonomy,
    location_column: str | None,
    on_unknown: str,
    gtfs_stations: bool,
    timezone: str | None,
) -> dict[str, Any]:
    """How the input was read, for the manifest (configuration only, nothing of the data)."""
    return {
        "location_column": location_column,
        "on_unknown": on_unknown,
        **({"gtfs_stations": True} if gtfs_stations else {}),
        **taxonomy_note(tax),
        "timezone": timezone or "wall clock as written",
    }


def _counted(chunks: Iterable[pd.DataFrame], written: dict[str, int]) -> Iterable[pd.DataFrame]:
    """The chunks as they are, counting their sequences (whole sequences per chunk): the summary
    counts what is written."""
    for chunk in chunks:
        written["sequences"] += int(chunk["seq_id"].nunique())
        yield chunk
