"""The paper mode's prompts in this project's words, one per AgentFlow module, carrying the same fields.

Each template gets exactly the inputs AgentFlow's module gets (see ``PromptSource``); values are shown
with Python's ``str()`` as AgentFlow's f-strings show them (tool lists, metadata dicts, the memory dict).
For AgentFlow's own wording, use :class:`agentflow_env.paper_flow.agentflow_source.AgentFlowPrompts`.
"""

from __future__ import annotations

from typing import Any, Protocol

from agentflow_env.paper_flow.memory import ActionMemory

__all__ = ["BuiltinPrompts", "PromptSource"]


class PromptSource(Protocol):
    """Builds every module's prompt; ``label`` names the source in results ("builtin", "agentflow:PATH")."""

    label: str
    system_prompt: str
    missing_tool_command: str  # memory's command and result for a step whose tool is not in the toolbox
    missing_tool_result: str

    def no_result(self, block: str) -> str: ...

    def command_error(self, exc: BaseException) -> str: ...

    def query_analysis(self, question: str, tools: list[str], metadata: dict[str, Any]) -> str: ...

    def next_step(
        self,
        question: str,
        analysis: str,
        tools: list[str],
        metadata: dict[str, Any],
        memory: ActionMemory,
        step: int,
        max_steps: int,
    ) -> str: ...

    def tool_command(
        self, question: str, context: str, sub_goal: str, tool_name: str, tool_metadata: dict[str, Any]
    ) -> str: ...

    def verification(
        self, question: str, tools: list[str], metadata: dict[str, Any], analysis: str, memory: ActionMemory
    ) -> str: ...

    def final_output(self, question: str, raw_analysis: Any, memory: ActionMemory) -> str: ...

    def code_request(self, query: str) -> str: ...

    def tool_metadata(self) -> dict[str, dict[str, Any]]: ...


_SYSTEM = "You are a capable, careful and helpful assistant."

_ANALYSIS = """
Job: study the query below and work out which skills and which tools it calls for.

Given:
- Query: {question}
- Tools you may use: {tools}
- What each tool does (metadata): {metadata}

What to do:
1. Name the query's main goals.
2. List the skills and the tools it needs.
3. Say for each skill and tool how it helps with the query.
4. Add anything else worth keeping in mind.

Lay the answer out as: a short summary of the query, a list of skills and a list of tools (each with \
its reason), and a section of further considerations.

Keep it short and to the point.
"""

_NEXT_STEP = """
Job: choose the best next step towards answering the query, using the tools and what earlier steps found.

Given:
- **Query:** {question}
- **Query analysis:** {analysis}
- **Tools you may use:** {tools}
- **What each tool does (metadata):** {metadata}
- **Steps so far:** {memory}

What to do:
1. Look at the query, the steps so far and the tools.
2. Pick the **one tool** that best serves the next step.
3. Give that tool a concrete **sub-goal** it can actually reach.
4. Give the tool all the **context** it needs (data, file names, variable values).

Answer with these parts:
1.  **Justification:** why this tool and this sub-goal.
2.  **Context:** everything the tool needs to know.
3.  **Sub-Goal:** the exact objective for the tool.
4.  **Tool Name:** the exact name of the chosen tool.

Rules:
- Choose exactly ONE tool.
- The tool must be able to reach the sub-goal on its own.
- The Context part must hold everything the tool needs.
- Finish with the Context, Sub-Goal and Tool Name parts, in that order, and write nothing after them.
"""

_TOOL_COMMAND = """
Job: write the exact command that runs the chosen tool.

Given:
- **Query:** {question}
- **Sub-Goal:** {sub_goal}
- **Tool Name:** {tool_name}
- **Tool Metadata:** {tool_metadata}
- **Relevant data:** {context}

What to do:
1. Read the tool's parameters from its metadata.
2. Write valid Python that reaches the sub-goal with the given context and data.
3. The code must call `tool.execute()` at least once.
4. Assign every `tool.execute()` call to a variable called **`execution`**.
5. Spell out the exact values and arguments the `tool.execute()` call should get.

Answer format (nothing else, no extra explanation):

Generated Command:
```python
<command>
```

Example 1:
Generated Command:
```python
execution = tool.execute(query="Add up the ages given here: Ann is 31 and Bo is 27.")
```

Example 2:
Generated Command:
```python
execution = tool.execute(query=["Photosynthesis", "Pythagorean theorem", "Treaty of Utrecht"])
```
"""

