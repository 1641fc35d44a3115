"""``python -m storage.cli``: the ``hybrid-search`` command without its console script."""

from . import main

raise SystemExit(main())
