"""Cairn's side for `cairn bench --python`: warm compactions through the wheel's `cairn.Host`,
each into a fresh conversation (one warm-up first) — of the session file's text, and of the same
session as OpenAI chat messages beside LangChain's own `SummarizationMiddleware` preparing its
summary of them (a fake model that answers at once, so only LangChain's work is timed: counting,
choosing the cut, rendering the prompt). Prints one JSON line."""

import itertools
import json
import statistics
import sys
import time

import cairn

file, messages_file, iterations, home = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def p50(run):
    samples = []
    for i in range(iterations + 1):
        started = time.perf_counter()
        run(i)
        if i > 0:  # the first warms caches
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def committed(answer):
    if not answer["committed"]:
        sys.exit(f"the wheel's compaction committed nothing: {answer.get('not_committed')}")


host = cairn.Host(home=home)
with open(file, encoding="utf-8") as f:
    text = f.read()
with open(messages_file, encoding="utf-8") as f:
    messages = json.load(f)
report = {"iterations": iterations}
report["p50_ms"] = p50(lambda i: committed(host.compact(f"python-{i}", text)))
report["messages_p50_ms"] = p50(lambda i: committed(host.compact(f"messages-{i}", messages)))

try:
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, convert_to_messages
except ImportError as error:
    report["langchain_unavailable"] = f"LangChain is not installed beside the wheel ({error})"
else:
    # Its defaults: keep the last 20 messages, approximate token counts; the trigger always holds.
    model = GenericFakeChatModel(messages=itertools.repeat(AIMessage(content="summary")))
    middleware = SummarizationMiddleware(model, trigger=("tokens", 1), keep=("messages", 20))

    def prepare(i):
        # As the agent holds them: LangChain's message objects (converted once, untimed).
        if middleware.before_model({"messages": list(langchain_messages)}, None) is None:
            sys.exit("LangChain's SummarizationMiddleware did not summarize")

    langchain_messages = convert_to_messages(messages)
    report["langchain_p50_ms"] = p50(prepare)
print(json.dumps(report))
