"""Where the repository and its tests are, for tests at any depth under tests/."""

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
