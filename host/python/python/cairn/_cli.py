"""The `cairn` console script: the whole command line, run by the extension module."""

import signal
import sys

from . import _cairn


def main() -> None:
    # As the native binary: Ctrl-C ends the command (Python would hold it until Cairn returns).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_cairn.command(["cairn", *sys.argv[1:]]))
