"""A real OTLP/HTTP receiver on 127.0.0.1 for tests: it decodes what the exporters send, as Jaeger would."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.loopback import LoopbackServer, Reply


@dataclass
class ReceivedSpan:
    service: str
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    status_code: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


@dataclass
class OtlpReceiver:
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    refuse: bool = False  # answer 400 Bad Request and keep nothing, as a collector that will not take them

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._receive)
        self.endpoint = self._server.url

    def _receive(self, path: str, body: bytes, headers: dict[str, str]) -> Reply:
        if headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self._lock:
            self.requests += 1
            if self.refuse:
                return 400, "text/plain", b"refused by the test", {}
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(ReceivedSpan(
                            service=str(resource.get("service.name")), trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(), parent_span_id=span.parent_span_id.hex(),
                            name=span.name, kind=span.kind, status_code=span.status.code,
                            attributes=_attributes(span.attributes),
                            events=[(event.name, _attributes(event.attributes)) for event in span.events],
                            resource=resource,
                        ))  # fmt: skip
        return 200, "application/x-protobuf", ExportTraceServiceResponse().SerializeToString(), {}

    def close(self) -> None:
        self._server.close()
