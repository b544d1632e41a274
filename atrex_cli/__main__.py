import sys

from atrex_cli.main import main

sys.exit(main())
