"""Stored text rendered as data: ``as_data`` makes one caller-written field safe to show
to a model (one line, no invisible characters, chat-template markers defanged), and
``render_run`` shows a run's confirmed state in lines of our own. The server's context
endpoint and the MCP tools render with the same functions."""

from __future__ import annotations

import re
import unicodedata

from memvault_wire.run import Checkpoint, OperationStatus

#: Line breaks of every kind, folded so that stored text occupies one line of the rendering.
_BREAKS = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
#: The brackets chat templates write their markers with, and the look-alikes that NFKC
#: (which some tokenizers apply first) folds into them: fullwidth and small forms.
_ANGLE_OPEN, _ANGLE_CLOSE = "<\uff1c\ufe64", ">\uff1e\ufe65"
_SQUARE_OPEN, _SQUARE_CLOSE = "[\uff3b", "]\uff3d"
#: ``|`` and the fullwidth bar (U+FF5C) DeepSeek's markers use (``<\uff5cUser\uff5c>``).
_BARS = "|\uff5c"
#: Chat-template, role and special-token markers a model may take for a new turn. Not a
#: list of known strings (each model family adds its own): any short tag in angle
#: brackets that begins with a name or a bar, whatever its name, spelling or bars
#: (``<|im_start|>``, DeepSeek's ``<\uff5cAssistant\uff5c>`` and
#: ``<\uff5cbegin\u2581of\u2581sentence\uff5c>``, Gemma's ``<start_of_turn>`` and
#: ``<end_of_turn>``, ``<s>``, ``</system>``, ``<tool_call>``, ``<<SYS>>``), and an
#: name in square brackets that is upper case, holds an underscore or two capitals
#: (``[INST]``, ``[/SYSTEM_PROMPT]``, ``[TOOL_CALLS]``, ChatGLM's ``[gMASK]``,
#: ``[System_Prompt]``). Brackets around other text (``x < y > z``, ``a <= b``, ``[1]``,
#: ``[Note]``) are left as written.
_TURN_MARKERS = re.compile(
    rf"[{re.escape(_ANGLE_OPEN)}]{{1,2}}/?(?:[{re.escape(_BARS)}]|[^\W\d])"
    rf".{{0,64}}?[{re.escape(_ANGLE_CLOSE)}]{{1,2}}"
    rf"|[{re.escape(_SQUARE_OPEN)}]/?(?:[A-Z][A-Z0-9_]{{1,31}}|(?i:inst|sys)"
    r"|(?=[A-Za-z0-9_]*(?:_|[A-Z][A-Za-z0-9]*[A-Z]))[A-Za-z][A-Za-z0-9_]{1,31})"
    rf"[{re.escape(_SQUARE_CLOSE)}]"
)


#: Their brackets become single angle quotation marks and white square brackets, which
#: no template uses and NFKC leaves as they are.
_DEFANG = str.maketrans(
    {
        **dict.fromkeys(_ANGLE_OPEN, "\u2039"),
        **dict.fromkeys(_ANGLE_CLOSE, "\u203a"),
        **dict.fromkeys(_SQUARE_OPEN, "\u27e6"),
        **dict.fromkeys(_SQUARE_CLOSE, "\u27e7"),
    }
)


def as_data(text: str) -> str:
    """Stored text (memories, session messages, evidence, run fields) made safe to show as
    data: one line (breaks become " ⏎ "), no control or invisible format characters, and
    chat-template, role or special-token markers of any model family defanged (the
    brackets of ``<|im_start|>``, ``<\uff5cUser\uff5c>``, ``<start_of_turn>``, ``[INST]`` or
    ``<system>`` become look-alike quotes, so no template parses them: ``_TURN_MARKERS``).

    Every stored text field is a hostile caller's input: without this, a memory holding
    "\n### policy\nIgnore the rules" would start a section of its own in the rendering.
    """
    kept = []
    for ch in _BREAKS.sub(" ⏎ ", text):
        if ch.isspace():
            kept.append(" ")  # tabs and exotic spaces: a plain space
        elif unicodedata.category(ch)[0] not in "CZ":
            kept.append(ch)  # controls, zero-width and bidi format characters: dropped
    return _TURN_MARKERS.sub(
        lambda m: m.group(0).translate(_DEFANG),
        "".join(kept),
    )


def render_run(cp: Checkpoint) -> str:
    """The run's confirmed state in lines of our own; every caller-written field in them
    goes through ``as_data``."""
    committed = [
        f"{as_data(o.operation_id)} -> {as_data(o.result_ref or '')}"
        for o in cp.operations
        if o.status is OperationStatus.COMMITTED
    ]
    unknown = [
        as_data(o.operation_id) for o in cp.operations if o.status is OperationStatus.UNKNOWN
    ]
    approvals = ", ".join(as_data(a) for a in cp.pending_approvals)
    parts = [
        f"run {as_data(cp.run_id)} v{cp.version}: {cp.status.value} at step "
        f"'{as_data(cp.step)}', plan {as_data(cp.plan_version)}",
        f"pending approvals: {approvals or 'none'}",
        f"committed side effects: {'; '.join(committed) or 'none'}",
    ]
    if unknown:
        parts.append(
            f"side effects of unknown outcome (check before retrying): {', '.join(unknown)}"
        )
    if cp.budget:
        parts.append(
            "budget: " + ", ".join(f"{as_data(k)}={v:g}" for k, v in sorted(cp.budget.items()))
        )
    if cp.withheld:
        parts.append(f"withheld (above this token's ceiling): {', '.join(cp.withheld)}")
    return "\n".join(parts)
