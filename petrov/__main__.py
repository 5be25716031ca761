"""``python -m petrov ...``: the ``petrov`` command (also what ``torchrun -m petrov`` starts)."""
import sys

from petrov.cli import main

sys.exit(main())
