"""The OpenAI HTTP wire format of ``agentflow-env serve``: requests read and checked, replies and stream chunks built.

Nothing here runs a model or a socket (that is :mod:`agentflow_env.engines.server`). Tool calling: a chat
request's ``tools`` are rendered with the tokenizer's chat template (``apply_chat_template(..., tools=...)``)
when that template knows tools, else with a Hermes-style fallback (the tools listed in the system message,
earlier calls as ``<tool_call>`` blocks, results as ``<tool_response>``), and the reply's Hermes
``<tool_call>`` blocks come back as ``tool_calls`` (``finish_reason: "tool_calls"``), streamed too.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentflow_env.engines.base import SamplingParams
from agentflow_env.engines.completions import Completion, TokenPrompt
from agentflow_env.engines.hermes import hermes_tool_calls

__all__ = ["BadRequest", "HTTPFault", "UnknownModel", "parse_request", "reply", "stream_events", "tool_prompt"]


class HTTPFault(Exception):
    """Raised by an engine behind the server to answer with this HTTP status (429, 500, 503...)."""

    def __init__(self, status: int, message: str = "", retry_after: float | None = None):
        super().__init__(message or f"HTTP {status}")
        self.status = int(status)
        self.message = message or f"HTTP {status}"
        self.retry_after = retry_after


class BadRequest(ValueError):
    """The request body is not one the server can answer (HTTP 400)."""


class UnknownModel(LookupError):
    """The request names a model this server does not serve (HTTP 404)."""


# OpenAI request fields this server cannot honour: a request that sets one (to anything but a no-op) is
# refused with a 400 naming it, rather than answered as if it had not been sent
_UNSUPPORTED = {
    "functions": "the legacy functions field (send tools)",
    "function_call": "function calling",
    "logit_bias": "logit_bias",
    "best_of": "best_of",
    "echo": "echo",
    "suffix": "suffix",
    "audio": "audio output",
    "modalities": "modalities other than text",
    "prediction": "predicted outputs",
}
_NO_OPS: dict[str, tuple[Any, ...]] = {
    "functions": (None, []),
    "function_call": (None, "none"),
    "logit_bias": (None, {}),
    "best_of": (None, 1),
    "echo": (None, False),
    "suffix": (None, ""),
    "modalities": (None, ["text"]),
}
MAX_N = 16


@dataclass
class Request:
    """A parsed request: what to generate, how, and how to answer."""

    prompt: TokenPrompt
    sampling: SamplingParams
    chat: bool
    model: str
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    token_ids: bool = False  # token-exact mode: the reply carries prompt and response token ids
    tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI function schemas (empty: no tool calling)
    messages: list[dict[str, Any]] = field(default_factory=list)  # the chat as sent (tool calls and results kept)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        if any(isinstance(p, dict) and p.get("type", "text") != "text" for p in content):
            raise BadRequest("only text content parts are supported (no images, audio or files)")
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise BadRequest("message content must be a string or a list of text parts")


def _check_supported(body: dict[str, Any]) -> None:
    for key, what in _UNSUPPORTED.items():
        if key in body and body[key] not in _NO_OPS.get(key, (None,)):
            raise BadRequest(f"{what} is not supported by this server; remove '{key}' from the request")
    fmt = body.get("response_format")
    if fmt not in (None, {"type": "text"}):
        raise BadRequest("response_format other than text (JSON mode, schemas) is not supported")
    for key in ("presence_penalty", "frequency_penalty"):
        if body.get(key) not in (None, 0, 0.0):
            raise BadRequest(f"{key} is not supported; send 0 or leave it out")


def _sampling(body: dict[str, Any]) -> SamplingParams:
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(x, str) for x in stop):
        raise BadRequest("'stop' must be a string or a list of strings")
    n = body.get("n")
    n = 1 if n is None else n
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_N:
        raise BadRequest(f"'n' must be an integer from 1 to {MAX_N}")
    defaults = SamplingParams()

    def number(key: str, default: float) -> float:
        value = body.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadRequest(f"'{key}' must be a number")
        return float(value)

    max_tokens = number("max_tokens", number("max_completion_tokens", defaults.max_tokens))
    temperature, top_p = number("temperature", defaults.temperature), number("top_p", defaults.top_p)
    if max_tokens < 1 or temperature < 0 or not 0 < top_p <= 1:
        raise BadRequest("max_tokens must be >= 1, temperature >= 0 and top_p in (0, 1]")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise BadRequest("'seed' must be an integer")
    return SamplingParams(
        temperature=temperature, top_p=top_p, max_tokens=int(max_tokens), stop=list(stop), seed=seed, n=n
    )


def _token_list(value: Any, what: str) -> list[int]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    ):
        raise BadRequest(f"{what} must be a non-empty list of token ids (integers)")
    return list(value)


def _tools(body: dict[str, Any], chat: bool) -> list[dict[str, Any]]:
    """The request's function schemas; ``tool_choice`` "none" turns them off."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if tools in (None, []):
        if choice not in (None, "none", "auto"):
            raise BadRequest("'tool_choice' names a tool but the request sends no 'tools'")
        return []
    if not chat:
        raise BadRequest("tools are a chat feature: POST them to /v1/chat/completions")
    if not isinstance(tools, list) or not all(
        isinstance(t, dict)
        and t.get("type", "function") == "function"
        and isinstance(t.get("function"), dict)
        and isinstance(t["function"].get("name"), str)
        and t["function"]["name"]
        for t in tools
    ):
        raise BadRequest("'tools' must be a list of {type: function, function: {name, description, parameters}}")
    if choice == "none":
        return []
    if choice not in (None, "auto"):  # "required" or a named function: the model cannot be forced here
        raise BadRequest("tool_choice 'required' or a named function is not supported; send 'auto' or 'none'")
    return [{"type": "function", "function": dict(t["function"])} for t in tools]


