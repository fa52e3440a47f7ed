"""TensorBoard event files written with the ``tensorboard`` package alone.

torch's ``SummaryWriter`` is a thin layer over tensorboard's own event-file writer, but importing it
loads torch: ~1 s of CPU and ~150 MB in the driver, which otherwise needs no torch (its actors' and
evaluations' networks act in numpy). Scalars and text are all a run writes; a resumed run drops the
events past its checkpoint with a session START at that step, as TensorBoard's purge expects.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


class EventWriter:
    """Opens its file and imports tensorboard (~0.12 s of CPU) at the first scalar (or flush), not when
    made: a run makes it, and writes its hyperparameter text, before its first env step, on a laptop's
    busy cores, and reports only later. Text written before then waits for it."""

    def __init__(self, logdir: Path | str, purge_step: int | None = None) -> None:
        self._logdir, self._purge_step = str(logdir), purge_step
        self._writer: Any = None
        self._pending: list[tuple[str, str, int]] = []

    def _open(self) -> None:
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
        from tensorboard.compat.proto.tensor_pb2 import TensorProto
        from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._Event, self._Summary = Event, Summary
        self._SummaryMetadata, self._TensorProto, self._Shape = SummaryMetadata, TensorProto, TensorShapeProto
        self._writer = EventFileWriter(self._logdir)
        if self._purge_step is not None:  # TensorBoard hides what an earlier life wrote from this step on
            self._writer.add_event(Event(step=self._purge_step, file_version="brain.Event:2"))
            self._writer.add_event(Event(step=self._purge_step, session_log=SessionLog(status=SessionLog.START)))
        for tag, text, step in self._pending:
            self._write_text(tag, text, step)
        self._pending = []

    def _add(self, value: object, step: int) -> None:
        self._writer.add_event(self._Event(wall_time=time.time(), step=int(step),
                                           summary=self._Summary(value=[value])))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        if self._writer is None:
            self._open()
        self._add(self._Summary.Value(tag=tag, simple_value=float(value)), step)

    def add_text(self, tag: str, text: str, step: int = 0) -> None:
        """Markdown in TensorBoard's text tab (under ``<tag>/text_summary``, where torch's writer puts it)."""
        if self._writer is None:
            self._pending.append((tag, text, step))
        else:
            self._write_text(tag, text, step)

    def _write_text(self, tag: str, text: str, step: int) -> None:
        meta = self._SummaryMetadata(plugin_data=self._SummaryMetadata.PluginData(plugin_name="text"))
        tensor = self._TensorProto(dtype="DT_STRING", string_val=[text.encode("utf-8")],
                                   tensor_shape=self._Shape(dim=[self._Shape.Dim(size=1)]))
        self._add(self._Summary.Value(tag=f"{tag}/text_summary", metadata=meta, tensor=tensor), step)

    def flush(self) -> None:
        if self._writer is None and self._pending:
            self._open()
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        self.flush()
        if self._writer is not None:
            self._writer.close()
