"""Chat-template families, a local tokenizer for each, and recorded tool-calling episodes, for the template
fidelity tests (tests/integrations and verl's stage, tests/stacks/verl).

The templates are written here, after the families' published layouts: ChatML with Hermes ``<tool_call>`` blocks
(Qwen2.5: tools in the system message, consecutive tool results in one user turn), Llama 3.1 (header tokens, the
tools in the first user message, each tool result its own ``ipython`` turn), and a reasoning template with
``<think>`` blocks that, like Qwen3's, drops the think block of assistant turns before the latest user query. The
Llama family writes its calls as Hermes blocks too (the env reads those; Llama's bare-JSON calls are not read).
The tokenizer is a byte-level BPE trained in milliseconds on a few lines; nothing comes from a hub.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import agentflow_env  # noqa: F401  (registers the env ids)

ENV_ID = "agentflow/Gen-GameOf24-v2"
MAX_TURNS = 6

_CALL = (
    '{{- \'<tool_call>\\n{"name": "\' + call.function.name + \'", "arguments": \' + (call.function.arguments | tojson)'
    " + '}\\n</tool_call>' }}"
)
_CALLS = (
    "{%- for call in message.tool_calls or [] %}"
    "{%- if content or not loop.first %}{{- '\\n' }}{%- endif %}" + _CALL + "{%- endfor %}"
)

CHATML_HERMES = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions.\\n\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nCall one inside <tool_call></tool_call> tags:\\n<tool_call>\\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n\' }}'
    "{%- elif messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}{{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{%- set content = message.content or '' %}"
    "{{- '<|im_start|>assistant\\n' + content }}" + _CALLS + "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

LLAMA31 = (
    "{{- '<|begin_of_text|>' }}"
    "{%- if messages[0].role == 'system' %}{%- set system = messages[0].content %}{%- set rest = messages[1:] %}"
    "{%- else %}{%- set system = '' %}{%- set rest = messages %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{%- if tools %}{{- 'Environment: ipython\\n' }}{%- endif %}"
    "{{- 'Cutting Knowledge Date: December 2023\\n\\n' + system + '<|eot_id|>' }}"
    "{%- set ns = namespace(tools_shown=false) %}"
    "{%- for message in rest %}"
    "{%- if message.role == 'user' %}{{- '<|start_header_id|>user<|end_header_id|>\\n\\n' }}"
    "{%- if tools and not ns.tools_shown %}"
    "{{- 'Given the following functions, respond with a function call that best answers the prompt.\\n\\n' }}"
    "{%- for tool in tools %}{{- (tool | tojson(indent=4)) + '\\n\\n' }}{%- endfor %}"
    "{%- set ns.tools_shown = true %}{%- endif %}"
    "{{- message.content + '<|eot_id|>' }}"
    "{%- elif message.role == 'assistant' %}{%- set content = message.content or '' %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' + content }}" + _CALLS + "{{- '<|eot_id|>' }}"
    "{%- elif message.role in ('tool', 'ipython') %}"
    "{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + message.content + '<|eot_id|>' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)

# ChatML + Hermes, and <think>: an assistant turn after the latest user query (a user message that is not a tool
# response) shows its think block; earlier ones lose it (keep_past_thinking=True keeps them, for comparisons)
REASONING = CHATML_HERMES.replace(
    "{%- for message in messages %}",
    "{%- set q = namespace(last=-1) %}{%- for message in messages %}"
    "{%- if message.role == 'user' and not (message.content or '').startswith('<tool_response>') %}"
    "{%- set q.last = loop.index0 %}{%- endif %}{%- endfor %}"
    "{%- for message in messages %}",
    1,
).replace(
    "{%- elif message.role == 'assistant' %}{%- set content = message.content or '' %}"
    "{{- '<|im_start|>assistant\\n' + content }}",
    "{%- elif message.role == 'assistant' %}{%- set content = message.content or '' %}{%- set reasoning = '' %}"
    "{%- if '</think>' in content %}"
    "{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if reasoning and (loop.index0 > q.last or keep_past_thinking) %}"
    "{{- '<think>\\n' + reasoning + '\\n</think>\\n\\n' }}{%- endif %}{{- content }}",
)

SPECIAL = [
    "<|pad|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


@dataclass(frozen=True)
class Family:
    name: str
    template: str | None  # None: the tiny LM's own (no tools section: the Hermes fallback renders the tools)
    eos: str
    thinking: bool = False


FAMILIES = {
    "chatml-hermes": Family("chatml-hermes", CHATML_HERMES, "<|im_end|>"),
    "llama3.1": Family("llama3.1", LLAMA31, "<|eot_id|>"),
    "reasoning": Family("reasoning", REASONING, "<|im_end|>", thinking=True),
    "tiny-lm": Family("tiny-lm", None, "<|im_end|>"),
}


def build_tokenizer(family: Family) -> Any:
    """A byte-level BPE over a few lines, with the families' special tokens; lines never merge across."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from agents.tiny_lm import CHAT_TEMPLATE

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("\n", behavior="merged_with_previous"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        min_frequency=2,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [*(EPISODE * 3), CHATML_HERMES, LLAMA31, "Calculator_Tool command arguments name 6*4 = 24"] * 2
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=family.eos,
        pad_token="<|pad|>",
        additional_special_tokens=[t for t in SPECIAL if t not in (family.eos, "<|pad|>")],
    )
    fast.add_tokens(ADDED)
    fast.chat_template = family.template or CHAT_TEMPLATE
    fast.name_or_path = f"test-{family.name}"
    return fast


