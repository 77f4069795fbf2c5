"""``python -m synth`` runs the command line."""

from synth.cli import main

raise SystemExit(main())
