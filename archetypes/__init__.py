"""GMM-archetype trip synthesizer (GooseDP, NIST Differential Privacy Temporal Map Challenge)."""

from archetypes.column_completion import ColumnCompleter
from archetypes.datasets import chicago_taxi_schema, chicago_taxi_trips, sube_schema, sube_trips
from archetypes.model import ArchetypeModel
from archetypes.schema import Column, TripSchema
from archetypes.synthesizer import ArchetypeSynthesizer
from archetypes.trip_sources import TripSource

__all__ = [
    "ArchetypeModel",
    "ArchetypeSynthesizer",
    "Column",
    "ColumnCompleter",
    "TripSchema",
    "TripSource",
    "chicago_taxi_schema",
    "chicago_taxi_trips",
    "sube_schema",
    "sube_trips",
]
