"""pytest's hooks for the Python tests: the IR verifiers run on every plan the tests make (they read
BRAZE_VERIFY once, when braze first plans, so it is set before any test imports braze's module)."""

import os

os.environ.setdefault("BRAZE_VERIFY", "1")