def _message(m: dict[str, Any]) -> dict[str, Any]:
    """One chat message with what a chat template needs: role, content, an assistant's tool calls (arguments
    as objects, as templates expect) and a tool reply's id and name."""
    out: dict[str, Any] = {"role": str(m.get("role", "user")), "content": _content_text(m.get("content"))}
    calls = m.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise BadRequest("an assistant message's 'tool_calls' must be a list")
        out["tool_calls"] = []
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(fn, dict) or not fn.get("name"):
                raise BadRequest("each tool call needs function.name")
            args = fn.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError:
                    raise BadRequest(f"the arguments of the call to {fn['name']!r} are not JSON") from None
            out["tool_calls"].append(
                {"id": c.get("id"), "type": "function", "function": {"name": fn["name"], "arguments": args or {}}}
            )
    for key in ("tool_call_id", "name"):
        if m.get(key) is not None:
            out[key] = str(m[key])
    return out


def parse_request(body: dict[str, Any], chat: bool, model_name: str) -> Request:
    """The request in ``body`` (a chat or text completion), checked; raises BadRequest or UnknownModel."""
    return _parse(body, chat, model_name)


def _parse(body: dict[str, Any], chat: bool, model_name: str) -> Request:
    model = body.get("model")
    if model is not None and model != model_name:
        raise UnknownModel(f"the model {model!r} does not exist here; this server serves {model_name!r}")
    _check_supported(body)
    tools = _tools(body, chat)
    sampling = _sampling(body)
    messages: list[dict[str, Any]] = []
    token_ids = bool(body.get("return_token_ids"))
    prompt: TokenPrompt
    if body.get("prompt_token_ids") is not None:  # token-exact mode (messages / prompt are then not used)
        prompt, token_ids = _token_list(body["prompt_token_ids"], "'prompt_token_ids'"), True
    elif chat:
        body_messages = body.get("messages")
        if (
            not isinstance(body_messages, list)
            or not body_messages
            or not all(isinstance(m, dict) for m in body_messages)
        ):
            raise BadRequest("'messages' must be a non-empty list of {role, content} objects")
        messages = [_message(m) for m in body_messages]
        prompt = [{"role": m["role"], "content": m["content"]} for m in messages]
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and not isinstance(raw[0], int):
            raw = raw[0]  # a batch of one
        if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
            prompt, token_ids = _token_list(raw, "'prompt'"), True  # the OpenAI form of a token prompt
        elif isinstance(raw, str):
            prompt = raw
        else:
            raise BadRequest("'prompt' must be one string or one list of token ids (send one request per prompt)")
    if chat:
        logprobs = bool(body.get("logprobs"))
        if body.get("top_logprobs") not in (None, 0):
            raise BadRequest("top_logprobs > 0 is not supported: only the sampled token's log-prob is reported")
    else:
        lp = body.get("logprobs")
        if lp not in (None, 0) and not (isinstance(lp, bool) and not lp):
            raise BadRequest("completions logprobs > 0 is not supported; send logprobs=0 for the sampled tokens")
        logprobs = lp is not None
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object")
    return Request(
        prompt=prompt,
        sampling=sampling,
        chat=chat,
        model=model_name,
        stream=bool(body.get("stream")),
        include_usage=bool(options.get("include_usage")),
        logprobs=logprobs or token_ids,
        token_ids=token_ids,
        tools=tools,
        messages=messages,
    )