def _call(command: str) -> str:
    return f'<tool_call>\n{{"name": "Calculator_Tool", "arguments": {{"command": "{command}"}}}}\n</tool_call>'


# the recorded episode: two calls in one turn (two tool results in a row: the result and "Not run"), a call whose
# tool fails, then the final answer as plain content
EPISODE = [f"{_call('6*4')}\n{_call('24/1')}", f"Let me check a step.\n{_call('6*/4')}", "24"]
THOUGHTS = ["Two calls at once.", "Now a bad expression.", "So it is 24."]
MALFORMED = "<tool_call>\nnot json\n</tool_call>"  # an invalid action: the env answers with a user note


def actions(family: Family, malformed: bool = False) -> list[str]:
    """The episode's assistant texts in ``family``'s form (think blocks for the reasoning family)."""
    texts = [EPISODE[0], MALFORMED, EPISODE[2]] if malformed else list(EPISODE)
    if family.thinking:
        texts = [f"<think>\n{t}\n</think>\n\n{a}" for t, a in zip(THOUGHTS, texts)]
    return texts


def make_env(tool_calling: bool = True) -> Any:
    env = gym.make(ENV_ID, split="test", max_turns=MAX_TURNS)
    env.unwrapped.tool_calling = tool_calling
    return env


def task_id() -> str:
    env = make_env()
    try:
        return str(env.reset(options={"index": 0})[1]["task_id"])
    finally:
        env.close()


def conversation(texts: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, str]]]:
    """The episode played on a fresh env: the env's messages as an OpenAI server would hold them (an assistant turn
    without a readable call keeps its raw text, as a server's tool parser hands it back), its tools, and the
    observation before each turn."""
    env = make_env()
    try:
        obs, info = env.reset(options={"task_id": task_id(), "tool_calling": True})
        observations = []
        for text in texts:
            observations.append(obs)
            obs, _, terminated, truncated, info = env.step(text)
            if terminated or truncated:
                break
        messages = [dict(m) for m in info["messages"]]
        turns = iter(texts)
        for m in messages:
            if m["role"] == "assistant":
                raw = next(turns)
                if not m.get("tool_calls"):  # plain content, or a call the env could not read: the text itself
                    m["content"] = raw
        return messages, list(info["tools"]), observations
    finally:
        env.close()


def encode_reply(tokenizer: Any, text: str) -> list[int]:
    """A recorded assistant turn as the model produced it: its tokens and the end-of-turn token."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]


def strip_think(tokenizer: Any, ids: list[int]) -> list[int]:
    """A mutation: the turn re-tokenised from its text with the think block removed."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    return encode_reply(tokenizer, re.sub(r"<think>.*?</think>\s*", "", text, flags=re.S))


def merge_tool_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A mutation: consecutive tool results merged into one message (a dropped turn boundary)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "tool" and out and out[-1].get("role") == "tool":
            out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n{m['content']}"}
        else:
            out.append(dict(m))
    return out


def run(coro: Any) -> Any:
    return asyncio.run(coro)
