"""The embedded default data: real, public, in ``synth/data/`` with NOTICE and licence per folder.

* SUBE Buenos Aires smart-card taps, Tuesday 27 and Wednesday 28 November 2019
  (:func:`sube_taps`), the line metadata (:func:`sube_metadata`) and its taxonomies
  (:func:`sube_taxonomy`: branch -> line -> mode, or line -> mode);
* the Montreal STM metro network of the KDD 2012 paper (:func:`montreal_network`,
  :func:`montreal_stations`) and its station -> line taxonomy (:func:`montreal_taxonomy`);
* the Chicago taxi sample of TFX (:func:`chicago_taxi`).

Frames come back exactly as ``pandas.read_csv`` reads the upstream CSV files (same columns and
types), so code written for the upstream files works on them. :func:`path` gives the file itself
(e.g. to pass to the CLI).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

from synth.errors import ConfigError
from synth.io import read_table
from synth.taxonomy import Taxonomy

__all__ = [
    "FILES",
    "chicago_taxi",
    "montreal_network",
    "montreal_stations",
    "montreal_taxonomy",
    "notice",
    "path",
    "sube_metadata",
    "sube_taps",
    "sube_taxonomy",
]

#: name -> file under ``synth/data``.
FILES: dict[str, str] = {
    "sube_tuesday": "sube/martes_trx.parquet",
    "sube_wednesday": "sube/miercoles_trx.parquet",
    "sube_metadata": "sube/metadata_amba_2019_m1.parquet",
    "sube_branch_taxonomy": "sube/sube_branch_taxonomy.csv",
    "sube_line_taxonomy": "sube/sube_line_taxonomy.csv",
    "montreal_line_stations": "montreal/montreal_metro_line_stations.csv",
    "montreal_stations": "montreal/montreal_metro_stations.csv",
    "montreal_taxonomy": "montreal/montreal_taxonomy.csv",
    "chicago_taxi": "chicago/chicago_taxi_simple.parquet",
}


def path(name: str) -> Path:
    """Filesystem path of an embedded file (a key of :data:`FILES`)."""
    if name not in FILES:
        raise ConfigError(f"unknown dataset {name!r}; choose one of {', '.join(sorted(FILES))}")
    return Path(str(resources.files("synth").joinpath("data", *FILES[name].split("/"))))


def notice(name: str) -> str:
    """The NOTICE (source, licence, changes) of the folder holding dataset ``name``."""
    return (path(name).parent / "NOTICE").read_text(encoding="utf-8")


def sube_taps(day: str = "tuesday") -> pd.DataFrame:
    """SUBE taps of Tuesday 27/11/2019 (``"tuesday"``, 28,669 rows) or Wednesday (29,007 rows).

    Columns: id, id_tarjeta (card), modo (COL bus / TRE rail / SUB subway), lat, lon, sexo,
    interno_bus, tipo_trx_tren (rail CHECK IN / CHECK OUT), etapa_red_sube, id_linea (line),
    id_ramal (branch), id_tarifa, hora (hour), fecha (dd/mm/yyyy). ``synth.records.load_taps``
    reads it directly (``location_column="id_ramal"`` or ``"id_linea"``).
    """
    days = {"tuesday": "sube_tuesday", "wednesday": "sube_wednesday"}
    if day not in days:
        raise ConfigError(f"day must be 'tuesday' or 'wednesday', got {day!r}")
    return read_table(path(days[day]))


def sube_metadata() -> pd.DataFrame:
    """SUBE line metadata (``metadata_amba_2019_m1``): id_linea, nombre_linea, modo, id_ramal..."""
    return read_table(path("sube_metadata"))


def sube_taxonomy(level: str = "branch") -> Taxonomy:
    """SUBE taxonomy: ``"branch"`` (id_ramal -> line:<id_linea> -> mode:<modo> -> root, 398 leaves)
    or ``"line"`` (id_linea -> mode:<modo> -> root, 382 leaves); see
    :meth:`Taxonomy.from_sube_metadata` for the rule used for the one branch under two lines."""
    names = {"branch": "sube_branch_taxonomy", "line": "sube_line_taxonomy"}
    if level not in names:
        raise ConfigError(f"level must be 'branch' or 'line', got {level!r}")
    return Taxonomy.from_csv(path(names[level]))


def montreal_network() -> pd.DataFrame:
    """Montreal metro line-station rows (73: transfer stations once per line), in running order.

    Columns: line_id (STM route id 1 Green, 2 Orange, 4 Yellow, 5 Blue), line_name, seq, stop_id,
    station, all_lines, x_mtm8, y_mtm8, lat, lon.
    """
    return read_table(path("montreal_line_stations"))


def montreal_stations() -> pd.DataFrame:
    """The 68 Montreal metro stations: stop_id, station, lines (comma-separated line ids)."""
    return read_table(path("montreal_stations"), dtype={"lines": str})


def montreal_taxonomy() -> Taxonomy:
    """Station name -> ``line:<line_id>`` -> root (68 leaves, 4 lines); a transfer station goes
    under its lowest line id (Berri-UQAM, Lionel-Groulx -> 1; Jean-Talon, Snowdon -> 2)."""
    return Taxonomy.from_csv(path("montreal_taxonomy"))


def chicago_taxi() -> pd.DataFrame:
    """The 15,002 Chicago taxi trips of the TFX sample (no taxi id; see its NOTICE)."""
    return read_table(path("chicago_taxi"))
