"""The datasheet of a release: ``README.md`` and ``datasheet.json``, for the public.

Every release directory (written by :func:`synth.release.write_release`) carries a plain-language
datasheet in the spirit of Gebru et al. 2021 ("Datasheets for datasets"): what each file holds,
column by column; the location names when a public source has them (a GTFS feed's ``stop_name``
and ``route_short_name``, or a names file ``location,name`` given as the public input
``names``); the privacy guarantee in one sentence per unit; what was truncated or bounded; and the
distortions the method makes by design.

It is written from public facts only: the manifest (the privacy ledger and the public
parameters), the data files' column headers (fixed by the configuration) and public input files.
Never from the private data, and never from the noisy data values either, so the datasheet is
the same bytes on neighbouring datasets (checked by ``tests/dp/test_release_neighbours.py`` like
every other published file).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from synth.errors import ConfigError, InputError
from synth.registry import SheetFacts, for_manifest

__all__ = [
    "DATASHEET_JSON",
    "DATASHEET_README",
    "archetypes_details",
    "archetypes_facts",
    "build_datasheet",
    "check_public_names",
    "guarantee_sentence",
    "location_names",
    "opal_details",
    "opal_facts",
    "prefixtree_details",
    "prefixtree_facts",
    "read_names",
    "render_readme",
    "with_location_names",
]

DATASHEET_README = "README.md"
DATASHEET_JSON = "datasheet.json"
#: at most this many location names are listed in README.md (all are in datasheet.json)
README_NAMES = 40

#: column -> what it holds (columns of the trips schema are described from schema.json)
_COLUMNS = {
    "seq_id": "synthetic passenger number (0, 1, ...); not a real card or person",
    "pos": "position of the location in the passenger's sequence (0 = first)",
    "location": "location id (station, line or zone, as in the public taxonomy)",
    "time": "time of the tap, floored to the time bin (HH:MM)",
    "location_name": "the location's public name (from the public names file or GTFS feed; "
    "empty when it has none)",
    "mode": "travel mode (bus, train, ...)",
    "day": "service day",
    "count": "noisy number of taps in this cell (cells below the threshold are absent)",
}


#: marginal releases whose unit is one row (a tap or a trip), not a card
_ROW_UNITS = ("tap", "trip", "row", "None")


def _fmt(x: float) -> str:
    return f"{x:g}"


def _unit_phrase(manifest: Mapping[str, Any]) -> str:
    unit = str(manifest.get("privacy_unit") or "individual")
    spec = for_manifest(manifest)
    phrase = None if spec is None else spec.sheet_facts(manifest).unit
    return phrase or f"one {unit}"


def guarantee_sentence(manifest: Mapping[str, Any]) -> str:
    """The guarantee of ``manifest`` in one plain sentence (its unit, epsilon, delta)."""
    cap = manifest.get("guarantee") or manifest.get("cap") or {}
    eps = float(cap.get("epsilon", math.nan))
    delta = float(cap.get("delta", 0.0))
    factor = math.exp(eps) if eps < 700 else math.inf
    shown = f"{factor:.2f}" if factor < 10 else f"{factor:,.0f}"
    text = (
        f"Adding or removing {_unit_phrase(manifest)} changes the probability of any output of "
        f"this release by at most a factor e^{_fmt(eps)} (about {shown})"
    )
    if delta:
        text += f", except with probability at most {delta:.2g} (delta)"
    scope = (manifest.get("parameters") or {}).get("budget_scope")
    if scope and str(scope).startswith("each"):
        text += f"; the budget applies to {scope}"
    return text + f": epsilon {_fmt(eps)}, delta {delta:g} per {manifest.get('privacy_unit')}."


# --------------------------------------------------------------------------- per generator
# What the datasheet and the report say of each shipped generator's method (the ``datasheet`` and
# ``details`` of its spec, :data:`synth.registry.SHIPPED`), from its public parameters.
def prefixtree_details(params: Mapping[str, Any]) -> str:
    """The report's words on a prefix-tree release (Chen et al. 2012): variant, height."""
    return f"{params.get('variant')} variant, height {params.get('height')}"


def archetypes_details(params: Mapping[str, Any]) -> str:
    """The report's words on an archetypes release: how many archetypes."""
    return f"{params.get('n_archetypes')} archetypes"


