"""The `cairn` console script: the whole command line, run by the extension module."""

import os
import signal
import sys

from . import _cairn


def main() -> None:
    # As the native binary: Ctrl-C ends the command (Python would hold it until Cairn returns).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # What `cairn claude-code install` and the like write into an agent's settings: this
    # script, not the interpreter that runs it.
    os.environ.setdefault("CAIRN_EXE", os.path.abspath(sys.argv[0]))
    sys.exit(_cairn.command(["cairn", *sys.argv[1:]]))
