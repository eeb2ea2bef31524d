"""`python -m spacy_flat`: the commands of `python -m spacy flat`, run by `spacy_flat.cli.main`."""

import sys

from .cli.main import main

sys.exit(main())
