"""The embedded broker: a consumer never sees a message before it is whole."""

from __future__ import annotations

import contextlib
from pathlib import Path
from queue import Empty
from unittest import mock

import pytest
from kombu import Connection

from evaluation import broker


def test_a_message_being_written_is_invisible_until_whole(tmp_path: Path) -> None:
    folder = tmp_path / "queue"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder),
               "control_folder": str(tmp_path), "store_processed": False}
    with Connection("filesystem://", transport="evaluation.broker:Transport",
                    transport_options=options) as connection:
        channel = connection.default_channel
        seen_while_writing = []

        def encode(text: str) -> bytes:
            with contextlib.suppress(Empty):  # a consumer polling while the file is written
                seen_while_writing.append(channel._get("jobs"))
            return text.encode()

        with mock.patch.object(broker, "str_to_bytes", encode):
            channel._put("jobs", {"body": "whole"})
        assert seen_while_writing == []
        assert channel._get("jobs") == {"body": "whole"}
        with pytest.raises(Empty):
            channel._get("jobs")


def test_the_embedded_brokers_folders_and_messages_are_the_broker_users_alone(
        tmp_path: Path) -> None:
    import os
    import stat

    from evaluation.protocol import FILESYSTEM_BROKER, broker_settings

    base = tmp_path / "broker"
    previous = os.umask(0o022)  # a usual umask: 0755 folders and 0644 files unless set
    try:
        options = broker_settings(FILESYSTEM_BROKER, base)["broker_transport_options"]
    finally:
        os.umask(previous)
    folders = [base, *(Path(options[key]) for key in ("data_folder_in", "processed_folder",
                                                      "control_folder"))]
    with Connection("filesystem://", transport="evaluation.broker:Transport",
                    transport_options=options) as connection:
        connection.default_channel._put("jobs", {"body": "source and seeds"})
    messages = list(Path(options["data_folder_out"]).glob("*.msg"))
    assert len(messages) == 1
    assert {stat.S_IMODE(f.stat().st_mode) for f in folders} == {0o700}
    assert stat.S_IMODE(messages[0].stat().st_mode) == 0o600


def test_stop_messages_do_not_pile_up_once_their_runs_end(tmp_path: Path) -> None:
    """Each running evaluation listens on a queue of its own bound to the stop exchange; the
    filesystem transport ignored auto_delete, so every later stop was written again for each
    run that had ended (51 files after 17 cancels). Now a run's queue goes with it."""
    from celery import Celery

    from evaluation.protocol import FILESYSTEM_BROKER, broker_settings, publish_stop, stop_message
    from evaluation.worker.stop import StopWatch

    base = tmp_path / "broker"
    app = Celery("stops")
    app.conf.update(**broker_settings(FILESYSTEM_BROKER, base))
    for job in range(4):
        with StopWatch(app, job_id=job, attempt=1, run="r") as watch:
            publish_stop(app, stop_message(job_id=job, up_to_attempt=1))
            assert watch.stopped.wait(10), "the running evaluation heard its stop"
        publish_stop(app, stop_message(job_id=job, up_to_attempt=1))  # a cancel after the end
    assert list((base / "queue").glob("*.msg")) == []
    assert (base / "control" / "atrex.stop.exchange").read_text() == "[]"
