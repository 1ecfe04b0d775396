"""`python -m minixla ...` is the `minixla` command."""

import sys

from .cli import main

sys.exit(main())
