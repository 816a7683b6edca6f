"""``prompts="agentflow:PATH"``: AgentFlow's exact prompt templates and tool metadata, read at run time
from the user's own AgentFlow checkout (nothing of AgentFlow's text ships with this project).

How: each module's prompt-building function is parsed with :mod:`ast`; the statements that build the
text-only prompt (the ``else`` branch of ``if self.is_multimodal``) are checked against a small
whitelist (assignments of string literals and f-strings whose fields are names, attributes,
``memory.get_actions()``, ``.strip()`` and ``+``/``-``) and evaluated with the same inputs AgentFlow's
code would have. Tool metadata is read from each tool's ``super().__init__(...)`` call the same way, and
the toolbox is assembled as AgentFlow's ``Initializer`` does (every ``*Tool`` class a tool module defines
or imports, keyed by its ``TOOL_NAME``, sorted by that name).
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.paper_flow.checkout_cache import cached_build, parse_cached
from agentflow_env.paper_flow.memory import ActionMemory

__all__ = ["AGENTFLOW_ENABLED_TOOLS", "AgentFlowPrompts", "AgentFlowSourceError", "find_package_dir"]

# the tools every AgentFlow test script enables (test/*/run.sh), by class name
AGENTFLOW_ENABLED_TOOLS = ("Base_Generator_Tool", "Python_Coder_Tool", "Google_Search_Tool", "Wikipedia_Search_Tool")

_ALLOWED_NODES = (
    ast.Assign,
    ast.Name,
    ast.Load,
    ast.Store,
    ast.Constant,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.Attribute,
    ast.Call,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Dict,
    ast.List,
    ast.Tuple,
    ast.keyword,
)
_ALLOWED_METHODS = {"get_actions", "strip"}


class AgentFlowSourceError(ConfigError):
    """The checkout is missing a file or function, or its template code is outside what the reader evaluates."""


def find_package_dir(path: str | Path) -> Path:
    """The folder holding ``models/planner.py``: PATH itself, PATH/agentflow or PATH/agentflow/agentflow."""
    root = Path(path).expanduser()
    for candidate in (root, root / "agentflow", root / "agentflow" / "agentflow"):
        if (candidate / "models" / "planner.py").is_file():
            return candidate
    raise AgentFlowSourceError(
        f"{root} is not an AgentFlow checkout: no models/planner.py under it, agentflow/ or agentflow/agentflow/"
    )


def _parse(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once per process while the file is unchanged (never modify it)."""
    try:
        return parse_cached(path)
    except FileNotFoundError:
        raise AgentFlowSourceError(f"AgentFlow file not found: {path}") from None
    except SyntaxError as exc:
        raise AgentFlowSourceError(f"{path} does not parse: {exc}") from None


def _find_class(tree: ast.Module, name: str, origin: Path) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise AgentFlowSourceError(f"{origin}: class {name} not found")


def _find_method(cls: ast.ClassDef, name: str, origin: Path) -> ast.FunctionDef:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise AgentFlowSourceError(f"{origin}: {cls.name}.{name} not found")


def _is_safe(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if not isinstance(sub, _ALLOWED_NODES):
            return False
        if isinstance(sub, ast.Call):
            func = sub.func
            if not (isinstance(func, ast.Attribute) and func.attr in _ALLOWED_METHODS) or sub.args or sub.keywords:
                return False
        if isinstance(sub, ast.Attribute) and sub.attr.startswith("__"):
            return False
    return True


def _text_only_path(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement on the text-only path of a function body, in order (``is_multimodal`` branches resolved)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If) and "is_multimodal" in ast.unparse(stmt.test):
            out.extend(_text_only_path(stmt.orelse))
        else:
            out.append(stmt)
    return out


def _is_step(stmt: ast.stmt) -> bool:
    """A statement the reader evaluates: one name assigned from a whitelisted expression."""
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and _is_safe(stmt)
    )