def opal_details(params: Mapping[str, Any]) -> str:
    """The report's words on an Opal release (Asghar et al. 2018): mode, time bins."""
    return f"{params.get('mode')} mode, {params.get('bin_minutes')}-minute bins"


def prefixtree_facts(manifest: Mapping[str, Any]) -> SheetFacts:
    """The datasheet of a prefix-tree release (Chen et al. 2012): a card with all its taps; the
    height and the node bound; cut sequences, absent rare paths, noisy counts."""
    p = manifest.get("parameters") or {}
    unit = str(manifest.get("privacy_unit") or "individual")
    bounds = [f"height h = {p.get('height')}: each sequence is cut to its first h locations"]
    if p.get("time_bin_minutes"):
        bounds.append(f"times counted in {p['time_bin_minutes']}-minute bins (floored)")
    bounds.append(f"the model holds at most {p.get('max_nodes'):,} tree nodes (a memory bound)")
    distortions = [
        f"sequences longer than h = {p.get('height')} are cut: long journeys are missing their end",
        "rare paths (below the noisy threshold of their tree level) are absent",
        "counts carry noise: small groups of passengers are over- or under-represented; "
        "chains of several boardings tend to be shorter than in reality",
        "the number of passengers is itself noisy",
        *([_random_minute(int(p["time_bin_minutes"]))] if p.get("time_bin_minutes") else []),
    ]
    return SheetFacts(f"one {unit} (with all its taps)", tuple(bounds), tuple(distortions))


def archetypes_facts(manifest: Mapping[str, Any]) -> SheetFacts:
    """The datasheet of an archetypes release (GooseDP, NIST 2020): an individual's rows, at most
    k kept; binned values; relations carried by the archetypes only."""
    p = manifest.get("parameters") or {}
    unit = str(manifest.get("privacy_unit") or "individual")
    column = p.get("id_column") or "id"
    k = p.get("max_records_per_individual")
    kept = f", at most {k} of them used" if k else ""
    order = p.get("order_column")
    bounds: tuple[str, ...] = (
        f"at most k = {p.get('max_records_per_individual')} rows per {p.get('id_column')} (the "
        "first " + (f"by {order})" if order else "as read)"),
        f"{p.get('n_archetypes')} archetypes; values binned to the public schema",
    )
    joint = p.get("joint") if isinstance(p.get("joint"), Mapping) else None
    if joint and joint.get("max_records_per_individual"):  # the joint tables' own bound
        bounds += (
            f"the joint trip tables count at most {joint['max_records_per_individual']} trips "
            f"per {p.get('id_column')}, spread over its day (not the first ones)",
        )
        caps = [
            c
            for m in joint.get("measurements") or []
            if isinstance(m, Mapping)
            for c in m.get("per_cell_caps") or []
            if c is not None
        ]
        if caps:  # the per-cell cap (archetypes.measure.capped_counts)
            bounds += (
                f"the joint trip tables count each {p.get('id_column')} at most {max(caps)} "
                "time(s) per cell (the cards riding a line, not their rides), mapped back to "
                "trips by the public trips' ratio of trips to such counts",
            )
    distortions = (
        "individuals with more than k rows keep only k",
        "continuous values (times, amounts) are drawn within public bins, not measured",
        _relations(joint, manifest),
    )
    rows = (
        f"one row of the input: its layout gives each row its own {column}"
        if p.get("one_row_per_id")
        else f"all the rows that share one {column} value{kept}"
    )
    return SheetFacts(f"one {unit} ({rows})", bounds, distortions)


def _relations(joint: Mapping[str, Any] | None, manifest: Mapping[str, Any]) -> str:
    """What carries the relations between columns: the joint model's measured two-way tables
    (named, from the manifest), else the archetypes and completion columns."""
    pairs = [
        " x ".join(map(str, table))
        for m in (joint or {}).get("measurements") or []
        for table in m.get("tables") or []
        if len(table) == 2
    ]
    if joint is None:
        return (
            "relations between columns hold only as far as the archetypes and completion "
            "columns carry them"
        )
    public = any(
        isinstance(f, Mapping) and f.get("role") == "public"
        for f in (manifest.get("inputs") or {}).get("public") or []
    )
    other = (
        "come from the public trips"
        if public
        else "hold only as far as these tables link them (no public trips)"
    )
    measured = f"the noisy two-way tables of {', '.join(pairs)}" if pairs else "no two-way table"
    return (
        f"relations between columns: {measured} (manifest parameters.joint.measurements) "
        f"measure them; the other pairs {other}"
    )