_VERIFICATION = """
Job: decide whether the memory already holds a complete and correct basis for answering the query, or \
whether more tool calls are needed.

Given:
- **Query:** {question}
- **Tools you may use:** {tools}
- **What each tool does (metadata):** {metadata}
- **Initial analysis:** {analysis}
- **Memory (tools used and their results):** {memory}

What to do:
1.  Read the query, the initial analysis and the memory.
2.  Completeness: does the memory cover every part of the query?
3.  Look for problems:
    -   Does anything contradict anything else?
    -   Is anything unclear or still in need of checking?
4.  Would a tool not used so far supply what is missing?

Decision:
-   If the memory is enough, say why and conclude with "STOP".
-   If something is missing, say what, which tools could supply it, and conclude with "CONTINUE".

IMPORTANT: end your answer with "Conclusion: STOP" or "Conclusion: CONTINUE".
"""

_FINAL_OUTPUT = """
Job: write a concise final answer to the query from everything below.

Given:
- **Query:** {question}
- **Initial analysis:** {analysis}
- **Actions taken:** {memory}

What to do:
1. Go over the query and the results of every action.
2. Sum up the key findings as a clear, step-by-step account of the process.
3. Give a direct, precise answer to the query.

Answer layout:
1.  **Process summary:** the steps taken, each with its purpose and key result.
2.  **Answer:** the direct, concise final answer to the query.
"""

_CODE_REQUEST = """Task:
Write a Python snippet that carries out the operation the query asks for, on the data it gives. Work it \
out step by step and keep each step clear. The snippet must print its final result together with a short \
message saying what the number means. Give the snippet in this form:

```python
<code snippet>
```

Query:
{query}"""


class BuiltinPrompts:
    """The project's own wording of AgentFlow's prompts and tool metadata (same fields, same instructions)."""

    label = "builtin"
    system_prompt = _SYSTEM
    missing_tool_command = "No command was generated: the tool was not found."
    missing_tool_result = "No result was generated: the tool was not found."

    @staticmethod
    def no_result(block: str) -> str:
        """The result stored for a block after which ``execution`` is ``None``."""
        return f"No result came back from this block: {block}"

    @staticmethod
    def command_error(exc: BaseException) -> str:
        """The result stored for a command whose run raised ``exc`` (the whole step's result)."""
        return f"Error while running the command: {type(exc).__name__}: {exc}"

    def query_analysis(self, question: str, tools: list[str], metadata: dict[str, Any]) -> str:
        return _ANALYSIS.format(question=question, tools=tools, metadata=metadata)

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
        # AgentFlow's text-only planner prompt does not show the step count either
        return _NEXT_STEP.format(
            question=question, analysis=analysis, tools=tools, metadata=metadata, memory=memory.get_actions()
        )

    def tool_command(
        self, question: str, context: str, sub_goal: str, tool_name: str, tool_metadata: dict[str, Any]
    ) -> str:
        return _TOOL_COMMAND.format(
            question=question, sub_goal=sub_goal, tool_name=tool_name, tool_metadata=tool_metadata, context=context
        )

    def verification(
        self, question: str, tools: list[str], metadata: dict[str, Any], analysis: str, memory: ActionMemory
    ) -> str:
        return _VERIFICATION.format(
            question=question, tools=tools, metadata=metadata, analysis=analysis, memory=memory.get_actions()
        )

    def final_output(self, question: str, raw_analysis: Any, memory: ActionMemory) -> str:
        return _FINAL_OUTPUT.format(question=question, analysis=raw_analysis, memory=memory.get_actions())

    def code_request(self, query: str) -> str:
        return _CODE_REQUEST.format(query=query)

    def tool_metadata(self) -> dict[str, dict[str, Any]]:
        from agentflow_env.paper_flow.toolbox import builtin_metadata

        return builtin_metadata()
