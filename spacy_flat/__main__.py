"""`python -m spacy_flat`: the command line of `spacy_flat.cli.main`."""

import sys

from .cli.main import main

sys.exit(main())
