"""smartnoise-synth's MST and AIM (McKenna, Miklau and Sheldon 2021; McKenna et al. 2022) on the
tables of ``bench_archetypes.py peers``, each run in a child process of a SEPARATE interpreter.

smartnoise-synth pulls in jax, torch and opendp, so it is never a dependency of transit-synth: it is
installed in its own virtual environment and named with ``--peers-python``::

    python3 -m venv /path/venv-peers && /path/venv-peers/bin/pip install smartnoise-synth

The driver writes the training table as text CSV, the child (:data:`CHILD`, run by that
interpreter through :func:`harness.child`: wall time and its own peak RSS) fits and samples, and
writes the synthetic table back; the driver scores it with the same k-marginal function as
transit-synth's releases. Every column is declared categorical with ``preprocessor_eps=0``, so
smartnoise takes each column's category list from the private table for free (as in issue 28).

Privacy unit. MST and AIM protect one row. ``k > 1`` gives a like-for-like card-level run: the
table keeps each card's first ``k`` rows (by the order column) and the synthesizer's
``cdp_rho(epsilon, delta)`` is replaced by smartnoise's own ``cdp_rho(epsilon, delta,
max_contrib=k)``: the per-row rho is the card-level rho over ``k**2`` (zCDP group privacy, Bun and
Steinke 2016), so a card changing up to ``k`` rows is covered at the stated (epsilon, delta).

Sampling. smartnoise-synth 1.0.8 requires mbi >= 1.1, < 2; mbi 1.1.0's ``synthetic_data`` default
(``method="round"``) gives each row of a parent group a child value in row order (the ranks inside
a group are not shuffled), so columns that are not linked in the model come out correlated through
the row order (on Chicago at epsilon 1 MST scores below an independent shuffle of the private
columns). The child therefore samples the fitted model twice: as released (``round``) and with
mbi's i.i.d. ``method="sample"``; both are scored, from the same fit.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
from harness import child

#: the child: fit one synthesizer, sample it both ways, write both tables and the fit+sample time
CHILD = r"""
import functools, json, sys, time
import numpy as np, pandas as pd
import snsynth.utils
from snsynth import Synthesizer
import snsynth.aim.aim, snsynth.mst.mst
spec = json.loads(sys.argv[1])
k = int(spec["k"])
for module in (snsynth.mst.mst, snsynth.aim.aim):  # per-row rho = card-level rho / k**2
    module.cdp_rho = functools.partial(snsynth.utils.cdp_rho, max_contrib=k)
np.random.seed(spec["seed"])
table = pd.read_csv(spec["train"], dtype=str, keep_default_na=False)
start = time.perf_counter()
synth = Synthesizer.create(spec["method"], epsilon=spec["epsilon"], delta=spec["delta"])
synth.fit(table, categorical_columns=list(table.columns), preprocessor_eps=0.0)
fitted = time.perf_counter() - start
synth.sample(len(table)).to_csv(spec["out"] + ".round.csv", index=False)
sampled = time.perf_counter() - start
model = type(synth.synthesizer)
model.synthetic_data = functools.partialmethod(model.synthetic_data, method="sample")
synth.sample(len(table)).to_csv(spec["out"] + ".sample.csv", index=False)
info = {"fit_s": fitted, "fit_sample_s": sampled}
with open(spec["out"] + ".json", "w") as f:
    json.dump(info, f)
"""

#: how the child's two synthetic tables are labelled in the results
SAMPLINGS = {"round": "as released (mbi 1.1 round)", "sample": "i.i.d. (mbi sample)"}


def available(python: str) -> str | None:
    """None when ``python`` imports snsynth, else why not (one line)."""
    try:
        proc = subprocess.run(
            [python, "-c", "import snsynth"], capture_output=True, text=True, timeout=300
        )
    except OSError as exc:
        return f"{python}: {exc}"
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        return f"{python} cannot import snsynth: {lines[-1]}"
    return None


def bounded(table: pd.DataFrame, id_column: str, order: str, k: int) -> pd.DataFrame:
    """Each individual's first ``k`` rows by ``order`` (ties: input order); the id dropped."""
    ranked = table.sort_values([id_column, order], kind="stable")
    return ranked.groupby(id_column, sort=False).head(k).drop(columns=[id_column])


def run_one(python: str, spec: dict[str, Any], folder: Path) -> dict[str, Any]:
    """One fit in the peers interpreter: its tables, fit+sample seconds, wall and peak RSS."""
    out = folder / f"{spec['name']}-{spec['seed']}"
    got = child([python, "-c", CHILD, json.dumps({**spec, "out": str(out)})])
    info = json.loads(Path(f"{out}.json").read_text())
    tables = {
        way: pd.read_csv(f"{out}.{way}.csv", dtype=str, keep_default_na=False) for way in SAMPLINGS
    }
    return {**info, "wall_s": got["wall_s"], "peak_rss_mb": got["peak_rss_mb"], "tables": tables}


def run_all(python: str, jobs: list[dict[str, Any]], workers: int) -> list[dict[str, Any]]:
    """Run every job (``train``: a frame, plus method, epsilon, delta, k, seed, name) with
    ``workers`` children at a time; results in job order."""
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        folder = Path(tmp)
        specs = []
        for i, job in enumerate(jobs):
            train = folder / f"train-{i}.csv"
            job["train"].to_csv(train, index=False)
            specs.append({**{k: v for k, v in job.items() if k != "train"}, "train": str(train)})
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(lambda s: run_one(python, s, folder), specs))
