"""`python -m lengthwise.cli`: the same as the `lengthwise` script (torchrun uses it)."""

from lengthwise.cli import main

main()
