"""The Relax tests run only where the installed TVM is apache-tvm >= 0.20 (Relax, no Relay).

In the Relay environment (TVM 0.19, the default stack) every test module here but
``test_environment.py`` is left uncollected, and that one checks the missing-dependency error,
so ``pytest tests/relax`` there passes without touching apache-tvm's API.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py, relay_plans.py, route_diff.py


from relax_env import RELAX  # noqa: E402

# Every module that imports apache-tvm's API (test_relax*.py: the adapter and its command line).
collect_ignore_glob = [] if RELAX else ["test_relax*.py", "test_byoc_*.py", "test_build.py", "test_op_profile.py",
                                          "test_torch_export.py", "test_clip.py", "test_vdevice.py", "relay_plans.py",
                                          "test_routes.py"]
collect_ignore = ["models.py", "relay_plans.py", "relax_env.py", "helpers.py", "route_diff.py"]
