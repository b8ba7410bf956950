"""Signal handling of the command line: the first SIGINT/SIGTERM stops a study cleanly (saved,
exit 130/143), a second one ends the process at once (see :class:`Interrupts`)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

__all__ = ["Interrupts", "EXIT_INTERRUPTED", "EXIT_TERMINATED", "StopRequested", "request_stop", "stop_requested",
           "clear_stop"]

EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143  # 128 + SIGINT, 128 + SIGTERM (shell convention)

# Set by the first signal (and by a sweep that stops its Dask points): simulations running in other
# threads of the process (a LocalCluster's thread workers), which no signal handler reaches, stop
# at their next chunk (bayesfair.simulation.simulator raises StopRequested there).
_STOP = threading.Event()


class StopRequested(Exception):
    """The process was told to stop (SIGINT/SIGTERM) while a simulation ran in a thread other than
    the main one: it stopped at its next chunk."""


def request_stop() -> None:
    """Tell simulations running in other threads to stop at their next chunk."""
    _STOP.set()


def stop_requested() -> bool:
    """Whether :func:`request_stop` was called (since the last :func:`clear_stop`)."""
    return _STOP.is_set()


def clear_stop() -> None:
    _STOP.clear()


class Interrupts:
    """SIGINT/SIGTERM handling of the CLI.

    The first signal raises KeyboardInterrupt in the main thread (the simulator waits on its
    chunks interruptibly, so within ~5 ms, or once a running compilation returns); the study
    then saves its last chunk boundary and the command exits 130 (SIGINT) or 143 (SIGTERM). A
    second signal ends the process at once, whatever it is doing: the handlers are reset to the
    defaults, and a watcher thread that sees every signal through ``signal.set_wakeup_fd`` (even
    while the main thread is inside a compilation, where Python handlers cannot run) calls
    ``os._exit``. An atomic save cut short leaves the previous resume file intact.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}
        self.pipe: tuple[int, int] | None = None
        self.old_wakeup = -1

    def install(self) -> None:
        clear_stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                current = signal.getsignal(sig)
                if current is signal.SIG_IGN:  # e.g. SIGINT of a background job: leave it ignored
                    continue
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                return
        if not self.previous:
            return
        import threading

        r, w = os.pipe()
        os.set_blocking(w, False)
        try:
            self.old_wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:
            os.close(r)
            os.close(w)
            return
        self.pipe = (r, w)
        threading.Thread(target=self._watch, args=(r,), name="bayesfair-signals", daemon=True).start()

    def _watch(self, fd: int) -> None:
        # The watcher owns the read end and closes it itself, once restore() has closed the write
        # end (EOF). Were restore() to close it, a watcher thread not yet inside os.read could
        # later read from whatever file reused that descriptor number: seen as a subprocess's
        # stdout read away from subprocess.run right after an in-process `bayesfair fit --list`.
        seen = 0
        try:
            while True:
                try:
                    data = os.read(fd, 64)
                except InterruptedError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                for byte in data:
                    if byte in (signal.SIGINT, signal.SIGTERM):
                        seen += 1
                        if seen >= 2:
                            sys.stderr.write("\nbayesfair: second signal: exiting now (the last saved state is kept)\n")
                            sys.stderr.flush()
                            os._exit(EXIT_TERMINATED if byte == signal.SIGTERM else EXIT_INTERRUPTED)
        finally:
            os.close(fd)

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum
        request_stop()
        for sig in self.previous:
            signal.signal(sig, signal.SIG_DFL)
        name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
        sys.stderr.write(f"\nbayesfair: {name}: stopping and saving the last chunk boundary "
                         "(signal again to exit at once)\n")
        sys.stderr.flush()
        raise KeyboardInterrupt

    def restore(self) -> None:
        clear_stop()
        if self.signum is not None:  # interrupted: keep the default handlers, a second signal ends the process
            self.previous.clear()
        for sig, handler in self.previous.items():
            try:
                signal.signal(sig, handler)
            except (ValueError, TypeError):
                pass
        self.previous.clear()
        if self.pipe is not None:
            try:
                signal.set_wakeup_fd(self.old_wakeup)
            except ValueError:
                pass
            try:  # the write end only: the watcher sees EOF and closes the read end (see _watch)
                os.close(self.pipe[1])
            except OSError:
                pass
            self.pipe = None

    @property
    def exit_code(self) -> int:
        return EXIT_TERMINATED if self.signum == signal.SIGTERM else EXIT_INTERRUPTED
