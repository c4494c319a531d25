"""Child processes of the tests: the real ``ledger-exporter`` process, and stopping any child.

``ExporterProcess`` runs ``python -m exporter`` on ``127.0.0.1:0`` with its log in a file
(a pipe nobody reads would block a chatty exporter), reads the port it bound from its
"started" line, and stops it with SIGTERM, checking that every line it logged parses as
logfmt (or JSON). ``ready_exporter`` is the usual way to use it: a
ready exporter for the ``with`` block, which must then exit with status 0.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.support.http import fetch
from tests.support.loglines import parse_log
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

#: The port in the exporter's "started" line, in logfmt or JSON.
_STARTED = re.compile(r'ledger-exporter started.*?\bport"?[=:] ?(\d+)')


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Terminate a test's child process; kill it when it does not end within ``timeout``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ServerProcess:
    """A test's server process (Prometheus, Alertmanager) with its output in ``log_file``:
    started by the subclass's ``start`` through :meth:`launch`, stopped by :meth:`stop` or at
    the end of a ``with`` block."""

    log_file: Path
    _process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        raise NotImplementedError

    def launch(
        self,
        command: Sequence[str],
        ready: Callable[[], bool],
        failure: type[AssertionError],
        timeout: float = 30.0,
    ) -> None:
        """Start ``command`` and wait until ``ready``; ``failure`` (naming the log) when it
        exits first or is not ready within ``timeout`` (the process is stopped then)."""
        name = Path(command[0]).name
        with self.log_file.open("wb") as log:
            process = subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT)
        self._process = process

        def answered() -> bool:
            if process.poll() is not None:
                raise failure(f"{name} exited with {process.returncode}: {self.log()}")
            return ready()

        try:
            wait_until(answered, timeout=timeout, interval=0.2,
                       message=lambda: f"{name} not ready: {self.log()}")  # fmt: skip
        except AssertionError:
            self.stop()
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate, wait, kill when it does not end in time."""
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, timeout)

    def kill(self) -> None:
        """SIGKILL: the process crashes, with no chance to tell anyone (a lost replica)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    @property
    def running(self) -> bool:
        """Started and not ended (stopped, killed or crashed)."""
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def log(self) -> str:
        """What the process wrote (warnings and errors), for failure messages."""
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return "<no log>"


def exporter_command(*args: str) -> list[str]:
    """``python -m exporter ARGS`` with this interpreter."""
    return [sys.executable, "-m", "exporter", *args]


class ExporterProcess:
    """``python -m exporter --config.file=CONFIG FLAGS`` on a port of its own choosing; its
    log (stderr) goes to a file beside the config. The log level must show the "started"
    line (info, the default, or debug). ``wrapped_in``: a command that runs it (its last
    arguments), such as ``unshare`` giving it a mount namespace of its own."""

    def __init__(
        self,
        config: Path,
        *flags: str,
        start_timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        wrapped_in: Sequence[str] = (),
    ) -> None:
        with tempfile.NamedTemporaryFile(
            dir=config.parent, prefix="exporter-", suffix=".log", delete=False
        ) as log:
            self.log_path = Path(log.name)
            self.process = subprocess.Popen(
                [
                    *wrapped_in,
                    *exporter_command(
                        f"--config.file={config}", "--web.listen-address=127.0.0.1:0", *flags
                    ),
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=REPO,
                env=env,
            )
        try:
            port = wait_until(
                self._started,
                timeout=start_timeout,
                message=lambda: f"exporter not started:\n{self.log()}",
            )
        except AssertionError:
            self.stop(check_log=False)
            raise
        self.port = int(port)
        self.base = f"http://127.0.0.1:{self.port}"

    def _started(self) -> str | None:
        found = _STARTED.search(self.log())
        if found is None and self.process.poll() is not None:
            code = self.process.returncode
            raise AssertionError(f"the exporter exited with {code}:\n{self.log()}")
        return found[1] if found else None

    def log(self) -> str:
        """What the exporter logged so far."""
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until ``/-/ready`` answers 200: the first cycle was published."""
        wait_until(
            lambda: fetch(self.base + "/-/ready").status == 200,
            timeout=timeout,
            ignoring=(OSError,),
            message=lambda: f"exporter not ready:\n{self.log()}",
        )

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL: the exporter crashes, its state file as its last cycle left it (a lost
        replica); ``stop()`` afterwards still reads its log."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = 30.0, check_log: bool = True) -> tuple[int, str]:
        """SIGTERM (unless it already ended), then its exit status and whole log; killed when
        it does not end within ``timeout``. Every line of the log must parse as a log
        collector reads it (:func:`~tests.support.loglines.parse_log`), unless ``check_log``
        is false (an exporter that did not start: what it printed is the failure's message)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        log = self.log()
        if check_log:
            parse_log(log)
        return self.process.returncode, log


@contextlib.contextmanager
def ready_exporter(
    config: Path, *flags: str, env: Mapping[str, str] | None = None
) -> Iterator[ExporterProcess]:
    """An exporter process on ``config`` (in ``env``, if given), ready to serve; stopped
    afterwards, and it must have exited cleanly (status 0)."""
    process = ExporterProcess(config, *flags, env=env)
    try:
        process.wait_ready()
        yield process
    finally:
        code, log = process.stop()
    assert code == 0, log
