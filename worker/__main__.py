"""``python -m worker serve|worker|load|plan`` (the same subcommands as ``infermeter``)."""

from worker.cli import main

raise SystemExit(main())