def _changed_names(stmt: ast.stmt) -> set[str]:
    """Names a statement may rebind or mutate: stored names, the base of stored attributes and items, and
    the object of every method call (``x.append(...)``, ``x.update(...)``); for ``self`` only its stored
    attributes count (its methods are AgentFlow's helpers, ``self.get_image_info(image)`` and the like)."""
    out: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                out.add(base.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name) and base.id != "self":
                out.add(base.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
    return out


def _loaded_names(stmts: list[ast.stmt]) -> set[str]:
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


@dataclass
class _Template:
    """The statements that build one prompt, and the variable that ends up holding it."""

    statements: list[ast.stmt]
    target: str
    origin: str

    def render(self, namespace: dict[str, Any]) -> str:
        scope = dict(namespace)
        for stmt in self.statements:
            code = compile(ast.Module(body=[stmt], type_ignores=[]), self.origin, "exec")
            try:
                exec(code, {"__builtins__": {}}, scope)  # checked by _is_safe: literals, fields, .strip()
            except Exception as exc:
                raise AgentFlowSourceError(
                    f"{self.origin}: evaluating line {stmt.lineno} failed ({type(exc).__name__}: {exc})"
                ) from None
        value = scope.get(self.target)
        if not isinstance(value, str):
            raise AgentFlowSourceError(f"{self.origin}: {self.target} is not a string")
        return value


def _template(tree: ast.Module, origin: Path, cls: str, method: str) -> _Template:
    """The statements that build ``cls.method``'s text-only prompt.

    Every other statement on that path is checked: one the reader does not evaluate but that could change
    the prompt (it rebinds or mutates the prompt variable, or any name the prompt is built from, before the
    prompt is complete; or it rebinds the prompt variable afterwards) is an :class:`AgentFlowSourceError`
    naming the file and line, never silently skipped.
    """
    func = _find_method(_find_class(tree, cls, origin), method, origin)
    path = _text_only_path(func.body)
    prompts = [
        i
        for i, s in enumerate(path)
        if _is_step(s) and isinstance(s.value, (ast.JoinedStr, ast.Constant)) and "prompt" in s.targets[0].id  # type: ignore[attr-defined]
    ]
    if not prompts:
        raise AgentFlowSourceError(f"{origin}: {cls}.{method} builds no prompt the reader can evaluate")
    target = path[prompts[-1]].targets[0].id  # type: ignore[attr-defined]
    last = max(i for i, s in enumerate(path) if target in _changed_names(s))
    steps = [s for s in path[: last + 1] if _is_step(s)]
    inputs = _loaded_names(steps) | {target}
    for i, stmt in enumerate(path):
        if _is_step(stmt) and i <= last:
            continue
        touched = _changed_names(stmt) & (inputs if i <= last else {target})
        if touched:
            raise AgentFlowSourceError(
                f"{origin}:{stmt.lineno}: {cls}.{method} has a statement the template reader cannot evaluate "
                f"that may change the prompt (it changes {', '.join(sorted(touched))}): "
                f"{ast.unparse(stmt).splitlines()[0][:120]!r}. This reader evaluates assignments of string "
                "literals and f-strings over names, attributes, memory.get_actions() and .strip()"
            )
    return _Template(steps, target, f"{origin}:{cls}.{method}")


def _module_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level string constants and f-strings over them (TOOL_NAME, LIMITATION, ...)."""
    scope: dict[str, Any] = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and _is_safe(stmt)
        ):
            try:
                exec(compile(ast.Module(body=[stmt], type_ignores=[]), "<tool>", "exec"), {"__builtins__": {}}, scope)
            except Exception:  # a constant that needs something unknown is simply not a metadata input
                continue
    return scope


def _class_attr(cls: ast.ClassDef, name: str) -> Any:
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return ast.literal_eval(stmt.value)
    return None


_METADATA_FIELDS = ("tool_description", "tool_version", "input_types", "output_type", "demo_commands")


class _ToolFile:
    """One ``tools/<dir>/tool.py``: its TOOL_NAME, tool classes and their metadata."""

    def __init__(self, path: Path):
        self.path = path
        self.tree = _parse(path)
        self.constants = _module_constants(self.tree)
        self.tool_name = self.constants.get("TOOL_NAME")
        self.classes = {
            n.name: n
            for n in self.tree.body
            if isinstance(n, ast.ClassDef) and any(ast.unparse(b) == "BaseTool" for b in n.bases)
        }

    def imported_tools(self) -> list[tuple[str, str]]:
        """``(module, class)`` of ``*Tool`` classes this file imports from other tool modules."""
        out = []
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and ".tools." in f".{node.module}.":
                for alias in node.names:
                    if alias.name.endswith("Tool") and alias.name != "BaseTool":
                        out.append((node.module, alias.name))
        return out

    def metadata(self, class_name: str, base_requires_llm: bool) -> dict[str, Any]:
        cls = self.classes.get(class_name)
        if cls is None:
            raise AgentFlowSourceError(f"{self.path}: class {class_name} not found")
        init = _find_method(cls, "__init__", self.path)
        call = None
        for node in ast.walk(init):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "__init__"
                and ast.unparse(node.func.value) == "super()"
            ):
                call = node
                break
        if call is None:
            raise AgentFlowSourceError(f"{self.path}: {class_name}.__init__ has no super().__init__(...) call")
        values: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                continue
            if not _is_safe(kw.value):
                raise AgentFlowSourceError(f"{self.path}: {class_name} metadata field {kw.arg} is not a literal")
            expr = compile(ast.Expression(body=kw.value), str(self.path), "eval")
            values[kw.arg] = eval(expr, {"__builtins__": {}}, dict(self.constants))  # checked by _is_safe
        requires = _class_attr(cls, "require_llm_engine")
        metadata = {"tool_name": values.get("tool_name", "Unknown")}
        for key in _METADATA_FIELDS:
            metadata[key] = values.get(key)
        metadata["user_metadata"] = values.get("user_metadata")
        metadata["require_llm_engine"] = base_requires_llm if requires is None else bool(requires)
        return metadata


@dataclass(frozen=True)
class _Text:
    """An f-string of AgentFlow's over ``{block}`` or ``{str(e)}`` (the exception of its ``except`` clause)."""

    parts: tuple[Any, ...]

    @classmethod
    def read(cls, node: ast.JoinedStr, origin: Path, exc_name: str | None = None) -> _Text:
        parts: list[Any] = []
        for value in node.values:
            inner = value.value if isinstance(value, ast.FormattedValue) else None
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(inner, ast.Name) and inner.id == "block" and value.format_spec is None:  # type: ignore[union-attr,attr-defined]
                parts.append(("block",))
            elif (
                exc_name is not None
                and isinstance(inner, ast.Call)
                and ast.unparse(inner) == f"str({exc_name})"
                and value.format_spec is None  # type: ignore[union-attr,attr-defined]
            ):
                parts.append(("exc",))
            else:
                raise AgentFlowSourceError(
                    f"{origin}:{node.lineno}: a field the reader cannot evaluate: {ast.unparse(value)!r}"
                )
        return cls(tuple(parts))

    def render(self, block: str = "", exc: BaseException | None = None) -> str:
        values = {"block": block, "exc": str(exc)}
        return "".join(p if isinstance(p, str) else values[p[0]] for p in self.parts)


class AgentFlowPrompts:
    """Prompts and tool metadata exactly as the AgentFlow checkout at ``path`` builds them.

    ``enabled_tools`` are the class (or TOOL_NAME) names to enable, as in AgentFlow's ``--enabled_tools``.
    """

    @classmethod
    def cached(
        cls, path: str | Path, enabled_tools: tuple[str, ...] | list[str] = AGENTFLOW_ENABLED_TOOLS
    ) -> AgentFlowPrompts:
        """The prompts of the checkout at ``path``, built once per process while its ``.py`` files are unchanged
        (every env of a run shares them; they are read-only once built)."""
        package = find_package_dir(path)
        key = ("prompts", str(Path(path).expanduser()), tuple(enabled_tools))
        folders = [package, package / "models", package / "tools"]  # a tool added or removed shows in their mtime
        return cached_build(key, lambda: cls(path, enabled_tools), [f for f in folders if f.is_dir()])

    def __init__(self, path: str | Path, enabled_tools: tuple[str, ...] | list[str] = AGENTFLOW_ENABLED_TOOLS):
        self.package = find_package_dir(path)
        self.label = f"agentflow:{Path(path).expanduser()}"
        models = self.package / "models"
        planner_file, verifier_file, executor_file = (
            models / "planner.py",
            models / "verifier.py",
            models / "executor.py",
        )
        planner, verifier, executor = _parse(planner_file), _parse(verifier_file), _parse(executor_file)
        self._analysis = _template(planner, planner_file, "Planner", "analyze_query")
        self._next_step = _template(planner, planner_file, "Planner", "generate_next_step")
        self._final = _template(planner, planner_file, "Planner", "generate_direct_output")
        self._verification = _template(verifier, verifier_file, "Verifier", "verificate_context")
        self._command = _template(executor, executor_file, "Executor", "generate_tool_command")
        coder_file = self.package / "tools" / "python_coder" / "tool.py"
        self._code = _template(_parse(coder_file), coder_file, "Python_Coder_Tool", "execute")
        self.missing_tool_command, self.missing_tool_result = self._missing_tool_texts()
        self._no_result, self._command_error = self._command_texts(executor, executor_file)
        self.system_prompt = self._system_prompt("dashscope.py", "ChatDashScope")
        self.planner_system_prompt = self._system_prompt("vllm.py", "ChatVLLM")
        self._metadata = self._read_toolbox(list(enabled_tools))

    # ------------------------------------------------------------------ engines and tools
    def _missing_tool_texts(self) -> tuple[str, str]:
        """What the solver (test/solve.py) stores as command and result when the planner names no known tool."""
        from agentflow_env.paper_flow.templates import BuiltinPrompts

        fallback = (BuiltinPrompts.missing_tool_command, BuiltinPrompts.missing_tool_result)
        solve = self.package.parent.parent / "test" / "solve.py"
        if not solve.is_file():
            return fallback
        found: dict[str, str] = {}
        for node in ast.walk(_parse(solve)):
            if isinstance(node, ast.If) and "available_tools" in ast.unparse(node.test):
                for stmt in node.body:
                    if (
                        isinstance(stmt, ast.Assign)
                        and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Name)
                        and isinstance(stmt.value, ast.Constant)
                        and isinstance(stmt.value.value, str)
                    ):
                        found.setdefault(stmt.targets[0].id, stmt.value.value)
        return found.get("command", fallback[0]), found.get("result", fallback[1])

    @staticmethod
    def _command_texts(tree: ast.Module, origin: Path) -> tuple[_Text, _Text]:
        """What ``Executor.execute_tool_command`` stores for a block that leaves no ``execution`` (the f-string
        it appends) and for a command that raised (the f-string its outer ``except`` returns)."""
        func = _find_method(_find_class(tree, "Executor", origin), "execute_tool_command", origin)
        no_result = error = None
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and node.args
                and isinstance(node.args[0], ast.JoinedStr)
            ):
                no_result = _Text.read(node.args[0], origin)
        for stmt in func.body:
            if isinstance(stmt, ast.Try):
                for handler in stmt.handlers:
                    for sub in handler.body:
                        if isinstance(sub, ast.Return) and isinstance(sub.value, ast.JoinedStr):
                            error = _Text.read(sub.value, origin, handler.name)
        if no_result is None or error is None:
            raise AgentFlowSourceError(
                f"{origin}: Executor.execute_tool_command has no executions.append(f'...') or except-return f'...'"
            )
        return no_result, error

    def online_texts(self) -> Any:
        """The prompts of AgentFlow's Web RAG summary and Wikipedia page selection, for the online tools."""
        from agentflow_env.paper_flow.online_tools import OnlineTexts

        web_file = self.package / "tools" / "web_search" / "tool.py"
        summarize = _module_constants(_parse(web_file)).get("SUMMARIZE_PROMPT_TEMPLATE")
        if not isinstance(summarize, str):
            raise AgentFlowSourceError(f"{web_file}: no SUMMARIZE_PROMPT_TEMPLATE string")
        wiki_file = self.package / "tools" / "wikipedia_search" / "tool.py"
        func = next(
            (
                n
                for n in _parse(wiki_file).body
                if isinstance(n, ast.FunctionDef) and n.name == "select_relevant_queries"
            ),
            None,
        )
        prompt = (
            [s for s in ast.walk(func) if isinstance(s, ast.Assign) and isinstance(s.value, ast.JoinedStr)]
            if func is not None
            else []
        )
        if len(prompt) != 1:
            raise AgentFlowSourceError(f"{wiki_file}: select_relevant_queries builds no single f-string prompt")
        select = _Template([prompt[0]], prompt[0].targets[0].id, f"{wiki_file}:select_relevant_queries")  # type: ignore[attr-defined]

        def select_text(query: str, candidates: str) -> str:
            text = select.render({"original_query": query, "query_candidates": candidates})
            return text.format(original_query=query, query_candidates=candidates)  # AgentFlow formats it again

        return OnlineTexts(
            lambda query, reference: summarize.format(query=query, reference_information=reference), select_text
        )

    def no_result(self, block: str) -> str:
        """The result AgentFlow stores for a block after which ``execution`` is ``None``."""
        return self._no_result.render(block=block)

    def command_error(self, exc: BaseException) -> str:
        """The result AgentFlow stores for a command whose run raised ``exc``."""
        return self._command_error.render(exc=exc)

    def _system_prompt(self, file: str, cls: str) -> str:
        path = self.package / "engine" / file
        value = _class_attr(_find_class(_parse(path), cls, path), "DEFAULT_SYSTEM_PROMPT")
        if not isinstance(value, str):
            raise AgentFlowSourceError(f"{path}: {cls}.DEFAULT_SYSTEM_PROMPT is not a string literal")
        return value

    def _read_toolbox(self, enabled: list[str]) -> dict[str, dict[str, Any]]:
        tools_dir = self.package / "tools"
        base_path = tools_dir / "base.py"
        base_requires = bool(_class_attr(_find_class(_parse(base_path), "BaseTool", base_path), "require_llm_engine"))
        files: dict[str, _ToolFile] = {}
        short_to_long: dict[str, str] = {}
        long_to_dir: dict[str, str] = {}
        for path in sorted(tools_dir.glob("*/tool.py")):
            tool_file = _ToolFile(path)
            files[path.parent.name] = tool_file
            if isinstance(tool_file.tool_name, str):
                for name in tool_file.classes:
                    short_to_long[name] = tool_file.tool_name
                    long_to_dir[tool_file.tool_name] = path.parent.name
        collected: dict[str, dict[str, Any]] = {}
        for name in enabled:
            long_name = short_to_long.get(name, name)
            folder = long_to_dir.get(long_name, name.lower().replace("_tool", ""))
            chosen = files.get(folder)
            if chosen is None:
                raise AgentFlowSourceError(f"enabled tool {name!r}: no tools/{folder}/tool.py in {self.package}")
            members = [(chosen, c) for c in chosen.classes if c.endswith("Tool")]
            for module, class_name in chosen.imported_tools():
                other = files.get(module.split(".")[-2])
                if other is not None and class_name in other.classes:
                    members.append((other, class_name))
            for owner, class_name in sorted(members, key=lambda m: m[1]):
                metadata = owner.metadata(class_name, base_requires)
                collected.setdefault(str(metadata["tool_name"]), metadata)
        return {key: collected[key] for key in sorted(collected)}

    def tool_metadata(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in self._metadata.items()}

    # ------------------------------------------------------------------ prompts
    @staticmethod
    def _self(tools: list[str], metadata: dict[str, Any], raw_analysis: Any = None) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            available_tools=tools, toolbox_metadata=metadata, query_analysis=raw_analysis, is_multimodal=False
        )

    def query_analysis(self, question: str, tools: list[str], metadata: dict[str, Any]) -> str:
        return self._analysis.render(
            {"self": self._self(tools, metadata), "question": question, "image": None, "image_info": {}}
        )

    def next_step(
        self,
        question: str,
        analysis: str,
        tools: list[str],
        metadata: dict[str, Any],
        memory: ActionMemory,
        step: int,
        max_steps: int,
    ) -> str:
        return self._next_step.render(
            {
                "self": self._self(tools, metadata),
                "question": question,
                "image": None,
                "query_analysis": analysis,
                "memory": memory,
                "step_count": step,
                "max_step_count": max_steps,
            }
        )

    def tool_command(
        self, question: str, context: str, sub_goal: str, tool_name: str, tool_metadata: dict[str, Any]
    ) -> str:
        return self._command.render(
            {
                "question": question,
                "image": None,
                "context": context,
                "sub_goal": sub_goal,
                "tool_name": tool_name,
                "tool_metadata": tool_metadata,
            }
        )

    def verification(
        self, question: str, tools: list[str], metadata: dict[str, Any], analysis: str, memory: ActionMemory
    ) -> str:
        return self._verification.render(
            {
                "self": self._self(tools, metadata),
                "question": question,
                "image": None,
                "image_info": {},
                "query_analysis": analysis,
                "memory": memory,
            }
        )

    def final_output(self, question: str, raw_analysis: Any, memory: ActionMemory) -> str:
        return self._final.render(
            {
                "self": self._self([], {}, raw_analysis),
                "question": question,
                "image": None,
                "image_info": {},
                "memory": memory,
            }
        )

    def code_request(self, query: str) -> str:
        return self._code.render({"query": query})
