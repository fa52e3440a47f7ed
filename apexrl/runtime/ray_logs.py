"""Worker output on the driver's console without Ray's log-monitor process.

Ray forwards what its workers print (``(ActorWorker pid=…) …`` lines) through a log monitor: a Python
process per node (~46 MB PSS) that tails the session's log files and publishes new lines to the GCS, where
the driver's subscriber prints them. A private run is one node whose driver is on it, so the same tailing
runs here, in a driver thread, with Ray's own ``LogMonitor`` (its file handling and publishing unchanged);
only its endless ``run`` loop is replaced by one that stops with the run.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

POLL_S = 0.1  # Ray's log monitor sleeps as long between empty scans


class LogForwarder:
    """Tails the private node's worker logs into the GCS until :meth:`stop`."""

    def __init__(self, node: Any, publisher: Any) -> None:
        """``publisher``: what this Ray's ``LogMonitor`` publishes through (``lean_start.log_publisher``)."""
        from ray._private.log_monitor import LogMonitor, is_proc_alive

        self._monitor = LogMonitor(node.node_ip_address, node.get_logs_dir_path(), publisher, is_proc_alive)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="apexrl-ray-logs", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        m = self._monitor
        try:
            while not self._stop.is_set():
                m.update_log_filenames()
                m.open_closed_files()
                if not m.check_log_files_and_publish_updates():
                    self._stop.wait(POLL_S)
        except Exception as e:  # noqa: BLE001 - losing worker output must not cost the run
            if not self._stop.is_set():
                log.warning("worker output is no longer shown here (%s); it stays in Ray's log files", e)

    def stop(self) -> None:
        """Forward what is left, then stop (before the GCS goes away)."""
        self._stop.set()
        self._thread.join(timeout=2.0)
        try:
            self._monitor.check_log_files_and_publish_updates()
            self._monitor._close_all_files()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
