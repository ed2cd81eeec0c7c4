"""The recipes run against the real frameworks; PostgreSQL ones need CLOCKFLAKE_PG_URL
(make test-recipes starts a throwaway server and sets it)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
