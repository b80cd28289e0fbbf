"""The testbed ceiling probe's two ends, on loopback (the namespaces need root: see
test_validate_shaped.py, which runs :func:`measure` inside a testbed)."""

from __future__ import annotations

import socket
import threading

from psml_core.validate import throughput


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_send_times_a_transfer_the_server_reads_to_its_end() -> None:
    port = _free_port()
    server = threading.Thread(target=throughput._serve, args=("127.0.0.1", port))
    server.start()
    seconds = throughput._send("127.0.0.1", port, 3 * throughput.CHUNK + 5)
    server.join(timeout=30)
    assert not server.is_alive() and seconds > 0


def test_the_command_line_is_one_usage_line_when_wrong(capsys) -> None:
    assert throughput.main(["nonsense"]) == 2
    assert capsys.readouterr().err.startswith("usage: throughput serve ADDR PORT")
