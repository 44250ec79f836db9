"""What the operator does from the dashboard: answer prompts, approve or reject finalizations.

Every route here is a POST that :class:`baton.dashboard.access.Access` has already checked for
the login cookie and the CSRF token. An htmx request gets a short outcome fragment (``role``
``status``, or ``alert`` with a 4xx status for a refusal); a plain form post is redirected back
to the page it came from.

Answers follow ``droid_respond`` (the provider validates with the engine's rules); on top of
that a question that offers options accepts only those options, as the page offers nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from baton.dashboard.provider import DashboardProvider, FinalizationView, PromptView
from baton.dashboard.render import clip, decision_label
from baton.errors import BatonError

if TYPE_CHECKING:
    from baton.dashboard.deps import Deps

COMMENT_MAX: Final = 2000
ANSWER_MAX: Final = 4000
REASON_MAX: Final = 500
_STATUS: Final = {
    "invalid_argument": 400,
    "unknown_request": 409,
    "not_found": 404,
    "conflict": 409,
    "operation_failed": 409,
}


def _deps(request: Request) -> Deps:
    deps: Deps = request.app.state.deps
    return deps


def _outcome(request: Request, form: FormData, ok: bool, message: str, status: int) -> Response:
    if request.headers.get("hx-request") != "true":
        back = str(form.get("next") or "/needs")
        # Only a path on this site: never an absolute or scheme-relative URL.
        if not back.startswith("/") or back.startswith("//") or "\\" in back:
            back = "/needs"
        return RedirectResponse(back, status_code=303)
    deps = _deps(request)
    body = deps.templates.get_template("_outcome.html").render(ok=ok, message=message)
    return Response(body, status_code=status, media_type="text/html")


def _refused(request: Request, form: FormData, exc: BatonError) -> Response:
    return _outcome(request, form, False, exc.message, _STATUS.get(exc.code, 409))


async def answer_prompt(request: Request) -> Response:
    """``POST /sessions/{key}/prompts/{request_id}``: a decision (permission; ``decision``,
    optional ``comment``), answers (question; ``answer-<i>`` per question, ``action=answer``)
    or a refusal (``action=cancel``)."""
    key = request.path_params["session_key"]
    request_id = request.path_params["request_id"]
    form = await request.form()
    provider = _deps(request).provider
    prompt = next((p for p in provider.pending_prompts(key) if p.request_id == request_id), None)
    try:
        if prompt is None:
            raise BatonError(
                "unknown_request", "this prompt is no longer pending (answered, expired or ended)"
            )
        said = await _answer(provider, prompt, form)
    except BatonError as exc:
        return _refused(request, form, exc)
    return _outcome(request, form, True, said, 200)


async def _answer(provider: DashboardProvider, prompt: PromptView, form: FormData) -> str:
    """Validate the form against the prompt, send the answer; what to tell the operator."""
    key, request_id = prompt.session_key, prompt.request_id
    comment = str(form.get("comment") or "").strip()[:COMMENT_MAX] or None
    if form.get("action") == "cancel":
        await provider.answer_prompt(key, request_id, cancel=True)
        return "Declined. The agent is told the question was cancelled."
    if prompt.kind == "permission":
        decision = str(form.get("decision") or "")
        await provider.answer_prompt(key, request_id, decision=decision, comment=comment)
        label = prompt.labels.get(decision) or decision_label(decision)
        return f"Sent “{label}”. The agent continues when it reads it."
    answers = _question_answers(prompt.questions, form)
    await provider.answer_prompt(key, request_id, answers=answers)
    return "Answers sent. The agent continues when it reads them."


def _question_answers(
    questions: Sequence[Mapping[str, Any]], form: FormData
) -> list[dict[str, Any]]:
    answers = []
    for position, question in enumerate(questions):
        chosen = [str(v).strip() for v in form.getlist(f"answer-{position}") if str(v).strip()]
        options = [str(o) for o in question.get("options") or []]
        if options and any(value not in options for value in chosen):
            raise BatonError(
                "invalid_argument",
                f"question {position + 1}: choose among the offered options {options}",
            )
        if not chosen:
            raise BatonError("invalid_argument", f"question {position + 1} needs an answer")
        text = ", ".join(chosen)[:ANSWER_MAX]
        answers.append({"index": question.get("index", position + 1), "answer": text})
    return answers


async def approve(request: Request) -> Response:
    """``POST /finalizations/{request_id}/approve``: approve and run a pending request."""
    form = await request.form()
    try:
        done = await _deps(request).provider.approve_finalization(request.path_params["request_id"])
    except BatonError as exc:
        return _refused(request, form, exc)
    return _outcome(request, form, done.status != "failed", _ended(done), 200)


async def reject(request: Request) -> Response:
    """``POST /finalizations/{request_id}/reject``: reject a pending request (optional
    ``reason``); git is not touched."""
    form = await request.form()
    reason = str(form.get("reason") or "").strip()[:REASON_MAX] or None
    try:
        done = await _deps(request).provider.reject_finalization(
            request.path_params["request_id"], reason
        )
    except BatonError as exc:
        return _refused(request, form, exc)
    return _outcome(request, form, True, _ended(done), 200)


def _ended(request: FinalizationView) -> str:
    what = f"{request.action} of {request.branch or request.session_key}"
    if request.status == "completed":
        return f"Approved: {what} completed."
    if request.status == "rejected":
        return f"Rejected: {what}. Nothing was changed."
    if request.status == "failed":
        message = (request.error or {}).get("message", "no details")
        return f"Approved, but {what} failed: {clip(message, 500)}"
    return f"{what}: {request.status}."
