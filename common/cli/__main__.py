"""``python -m common.cli``: the ``dfa`` command without its console script."""
import sys

from common.cli import main

sys.exit(main())