_FALLBACK_TOOLS_INTRO = (
    "You can call functions to help with the request. Their signatures, one JSON object per line:\n<tools>\n"
)
_FALLBACK_TOOLS_HOW = (
    "\n</tools>\n\nTo call a function, reply with a JSON object of its name and arguments inside tags:\n"
    '<tool_call>\n{"name": "<function name>", "arguments": {<arguments as JSON>}}\n</tool_call>\n'
    "Without a call, your reply is the answer."
)


def uses_tools(req: Request) -> bool:
    """Whether the chat needs tool-aware rendering: tools offered, or earlier calls and results in it."""
    return bool(req.tools) or any(m.get("tool_calls") or m["role"] == "tool" for m in req.messages)


def _template_knows_tools(tokenizer: Any) -> bool:
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("tool_use") or template.get("default")
    return isinstance(template, str) and "tools" in template


def _arguments(call: dict[str, Any]) -> Any:
    """A call's arguments as the model wrote them: the JSON object an OpenAI message carries as a string."""
    args = call["function"].get("arguments")
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return args
        return parsed if isinstance(parsed, dict) else args
    return args


def fallback_chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The chat in plain ``{role, content}`` messages, Hermes style: the tools in the system message, earlier
    calls as ``<tool_call>`` blocks, their results as ``<tool_response>`` in user messages. Any template (or
    none) can render it, so a model without a tools-aware template can still be served with tools."""
    out: list[dict[str, str]] = []
    system = ""
    rest = messages
    if messages and messages[0]["role"] == "system":
        system, rest = messages[0]["content"], messages[1:]
    if tools:
        lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        system = (system + "\n\n" if system else "") + _FALLBACK_TOOLS_INTRO + lines + _FALLBACK_TOOLS_HOW
    if system:
        out.append({"role": "system", "content": system})
    for m in rest:
        if m["role"] == "tool":
            block = f"<tool_response>\n{m['content']}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("<tool_response>"):
                out[-1]["content"] += "\n" + block  # results of one turn's calls in one message
            else:
                out.append({"role": "user", "content": block})
        elif m.get("tool_calls"):
            blocks = [
                "<tool_call>\n"
                + json.dumps({"name": c["function"]["name"], "arguments": _arguments(c)}, ensure_ascii=False)
                + "\n</tool_call>"
                for c in m["tool_calls"]
            ]
            text = "\n".join(([m["content"]] if m["content"] else []) + blocks)
            out.append({"role": "assistant", "content": text})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def tool_prompt(req: Request, engine: Any) -> TokenPrompt:
    """What the engine generates from for a tool-calling chat: text through the tokenizer's own tools-aware
    template where it has one, else the :func:`fallback_chat` (rendered by the engine as any chat)."""
    tokenizer = getattr(engine, "tokenizer", None)
    if tokenizer is not None and callable(getattr(engine, "render", None)) and _template_knows_tools(tokenizer):
        return str(
            tokenizer.apply_chat_template(
                req.messages, tools=req.tools or None, tokenize=False, add_generation_prompt=True
            )
        )
    return fallback_chat(req.messages, req.tools)


def _tool_calls(req: Request, c: Completion) -> tuple[str | None, list[dict[str, Any]]]:
    """The reply's content and its Hermes tool calls (as OpenAI ``tool_calls``), when the request has tools."""
    if not req.tools or "<tool_call>" not in c.text:
        return c.text, []
    calls, content, _problems = hermes_tool_calls(c.text)
    if not calls:  # unreadable blocks stay in the content, for the client to see
        return c.text, []
    out = []
    for name, args in calls:
        arguments = args if isinstance(args, str) else json.dumps(args if args is not None else {}, ensure_ascii=False)
        out.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": str(name), "arguments": arguments},
            }
        )
    return content or None, out


