"""User settings and `droid exec --help` parsing (the help text is real CLI 0.225.2 output)."""

from __future__ import annotations

import json
from pathlib import Path

from baton.harnesses.droid.local.user_settings import (
    base_url_host,
    custom_models,
    default_model,
    help_default_model,
    parse_exec_help,
    read_user_settings,
)

FIXTURES = Path(__file__).parent / "fixtures"
# Captured with `HOME=<empty> droid exec --help` (CLI 0.225.2, FACTORY_AIRGAP_ENABLED unset).
HELP = (FIXTURES / "droid-exec-help-0.225.2.txt").read_text()


def test_exec_help_lists_every_model_with_its_efforts_and_the_default() -> None:
    models = parse_exec_help(HELP)
    assert len(models) == 54
    assert help_default_model(models) == "gpt-5.6-sol"
    assert [m.id for m in models if m.is_default] == ["gpt-5.6-sol"]
    sol = next(m for m in models if m.id == "gpt-5.6-sol")
    assert sol.to_json() == {
        "id": "gpt-5.6-sol",
        "displayName": "GPT-5.6 Sol",
        "deprecated": False,
        "default": True,
        "supportsReasoning": True,
        "supportedReasoningEfforts": ["none", "low", "medium", "high", "xhigh", "max"],
        "defaultReasoningEffort": "medium",
    }
    # Every model found its details line, joined by display name.
    assert all(m.supports_reasoning is not None for m in models)


def test_deprecated_models_are_flagged_and_joined_to_their_details() -> None:
    models = {m.id: m for m in parse_exec_help(HELP)}
    glm = models["glm-4.7"]
    assert (glm.deprecated, glm.display_name, glm.supports_reasoning) == (True, "GLM-4.7", False)
    assert glm.supported_reasoning_efforts == ("none",)
    assert not models["claude-opus-4-8"].deprecated


def test_air_gapped_help_lists_no_models() -> None:
    # Measured: with FACTORY_AIRGAP_ENABLED=1 both sections are printed empty.
    text = "Usage: droid exec\n\nAvailable Models:\n\n\nModel details:\n\nAuthentication:\n  x\n"
    assert parse_exec_help(text) == ()
    assert help_default_model(()) is None


def test_custom_models_keep_only_allowlisted_fields_and_the_base_url_host() -> None:
    settings = {
        "customModels": [
            {
                "model": "fake-model",
                "id": "custom:fake-local",
                "displayName": "Fake Local",
                "baseUrl": "https://user:secret@models.example.com:8443/v1?token=abc",
                "apiKey": "dummy-key-never-shown",
                "provider": "generic-chat-completion-api",
                "maxOutputTokens": 1024,
                "noImageSupport": True,
                "extraHeaders": {"Authorization": "Bearer dummy"},
                "extraArgs": {"x": 1},
            },
            "not an object",
            {"model": "m2", "baseUrl": "http://[::1]/v1", "displayName": {"nested": 1}},
        ]
    }
    shown = custom_models(settings)
    assert shown == [
        {
            "id": "custom:fake-local",
            "model": "fake-model",
            "displayName": "Fake Local",
            "provider": "generic-chat-completion-api",
            "baseUrl": "models.example.com:8443",
            "maxOutputTokens": 1024,
            "noImageSupport": True,
        },
        {"model": "m2", "baseUrl": "[::1]"},
    ]
    rendered = json.dumps(shown)
    assert "secret" not in rendered and "dummy" not in rendered and "token" not in rendered


def test_base_url_host_rejects_what_is_not_a_url() -> None:
    assert base_url_host("not a url") is None
    assert base_url_host(42) is None
    assert base_url_host("http://h:99999/") is None  # invalid port


def test_default_model_comes_from_session_default_settings() -> None:
    assert default_model({"sessionDefaultSettings": {"model": "custom:x"}}) == "custom:x"
    assert default_model({"sessionDefaultSettings": {"model": ""}}) is None
    assert default_model({"model": "sonnet"}) is None
    assert default_model(None) is None


def test_user_settings_missing_or_corrupt_read_as_none(tmp_path: Path) -> None:
    assert read_user_settings(tmp_path) is None
    (tmp_path / "settings.json").write_text("{oops")
    assert read_user_settings(tmp_path) is None
    (tmp_path / "settings.json").write_text('{"customModels": []}')
    assert read_user_settings(tmp_path) == {"customModels": []}
