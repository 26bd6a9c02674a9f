"""What the demo shop sells: each product's name and price, the one list the world's orders are
generated from and the planner reads product words from ("burr grinder", "cold brew maker")."""

from __future__ import annotations

__all__ = ["PRODUCTS"]

PRODUCTS: list[tuple[str, float]] = [
    ("Barista Pro espresso machine", 750.0),
    ("Burr coffee grinder", 129.0),
    ("Pour-over kettle", 58.0),
    ("Coffee beans, house blend 1kg", 21.5),
    ("Milk frothing jug", 45.0),
    ("Cafetiere, 8 cup", 32.0),
    ("Descaling tablets", 9.99),
    ("Espresso cups, set of 4", 24.0),
    ("Cold brew maker", 39.0),
    ("Digital coffee scale", 27.5),
    ("Tamper, stainless", 19.0),
    ("Knock box", 22.0),
]