def opal_facts(manifest: Mapping[str, Any]) -> SheetFacts:
    """The datasheet of an Opal release (Asghar et al. 2018): a card with its taps (at most k
    counted per side) or one row; bins, levels, suppression thresholds; absent small cells."""
    p = manifest.get("parameters") or {}
    unit = str(manifest.get("privacy_unit") or "individual")
    per_row = str(p.get("privacy_unit")) in _ROW_UNITS
    k = p.get("max_contributions")
    phrase = (
        f"one {unit}"
        if per_row
        else f"one {unit} (with all its taps, at most {k} counted per side)"
    )
    bounds = [f"times in {p.get('bin_minutes')}-minute bins"]
    if k and not per_row:
        bounds.append(
            f"at most {k} taps per {p.get('privacy_unit')} counted on each side (tap-on, "
            "tap-off), "
            + (
                "a uniform random choice among its taps (the counts keep the profile of "
                "all taps in expectation)"
                if p.get("bounding") == "uniform"
                else "the first by time (the counts lean to early taps)"
            )
        )
    if p.get("level") is not None:
        bounds.append(f"locations at taxonomy level {p['level']}")
    for spend in manifest.get("spends") or []:
        if spend.get("threshold") is not None:
            bounds.append(
                f"{spend.get('label')}: cells with a noisy count below "
                f"{float(spend['threshold']):g} are suppressed (absent from the file)"
            )
    derived = {
        name: str(t["derived_from"])
        for name, t in sorted((p.get("tables") or {}).items())
        if isinstance(t, Mapping) and t.get("derived_from")
    }
    bounds += [
        f"{name}: the sums of the published cells of {source} (consistent mode), not a "
        "measurement of its own"
        for name, source in derived.items()
    ]
    distortions: tuple[str, ...] = (
        "cells whose noisy count is below the threshold are absent (treat as small, not zero)",
        "each count carries noise; totals over many cells add the noise of each",
        "taps beyond the per-unit limit are not counted",
    )
    if derived:
        distortions += (
            "the summed tables leave out the taps of the suppressed cells they sum: their counts "
            "and totals are lower than the data's, most for rare times and locations",
        )
    return SheetFacts(phrase, tuple(bounds), distortions)


def _random_minute(minutes: int) -> str:
    """Timed sequences are sampled per bin, the minute within a bin uniform (prefixtree.timing)."""
    start = (8 * 60 + 35) // minutes * minutes
    end = start + minutes - 1
    return (
        f"only the {minutes}-minute bin of a time is modelled: the minute within it is drawn at "
        f"random (uniform; a sequence's times sorted), so a synthetic 08:35 says "
        f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}, not a measured minute"
    )


def _header(path: Path) -> list[str]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    with path.open(encoding="utf-8") as handle:
        first = handle.readline().strip()
    return [c.strip('"') for c in first.split(",")] if first else []


def _schema_meaning(name: str, spec: Any) -> str:
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if kind == "id":
        return f"synthetic {name}: groups the rows of one made-up individual; not a real identifier"
    if kind == "categorical":
        n = len(spec.get("values") or [])
        other = f"; values outside it become {spec['other']!r}" if spec.get("other") else ""
        return f"one of {n:,} public values (listed in schema.json){other}"
    if kind == "numeric":
        return (  # the schema rounds every number to an integer (archetypes.schema.conform)
            f"a whole number between {spec.get('min')} and {spec.get('max')} (the public range; "
            "input values were rounded to whole numbers)"
        )
    if kind == "coordinate":
        return (
            f"number {spec.get('part')} of the trip's {spec.get('source')} label, between "
            f"{spec.get('min')} and {spec.get('max')} (the public range)"
        )
    return "see schema.json"


def _schema_columns(folder: Path) -> dict[str, str]:
    import json

    path = folder / "schema.json"
    if not path.is_file():
        return {}
    schema = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(schema, dict):
        return {}
    return {str(name): _schema_meaning(str(name), spec) for name, spec in schema.items()}


