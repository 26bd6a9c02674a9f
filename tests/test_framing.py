"""The bounded line reader of the stdio framing, fed bytes as a pipe delivers them (no process)."""

from __future__ import annotations

import json

from subagents.sessions.framing import MessageLines, Oversized


def _fed(limit: int, *chunks: bytes) -> list[bytes | Oversized]:
    lines = MessageLines(limit)
    return [line for chunk in chunks for line in lines.feed(chunk)]


def test_a_line_cut_across_chunks_comes_out_whole_and_one_over_the_limit_is_drained() -> None:
    answer = json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"text": "x" * 5000}}).encode()
    out = _fed(1000, b'{"a": ', b"1}\n" + answer[:3000], answer[3000:] + b"\n{", b'"b": 2}\n')
    assert out[0] == b'{"a": 1}' and out[2] == b'{"b": 2}'  # the stream stays in step after it
    oversized = out[1]
    assert isinstance(oversized, Oversized) and oversized.size == len(answer)
    assert len(oversized.head) <= 512 and len(oversized.tail) <= 512  # never the rest
    assert oversized.request_id({7, 8}) == 7


def test_the_id_of_a_drained_answer_is_found_first_or_last_or_is_the_one_pending() -> None:
    result_first = b'{"result": {"text": "' + b"y" * 5000 + b'"}, "jsonrpc": "2.0", "id": "call-2"}'
    (last,) = _fed(1000, result_first + b"\n")
    assert isinstance(last, Oversized) and last.request_id({"call-2", 3}) == "call-2"
    log = b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "' + b"z" * 5000 + b'"}}'
    (notification,) = _fed(1000, log + b"\n")
    assert isinstance(notification, Oversized) and notification.request_id({4}) is None  # not an answer
    no_id = b'{"result": {"text": "' + b"z" * 5000 + b'"}, "jsonrpc": "2.0"}'
    (anonymous,) = _fed(1000, no_id + b"\n")
    assert isinstance(anonymous, Oversized)
    assert anonymous.request_id({4}) == 4  # one request pending: the answer is its
    assert anonymous.request_id({4, 5}) is None  # several: nobody's, dropped unread
