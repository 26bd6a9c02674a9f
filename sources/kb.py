"""The kb source (policies): full-text ``search_policies`` and ``related_policies`` over a link graph.

Natural failures: the search index warms up for a moment after the source first starts on a world
(the index is kept on disk after that), and calls in that window get a transient error with
``retryAfterMs``; an unknown article or a search that matches nothing is a valid empty result.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

from mcp.server import MCPServer
from pydantic import BaseModel, Field

from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError, ToolFailure
from sources.deferred import deferred
from sources.formats import ARTICLE_ID, LINKS_DESCRIPTION, SEARCH_TEXT, whole_number
from sources.settings import SourceSettings
from sources.store import Store, match_any_word
from sources.toolkit import open_source, page_of
from sources.wire import Wire
from traces.private_files import publish_file

# networkx takes a quarter of a second to import, which every kb process would pay at start for a
# tool that few queries call: it loads with the first graph.
if TYPE_CHECKING:
    import networkx as nx
else:
    nx = deferred("networkx")

__all__ = ["Policy", "RelatedPolicy", "create_server"]


class Policy(BaseModel):
    id: str
    title: str
    summary: str
    body: str
    updated_on: str


class RelatedPolicy(BaseModel):
    id: str
    title: str
    summary: str
    distance: int = Field(description="Links between the article asked about and this one.")
    path: list[str] = Field(description="Article ids from the article asked about to this one.")
    relation: str = Field(description="The kind of the last link on the path.")


def _policy_graph(store: Store) -> nx.DiGraph:
    graph = nx.DiGraph()
    for policy in store.rows("SELECT id, title, summary FROM policies"):
        graph.add_node(policy["id"], **policy)
    for link in store.rows("SELECT source, target, relation FROM links"):
        graph.add_edge(link["source"], link["target"], relation=link["relation"])
    return graph


def create_server(
    settings: SourceSettings | None = None,
    *,
    wire: Wire | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> MCPServer:
    source = open_source(
        "kb",
        settings,
        wire=wire,
        instructions="Policy articles. Search them, and follow the links between them.",
    )
    policy_graph = functools.cache(lambda: _policy_graph(source.store))  # built on first use
    # The index is built once per world and kept beside it, as a search engine keeps its index on
    # disk: only a kb that builds it warms up (the first start), not every process a query spawns.
    built = source.store.path.parent / "kb-index.built"
    published = built.exists()  # then no call looks for the file again (a stat per call)
    ready_at = clock() if published else clock() + source.settings.kb_warmup_ms / 1000

    def require_warm_index() -> None:
        nonlocal published
        remaining = ready_at - clock()
        if remaining <= 0 and not published:
            if not built.exists():
                # 0600 as everything in the data folder (a touch would leave it to the umask); of kb
                # processes warming up at once, one publishes it and the others find it there.
                publish_file(built, "", replace=False, durable=False)
            published = True
        if remaining > 0:
            wait_ms = math.ceil(
                round(remaining * 1000, 3)
            )  # round first: float noise must not add a millisecond
            raise ToolFailure(
                ToolError.of(
                    ErrorCategory.TRANSIENT,
                    f"The policy index is still warming up; the request did not execute. Retry after {wait_ms} ms.",
                    retry_after_ms=wait_ms,
                )
            )

    @source.tool(Policy, title="Search policies")
    def search_policies(
        query: Annotated[
            str, SEARCH_TEXT.field("Words to search for in policy titles, summaries and bodies.")
        ],
        limit: Annotated[int, whole_number("Most articles returned.", 1, 50, 10)] = 10,
    ) -> ResultPage[Policy] | EmptyResult:
        """Search policy articles by words, best matches first.

        No match is a valid empty result (isError false, resultCount 0). Just after the source
        starts, its index warms up: calls then fail with a `transient` error carrying
        `retryAfterMs`; retry the identical call after that delay.
        """
        require_warm_index()
        rows = source.store.rows(
            "SELECT p.* FROM policies_text JOIN policies p ON p.rowid = policies_text.rowid "
            "WHERE policies_text MATCH ? ORDER BY bm25(policies_text), p.id LIMIT ?",
            (match_any_word(query), limit),
        )
        return page_of(
            [Policy(**row) for row in rows],
            empty_message=f"No policy matches '{query}'.",
        )

    @source.tool(RelatedPolicy, title="List related policies")
    def related_policies(
        article_id: Annotated[str, ARTICLE_ID.field("The article whose neighbours to list.")],
        depth: Annotated[int, whole_number(LINKS_DESCRIPTION, 1, 3, 1)] = 1,
    ) -> ResultPage[RelatedPolicy] | EmptyResult:
        """List the policy articles linked to an article, in either direction, up to `depth` links away.

        An unknown article, or one without links, is a valid empty result. Just after the source
        starts, its index warms up: calls then fail with a `transient` error carrying `retryAfterMs`.
        """
        require_warm_index()
        graph = policy_graph()
        if article_id not in graph:
            return page_of(
                [],
                empty_message=f"No policy article {article_id} exists.",
            )
        paths = nx.single_source_shortest_path(graph.to_undirected(as_view=True), article_id, cutoff=depth)
        related = []
        for target, path in sorted(paths.items(), key=lambda item: (len(item[1]), item[0])):
            if target == article_id:
                continue
            last = path[-2], path[-1]
            edge = graph.edges[last] if graph.has_edge(*last) else graph.edges[last[::-1]]
            node = graph.nodes[target]
            related.append(
                RelatedPolicy(
                    id=target,
                    title=node["title"],
                    summary=node["summary"],
                    distance=len(path) - 1,
                    path=path,
                    relation=edge["relation"],
                )
            )
        return page_of(related, empty_message=f"Policy {article_id} links to no other article.")

    return source.server


if __name__ == "__main__":
    from sources.processes.serve import main

    main(create_server)