def read_names(path: str | os.PathLike[str]) -> dict[str, str]:
    """Public location names: a CSV ``location,name``, or a GTFS zip (``stop_name`` per stop id,
    ``route_short_name`` (else ``route_long_name``) per ``route:<route_id>``)."""
    source = Path(path)
    if source.suffix == ".zip":
        from synth.gtfs import read_gtfs

        try:
            tables = read_gtfs(source, {"stops.txt": ["stop_id"], "routes.txt": ["route_id"]})
        except InputError:
            return {}
        names: dict[str, str] = {}
        stops = tables.get("stops.txt")
        if stops is not None and "stop_name" in stops:
            named = stops[stops["stop_name"].notna()]
            names.update(zip(named["stop_id"], named["stop_name"], strict=True))
        routes = tables.get("routes.txt")
        if routes is not None:
            label = next((c for c in ("route_short_name", "route_long_name") if c in routes), None)
            if label is not None:
                for rid, name in zip(routes["route_id"], routes[label], strict=True):
                    if isinstance(name, str) and name:
                        names[f"route:{rid}"] = name
        return names
    if not source.is_file():
        raise InputError(f"{source}: names file not found")
    try:
        frame = pd.read_csv(source, dtype=str, keep_default_na=False, encoding="utf-8")
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"{source}: not a readable CSV names file ({exc})") from exc
    if list(frame.columns[:2]) != ["location", "name"]:
        raise InputError(f"{source}: a names file has the columns location,name")
    return dict(zip(frame["location"], frame["name"], strict=True))


def location_names(public_inputs: Mapping[str, str | os.PathLike[str]]) -> dict[str, str]:
    """The public names a release's ``location_name`` column is filled from (``--location-names``):
    the ``names`` file, else a GTFS zip taxonomy's; a ConfigError when there are none. Public
    configuration only, never the private data, so the column is as public as the location."""
    names, _ = _public_names(public_inputs)
    if not names:
        raise ConfigError(
            "--location-names needs public names: a --names file (location,name) or a GTFS zip "
            "--taxonomy"
        )
    return names


def check_public_names(
    names: str | os.PathLike[str] | None,
    name_column: bool,
    taxonomy: str | os.PathLike[str] | None,
) -> None:
    """Before any data is read: a bad ``--names`` file fails (:func:`read_names`), and so does
    a ``location_name`` column (``name_column``, ``--location-names``) without public names
    (:func:`location_names`)."""
    if names is not None:
        read_names(names)
    if name_column:
        location_names({k: v for k, v in (("names", names), ("taxonomy", taxonomy)) if v})


