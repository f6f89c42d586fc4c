"""`python -m harness_store.cli`."""

from . import main

main()
