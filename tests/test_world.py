"""The demo world: same seed, same data, with the story records at their fixed identifiers."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from sources.settings import SourceSettings
from sources.store import Store
from sources.world import build_world, ensure_world, world_path

# The digest of every row for seed 42. It changes only when the generator changes on purpose;
# a different value on another machine means the data is not reproducible there.
SEED_42_FINGERPRINT = "c768f1c843abf64f068fd27edfc891736e1a13af3b85150b45f236b8f5316f98"


def test_same_seed_same_data_in_another_process() -> None:
    here = build_world(42).fingerprint()
    there = subprocess.run(
        [sys.executable, "-c", "from sources.world import build_world; print(build_world(42).fingerprint())"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent, timeout=60,
    ).stdout.strip()  # fmt: skip
    assert here == there == SEED_42_FINGERPRINT


def test_another_seed_gives_other_data() -> None:
    assert build_world(7).fingerprint() != SEED_42_FINGERPRINT


def test_story_records(settings: SourceSettings) -> None:
    folder = world_path(settings.data_dir, settings.seed)
    customers, orders = Store(folder / "customers.db"), Store(folder / "orders.db")
    tickets, billing, kb = Store(folder / "tickets.db"), Store(folder / "billing.db"), Store(folder / "kb.db")
    assert customers.row("SELECT id FROM customers WHERE email = 'jane.doe@example.com'") == {
        "id": "CUST-00042"
    }
    assert customers.row("SELECT erased_on FROM customers WHERE id = 'CUST-00013'")["erased_on"]  # type: ignore[index]
    assert customers.row("SELECT restricted FROM customers WHERE email = 'vip@example.com'") == {
        "restricted": 1
    }
    damaged = orders.row("SELECT customer_id, total FROM orders WHERE id = 'ORD-10023'")
    assert damaged == {"customer_id": "CUST-00042", "total": 750.0}
    assert orders.row("SELECT sku FROM order_items WHERE order_id = 'ORD-10023'") == {"sku": "SKU-4417-BLK"}
    assert orders.row("SELECT total FROM orders WHERE id = 'ORD-10031'") == {"total": 45.0}
    assert "£750" in tickets.row("SELECT subject FROM tickets WHERE order_id = 'ORD-10023'")["subject"]  # type: ignore[index]
    for store, table in [(orders, "orders"), (tickets, "tickets"), (billing, "invoices")]:
        assert store.rows(f"SELECT 1 FROM {table} WHERE customer_id = 'CUST-00077'") == []  # noqa: S608
    links = {(row["source"], row["target"]) for row in kb.rows("SELECT source, target FROM links")}
    story = {"KB-REFUNDS", "KB-DAMAGED", "KB-ESCALATION", "KB-GDPR"}
    assert all(any(article in link for link in links) for article in story)


def test_sources_starting_at_once_share_one_world(tmp_path: Path) -> None:
    found: list[Path] = []
    threads = [threading.Thread(target=lambda: found.append(ensure_world(tmp_path, 5))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert found == [world_path(tmp_path, 5)] * 4
    assert sorted(path.name for path in tmp_path.iterdir()) == ["world-v1-seed5"]
    assert (found[0] / "fingerprint").read_text() == build_world(5).fingerprint()


def test_data_lives_outside_the_source_tree() -> None:
    project = Path(__file__).resolve().parent.parent
    default = SourceSettings.from_environment({}).data_dir
    assert project not in default.parents
    elsewhere = str(Path.home() / "elsewhere")
    assert SourceSettings.from_environment({"RESEARCH_DATA_DIR": elsewhere}).data_dir == Path(elsewhere)