_WORD = re.compile(r"\w+|[^\w\s]")


def _usage(prompt: TokenPrompt, choices: list[Completion]) -> dict[str, Any]:
    """Token counts of a reply; engines that report no tokens get an estimate (words and marks), flagged."""
    first = choices[0]
    if first.prompt_tokens is not None and all(c.completion_tokens is not None for c in choices):
        p, c = int(first.prompt_tokens), sum(int(x.completion_tokens or 0) for x in choices)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    text = prompt if isinstance(prompt, str) else " ".join(str(m.get("content", "")) for m in prompt)  # type: ignore[union-attr]
    p = len(_WORD.findall(text))
    c = sum(len(_WORD.findall(x.text)) for x in choices)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c, "estimated": True}


def _logprobs_entry(c: Completion, chat: bool) -> dict[str, Any] | None:
    if c.logprobs is None or c.token_ids is None:
        return None
    tokens = c.tokens or [f"token_id:{t}" for t in c.token_ids]
    if chat:
        return {
            "content": [
                {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8")), "top_logprobs": []}
                for t, lp in zip(tokens, c.logprobs)
            ]
        }
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t)
    return {"tokens": tokens, "token_logprobs": list(c.logprobs), "top_logprobs": None, "text_offset": offsets}


def _choice(req: Request, index: int, c: Completion) -> dict[str, Any]:
    if req.chat:
        content, calls = _tool_calls(req, c)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        choice: dict[str, Any] = {
            "index": index,
            "message": message,
            "finish_reason": "tool_calls" if calls else c.finish_reason,
            "logprobs": _logprobs_entry(c, True) if req.logprobs else None,
        }
    else:
        choice = {
            "index": index,
            "text": c.text,
            "finish_reason": c.finish_reason,
            "logprobs": _logprobs_entry(c, False) if req.logprobs else None,
        }
    if req.token_ids:
        choice["token_ids"] = c.token_ids
    return choice


def reply(req: Request, choices: list[Completion]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": f"{'chatcmpl' if req.chat else 'cmpl'}-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion" if req.chat else "text_completion",
        "created": int(time.time()),
        "model": req.model,
        "choices": [_choice(req, i, c) for i, c in enumerate(choices)],
        "usage": _usage(req.prompt, choices),
    }
    if req.token_ids:
        out["prompt_token_ids"] = choices[0].prompt_token_ids
    return out


def _pieces(c: Completion) -> list[str]:
    """The reply's text in streamed pieces: one per token where the tokens spell the text, else one."""
    if c.tokens and "".join(c.tokens) == c.text:
        return [t for t in c.tokens if t]
    return [c.text] if c.text else []


def stream_events(req: Request, choices: list[Completion]) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed reply, in OpenAI's order: role, text pieces, finish reason, then usage."""
    common = {
        "id": f"{'chatcmpl' if req.chat else 'cmpl'}-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk" if req.chat else "text_completion",
        "created": int(time.time()),
        "model": req.model,
    }
    extra = {"usage": None} if req.include_usage else {}

    def chunk(index: int, text: str | None, finish: str | None, first: bool = False) -> dict[str, Any]:
        if req.chat:
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
            if text is not None:
                delta["content"] = text
            item: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}
        else:
            item = {"index": index, "text": text or "", "finish_reason": finish, "logprobs": None}
        return {**common, "choices": [item], **extra}

    for i, c in enumerate(choices):
        content, calls = _tool_calls(req, c) if req.chat else (c.text, [])
        if req.chat:
            yield chunk(i, None, None, first=True)
        if calls:  # the content before the calls, then one chunk per call (its arguments whole)
            if content:
                yield chunk(i, content, None)
            for k, call in enumerate(calls):
                item = chunk(i, None, None)
                item["choices"][0]["delta"] = {"tool_calls": [{"index": k, **call}]}
                yield item
        else:
            for piece in _pieces(c):
                yield chunk(i, piece, None)
        last = chunk(i, None, "tool_calls" if calls else c.finish_reason)
        if req.logprobs:
            last["choices"][0]["logprobs"] = _logprobs_entry(c, req.chat)
        if req.token_ids:
            last["choices"][0]["token_ids"] = c.token_ids
            last["prompt_token_ids"] = c.prompt_token_ids
        yield last
    if req.include_usage:
        yield {**common, "choices": [], "usage": _usage(req.prompt, choices)}
