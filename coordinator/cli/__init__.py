"""The `research` command line, one module per command group.

research plan "refund 45 quid on ORD-10031?"
research ask "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
research task customers customer_lookup '{"identifier": " Jane.Doe@Example.com "}'
research sources list | call | up | status | down
research traces list | show latest
research chaos kill | heal | hang | slow | flaky | garbage | run
"""

from coordinator.cli import ask, chaos, plan, sources, traces  # noqa: F401  (importing each registers its commands)
from coordinator.cli.common import app

__all__ = ["app"]
