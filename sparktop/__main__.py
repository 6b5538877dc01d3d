"""``python -m sparktop``."""

from sparktop.cli import main

raise SystemExit(main())
