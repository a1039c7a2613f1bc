"""Type-checked, not run (mypy --strict in host/cli/tests/it/python_package.rs): the package's
public API as a typed harness calls it."""

import cairn


def compact_and_recall(host: cairn.Host, messages: list[dict[str, object]]) -> str:
    answer = host.compact("app", messages, window=128_000)
    pinned: list[str] = host.pin("app", [str(answer["first_kept_entry_id"])])
    try:
        host.boundary("app", messages, turn=2, window=128_000, since="m-1")
    except cairn.Diverged as error:
        code: str = error.code
        return code + ",".join(pinned)
    return str(host.history("app", "search", query="id")["hits"])


async def in_a_coroutine(host: cairn.AsyncHost) -> object:
    return await host.compact("app", "text")
