"""Issue 22's memory: what the daemon imports stays what it needs. importlib.metadata (the
sub-commands' entry points, ~0.8 MiB of RSS) is loaded only for a sub-command or ``--help``."""

from __future__ import annotations

import subprocess
import sys


def test_the_daemon_does_not_load_importlib_metadata_until_the_help_asks() -> None:
    script = (
        "import sys\n"
        "from exporter.cli import build_parser\n"
        "import exporter.app\n"
        "build_parser().parse_args(['--config.file', 'x.yml'])\n"
        "assert 'importlib.metadata' not in sys.modules, 'loaded at start'\n"
        "assert 'Sub-commands: demo, simulate' in build_parser().format_help()\n"
        "assert 'importlib.metadata' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
