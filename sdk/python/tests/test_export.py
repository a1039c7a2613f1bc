"""The edge, against the bindings componentize-py really generates for each world.

Needs `componentize-py` (0.25.1) on PATH to generate the bindings; skipped without it. Each
world runs in its own interpreter, since all three name their bindings module `wit_world`.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SDK = Path(__file__).resolve().parents[1]
WIT = SDK.parents[1] / "wit" / "0.2.0"
PROBE = Path(__file__).with_name("edge_probe.py")


@unittest.skipUnless(shutil.which("componentize-py"), "componentize-py is not installed (pip install componentize-py==0.25.1)")
@unittest.skipUnless(WIT.is_dir(), "no wit/0.2.0 beside the SDK (outside the Cairn repository)")
class GeneratedBindings(unittest.TestCase):
    def probe(self, world: str) -> None:
        with tempfile.TemporaryDirectory() as bindings:
            subprocess.run(["componentize-py", "-d", str(WIT), "-w", world, "bindings", bindings], check=True, capture_output=True)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([bindings, str(SDK)])}
            run = subprocess.run([sys.executable, str(PROBE), world], env=env, capture_output=True, text=True, cwd=SDK)
        self.assertEqual((run.returncode, run.stdout.strip()), (0, "ok"), run.stderr)

    def test_strategy(self):
        self.probe("strategy")

    def test_trigger(self):
        self.probe("trigger")

    def test_commit_policy(self):
        self.probe("commit-policy")


if __name__ == "__main__":
    unittest.main()