def with_location_names(frame: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """``frame`` with a ``location_name`` column after its ``location`` column (a location
    without a public name gets an empty name); other frames as they are. Each row on its own."""
    if "location" not in frame.columns or "location_name" in frame.columns:
        return frame
    out = frame.copy()
    named = out["location"].astype(str).map(dict(names)).fillna("")
    out.insert(list(out.columns).index("location") + 1, "location_name", named.astype(str))
    return out


def _public_names(public_inputs: Mapping[str, str | os.PathLike[str]]) -> tuple[dict, str | None]:
    for role in ("names", "taxonomy"):
        path = public_inputs.get(role)
        if path is None or not Path(path).is_file():
            continue
        if role == "taxonomy" and Path(path).suffix != ".zip":
            continue
        names = read_names(path)
        if names:
            return names, f"{role} file {Path(path).name}"
    return {}, None


def build_datasheet(
    folder: str | os.PathLike[str],
    manifest: Mapping[str, Any],
    public_inputs: Mapping[str, str | os.PathLike[str]] | None = None,
) -> dict[str, Any]:
    """The datasheet of the release in ``folder`` (its data files written) with ``manifest``."""
    from synth import __version__

    root = Path(folder)
    spec = for_manifest(manifest)
    facts = SheetFacts() if spec is None else spec.sheet_facts(manifest)
    described = {**_COLUMNS, **_schema_columns(root)}
    minutes = (manifest.get("parameters") or {}).get("time_bin_minutes")
    if minutes:  # a timed sequences release: the bin is sampled, the minute within it random
        described["time"] = (
            f"clock time (HH:MM) of the tap: a sampled {minutes}-minute bin, the minute within it "
            "drawn at random"
        )
    files = []
    for path in sorted(root.iterdir()):
        if path.suffix in (".csv", ".parquet") and not path.name.startswith("."):
            columns = [
                {"name": c, "meaning": described.get(c, "see the manifest's parameters")}
                for c in _header(path)
            ]
            files.append({"file": path.name, "columns": columns})
    names, source = _public_names(public_inputs or {})
    cap = manifest.get("guarantee") or manifest.get("cap") or {}
    return {
        "title": f"{spec.title if spec else 'Synthetic data'} (transit-synth {__version__})",
        "what": spec.summary if spec else "A differentially private release.",
        "files": files,
        "other_files": {
            "manifest.json": "the privacy ledger: every noisy step, its unit, sensitivity, "
            "epsilon and delta; the guarantee is its 'guarantee' entry",
            **(
                {"schema.json": "the public value domains"}
                if (root / "schema.json").is_file()
                else {}
            ),
        },
        "privacy": {
            "unit": manifest.get("privacy_unit"),
            "neighbouring": manifest.get("neighbouring"),
            "epsilon": cap.get("epsilon"),
            "delta": cap.get("delta"),
            "in_words": guarantee_sentence(manifest),
        },
        "bounded": list(facts.bounds),
        "distortions": list(facts.distortions),
        "location_names": {"source": source, "names": dict(sorted(names.items()))},
    }


def _md_cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_readme(sheet: Mapping[str, Any]) -> str:
    """``README.md`` of a datasheet (:func:`build_datasheet`)."""
    lines = [f"# {sheet['title']}", "", sheet["what"], "", "## Privacy guarantee", ""]
    lines += [sheet["privacy"]["in_words"], ""]
    lines += [
        "This is what counts: the manifest's `spent` and `remaining` are bookkeeping of the noisy "
        "steps and neither weakens nor strengthens it.",
        "",
        "## Files",
        "",
    ]
    if len(sheet["files"]) == 1:
        f = sheet["files"][0]
        lines += [f"### `{f['file']}`", "", "| column | what it holds |", "|---|---|"]
        lines += [f"| `{_md_cell(c['name'])}` | {_md_cell(c['meaning'])} |" for c in f["columns"]]
        lines.append("")
    elif sheet["files"]:  # one table of files, then each column once
        lines += ["| file | columns |", "|---|---|"]
        for f in sheet["files"]:
            columns = ", ".join(f"`{c['name']}`" for c in f["columns"])
            lines.append(f"| `{f['file']}` | {columns} |")
        meanings = {c["name"]: c["meaning"] for f in sheet["files"] for c in f["columns"]}
        lines += ["", "| column | what it holds |", "|---|---|"]
        lines += [f"| `{_md_cell(k)}` | {_md_cell(v)} |" for k, v in meanings.items()]
        lines.append("")
    lines += ["Other files:", ""]
    for name, text in sheet["other_files"].items():
        lines.append(f"- `{name}`: {text}")
    lines += ["", "## What was truncated or bounded", ""]
    lines += [f"- {b}" for b in sheet["bounded"]] or ["- nothing"]
    lines += ["", "## Known distortions (by design)", ""]
    lines += [f"- {d}" for d in sheet["distortions"]] or ["- none stated"]
    names = sheet["location_names"]
    located = any(c["name"] == "location" for f in sheet["files"] for c in f["columns"])
    if located or names["names"]:
        lines += ["", "## Location names", ""]
    if not located and not names["names"]:
        pass
    elif names["names"]:
        shown = list(names["names"].items())[:README_NAMES]
        named = any(c["name"] == "location_name" for f in sheet["files"] for c in f["columns"])
        where = " The data files carry them in their `location_name` column." if named else ""
        lines += [f"From the public {names['source']}.{where}", "", "| location | name |"]
        lines.append("|---|---|")
        lines += [f"| `{_md_cell(k)}` | {_md_cell(v)} |" for k, v in shown]
        if len(names["names"]) > README_NAMES:
            lines += ["", f"... {len(names['names']) - README_NAMES:,} more in datasheet.json."]
    else:
        lines.append(
            "No public names were given: locations are the ids of the public taxonomy "
            "(give a GTFS feed or a names file `location,name` to list names)."
        )
    lines += ["", "Written by transit-synth from public facts and the manifest only.", ""]
    return "\n".join(lines)
