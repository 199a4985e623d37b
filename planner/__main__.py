"""``python -m planner`` runs the ``planner`` command."""

from planner.cli import main

main()
