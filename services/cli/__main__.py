"""`python -m mqstore.services.cli`: the `mqstore` command."""

import sys

from mqstore.services.cli.command import main

sys.exit(main())
