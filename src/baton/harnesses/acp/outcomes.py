"""How an ACP turn ends, as a Baton outcome.

From the agent's own report (basis ``agent_event``; ACP ``StopReason``, ``agentclientprotocol.com``
"Prompt Turn"):

- ``end_turn`` → succeeded; but after Baton asked to cancel, cancelled (OpenCode answers a cancel
  with ``end_turn``, measured);
- ``cancelled`` → cancelled when Baton asked, else interrupted (Codex ends a turn whose permission
  was rejected with ``cancelled``, measured);
- ``refusal``, ``max_tokens``, ``max_turn_requests`` → failed, ended by the agent;
- a JSON-RPC error answering ``session/prompt`` → failed, ended by the agent (how most agents
  report a model error); an agent that ends with ``end_turn`` whose answer is its own error
  report (Copilot: "Error: 400 ...") → failed, when its profile names that prefix.

Without the agent's report, by the rules the Droid harness follows: a process that dies or speaks
garbage before the prompt could reach it fails the turn (nothing was submitted); after that the
turn is ``unknown`` (the agent may have acted on it), unless Baton had asked to cancel, in which
case the turn is cancelled without the agent's confirmation.
"""

from __future__ import annotations

from baton.harnesses.acp.wire import OutcomeModel
from baton.harnesses.base import Failed, Interrupted, Succeeded, TurnOutcome, Unknown

_FAILURES = {
    "refusal": "the agent refused to continue",
    "max_tokens": "the model reached its token limit",
    "max_turn_requests": "the agent reached its limit of model requests for one turn",
}


def from_stop_reason(
    stop_reason: str, text: str, *, cancel_requested: bool, error_prefixes: tuple[str, ...] = ()
) -> OutcomeModel:
    """The outcome of a ``session/prompt`` answered with ``stop_reason`` (module docstring)."""
    if cancel_requested and stop_reason in ("end_turn", "cancelled"):
        return OutcomeModel(
            state="cancelled", reason=stop_reason, message="cancelled by the caller", text=text
        )
    if stop_reason == "end_turn":
        if error_prefixes and text.lstrip().startswith(error_prefixes):
            return OutcomeModel(
                state="failed", reason="agent_error", message=text.strip()[:2000], text=text
            )
        return OutcomeModel(
            state="succeeded", reason="end_turn", message="the agent ended the turn", text=text
        )
    if stop_reason == "cancelled":
        return OutcomeModel(
            state="interrupted",
            reason="cancelled",
            message="the agent cancelled the turn itself (e.g. after a rejected permission)",
            text=text,
        )
    message = _FAILURES.get(stop_reason, f"the agent ended the turn: {stop_reason}")
    return OutcomeModel(state="failed", reason=stop_reason, message=message, text=text)


def from_prompt_error(code: int, message: str, details: str, text: str) -> OutcomeModel:
    """The agent answered ``session/prompt`` with a JSON-RPC error (its own failure report)."""
    said = message if not details or details in message else f"{message}: {details}"
    return OutcomeModel(
        state="failed",
        reason="agent_error",
        message=f"the agent failed the turn (JSON-RPC error {code}): {said}"[:4000],
        text=text,
    )


def without_report(
    reason: str, message: str, text: str, *, submitting: bool, cancel_requested: bool
) -> OutcomeModel:
    """The agent ended (died, garbage, killed) without ending the turn itself."""
    if not submitting:
        return OutcomeModel(
            state="failed", reason=reason, message=message, submitted=False, agentTerminal=False
        )
    if cancel_requested:
        return OutcomeModel(
            state="cancelled", reason=reason, message=message, text=text, agentTerminal=False
        )
    return OutcomeModel(state="unknown", reason=reason, message=message, text=text)


def to_outcome(model: OutcomeModel) -> TurnOutcome:
    """The :data:`~baton.harnesses.base.TurnOutcome` a wire outcome stands for."""
    if model.state == "succeeded":
        return Succeeded(
            reason=model.reason, message=model.message, text=model.text, basis="agent_event"
        )
    if model.state in ("cancelled", "interrupted"):
        return Interrupted(
            state=model.state,
            reason=model.reason,
            message=model.message,
            text=model.text,
            submitted=model.submitted,
            agent_terminal=model.agentTerminal,
        )
    if model.state == "failed":
        return Failed(
            reason=model.reason,
            message=model.message,
            text=model.text,
            submitted=model.submitted,
            agent_terminal=model.agentTerminal,
        )
    return Unknown(reason=model.reason, message=model.message, text=model.text)
