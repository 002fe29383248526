"""`python -m harness.cli`: the fusionbench command."""

import sys

from harness.cli.main import main

sys.exit(main())
