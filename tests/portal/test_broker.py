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
