"""Pulumi entry point (what ``pulumi up`` runs): the program lives in :mod:`components.program`."""

from components.program import main

main()
