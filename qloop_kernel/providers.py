"""Model platforms: how to build each SDK client, where credentials come from, model ids, capabilities.

Every platform speaks the Messages API through a client of the one ``anthropic`` SDK
(``Anthropic``, ``AnthropicBedrock``, ``AnthropicVertex``, ``AnthropicFoundry``). Credentials are
read from each platform's usual sources (environment, profiles, application default credentials),
never from notebook text. Nothing here imports ``anthropic``: model.py passes the module in.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from .errors import QloopError
from .names import DEFAULT_PROVIDER as DEFAULT_PROVIDER  # their home is names.py
from .names import PROVIDERS as PROVIDERS
from .names import ProviderName as ProviderName

# Short names mapped to the platform's published ids; any other id is sent as given.
# Current models on Bedrock are served through cross-region inference profiles ("global.").
BEDROCK_IDS = {
    "claude-sonnet-5-5": "global.anthropic.claude-sonnet-5-5",
    "claude-opus-4-6": "anthropic.claude-opus-4-6-v1",
    "claude-sonnet-4-6": "anthropic.claude-sonnet-4-6",
    "claude-haiku-4-5": "anthropic.claude-haiku-4-5-20251001-v1:0",
}
VERTEX_IDS = {
    "claude-haiku-4-5": "claude-haiku-4-5@20251001",
    "claude-opus-4-5": "claude-opus-4-5@20251101",
    "claude-opus-4-1": "claude-opus-4-1@20250805",
}
_BEDROCK_PREFIX = re.compile(r"^(?:(?:global|us|eu|apac|jp|au)\.)?anthropic\.")
_BEDROCK_SUFFIX = re.compile(r"(?:-\d{8})?-v\d+(?::\d+)?$")

# Error names a platform reports in the middle of a stream that a retry can fix; any other
# (a validation error, say) ends the turn.
TRANSIENT_STREAM_ERRORS = frozenset({
    "overloaded_error", "api_error", "rate_limit_error", "timeout_error",
    "throttlingException", "internalServerException", "serviceUnavailableException",
    "modelStreamErrorException", "modelTimeoutException",
})  # fmt: skip
# HTTP error names of the platforms that are transient whatever their status.
TRANSIENT_ERROR_NAMES = frozenset({
    "ThrottlingException", "ServiceUnavailableException", "InternalServerException",
    "ModelNotReadyException", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "DEADLINE_EXCEEDED",
})  # fmt: skip


# Where each platform's client looks for credentials, for the line shown when they are refused.
CREDENTIAL_SOURCES: dict[ProviderName, str] = {
    "anthropic": "check ANTHROPIC_API_KEY in the kernel's environment, or type one with `%agent key`",
    "bedrock": "check AWS_PROFILE / AWS_ACCESS_KEY_ID (or AWS_BEARER_TOKEN_BEDROCK) and the "
    "model access of the account in AWS_REGION",
    "vertex": "run `gcloud auth application-default login` and check ANTHROPIC_VERTEX_PROJECT_ID",
    "foundry": "check ANTHROPIC_FOUNDRY_API_KEY and ANTHROPIC_FOUNDRY_RESOURCE",
    "compatible": "check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) for the server at "
    "ANTHROPIC_BASE_URL",
}


class ProviderError(QloopError, ValueError):
    """A platform cannot be used as configured; the message is one line naming what to set."""


@dataclass(frozen=True)
class Capabilities:
    """What a platform's Messages API accepts; a feature switched off is never sent."""

    streaming: bool = True
    tools: bool = True
    prompt_caching: bool = True
    thinking: bool = True
    images: bool = True
    token_counting: bool = True

    def off(self) -> list[str]:
        """Names of the features switched off, in a fixed order."""
        return [f.name for f in fields(self) if not getattr(self, f.name)]

    def without(self, *names: str) -> Capabilities:
        return replace(self, **dict.fromkeys(names, False))


FULL = Capabilities()
# Bedrock and Vertex have no token counting through the SDK's Messages client.
PLATFORM_CAPABILITIES: dict[ProviderName, Capabilities] = {
    "anthropic": FULL,
    "bedrock": FULL.without("token_counting"),
    "vertex": FULL,
    "foundry": FULL.without("token_counting"),
    "compatible": FULL,  # probed on first use
}


def provider_from(value: str) -> ProviderName:
    """A provider name from user text (case and spaces ignored); ProviderError if unknown."""
    name = value.strip().lower()
    for known in PROVIDERS:
        if name == known:
            return known
    raise ProviderError(f"provider {value!r} is not one of {', '.join(PROVIDERS)}")


def model_id(provider: ProviderName, model: str) -> str:
    """The id to send: the platform's own forms as given, short names mapped where published."""
    if provider == "bedrock":
        return BEDROCK_IDS.get(model, model)
    if provider == "vertex":
        return VERTEX_IDS.get(model, model)
    return model


def short_model(provider: ProviderName, model: str) -> str:
    """The short name a platform id stands for (for prices and retirements); else ``model``."""
    table = BEDROCK_IDS if provider == "bedrock" else VERTEX_IDS if provider == "vertex" else {}
    for short, platform_id in table.items():
        if model == platform_id:
            return short
    if provider == "bedrock" and _BEDROCK_PREFIX.match(model):
        return _BEDROCK_SUFFIX.sub("", _BEDROCK_PREFIX.sub("", model))
    if provider == "vertex":
        return model.split("@", 1)[0]
    return model


def missing_setting(provider: ProviderName, environ: Mapping[str, str] | None = None) -> str | None:
    """One line naming what to set before ``provider`` can be used, or None when it looks ready.

    Only the environment and installed packages are looked at: no credential is fetched here.
    """
    env = os.environ if environ is None else environ
    check = _CHECKS[provider]
    return check(env)


# Gateways start kernels with only the variables they are told to pass on.
REMOTE_SETTINGS = (
    "KG_ENV_PROCESS_WHITELIST (Kernel Gateway) or EG_ENV_PROCESS_WHITELIST (Enterprise Gateway)"
)


def remote_hint(names: str) -> str:
    """Why a variable set where Jupyter started can be missing in a kernel that runs elsewhere."""
    return (
        "a remote kernel (Kernel Gateway, Enterprise Gateway, JupyterHub) sees only the variables "
        f"its gateway passes on: add {names} to {REMOTE_SETTINGS} where the gateway runs"
    )


def _check_anthropic(env: Mapping[str, str]) -> str | None:
    if env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN"):
        return None
    return (
        "ANTHROPIC_API_KEY is not set in the kernel's environment: set it before starting "
        "Jupyter (export ANTHROPIC_API_KEY=...), or run `%agent key` to type it without it "
        f"being shown or saved; {remote_hint('ANTHROPIC_API_KEY')}, or use `%agent key`"
    )


def _check_bedrock(env: Mapping[str, str]) -> str | None:
    if not _installed("botocore"):
        return "provider bedrock needs boto3: pip install 'qloop-kernel[bedrock]'"
    if not (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or env.get("AWS_PROFILE")):
        return (
            "provider bedrock: set AWS_REGION (e.g. export AWS_REGION=us-east-1) or an "
            "AWS_PROFILE with a region"
        )
    return None


def _check_vertex(env: Mapping[str, str]) -> str | None:
    if not env.get("CLOUD_ML_REGION"):
        return "provider vertex: set CLOUD_ML_REGION (e.g. export CLOUD_ML_REGION=global)"
    if not _installed("google.auth"):
        return (
            "provider vertex needs google-auth for application default credentials: "
            "pip install 'qloop-kernel[vertex]' and run `gcloud auth application-default login`"
        )
    return None


def _check_foundry(env: Mapping[str, str]) -> str | None:
    if not (env.get("ANTHROPIC_FOUNDRY_RESOURCE") or env.get("ANTHROPIC_FOUNDRY_BASE_URL")):
        return "provider foundry: set ANTHROPIC_FOUNDRY_RESOURCE (your Foundry resource name)"
    if not env.get("ANTHROPIC_FOUNDRY_API_KEY"):
        return "provider foundry: set ANTHROPIC_FOUNDRY_API_KEY (the resource's key)"
    return None


def _check_compatible(env: Mapping[str, str]) -> str | None:
    if not env.get("ANTHROPIC_BASE_URL"):
        return (
            "provider compatible: ANTHROPIC_BASE_URL is not set in the kernel's environment: set "
            "it to the URL of a server that speaks the Messages API (e.g. export "
            "ANTHROPIC_BASE_URL=http://localhost:4000) before starting Jupyter, or in the "
            "notebook with `%env ANTHROPIC_BASE_URL=...` and `%agent key`; "
            + remote_hint("ANTHROPIC_BASE_URL (and ANTHROPIC_API_KEY)")
        )
    return None


_CHECKS = {
    "anthropic": _check_anthropic,
    "bedrock": _check_bedrock,
    "vertex": _check_vertex,
    "foundry": _check_foundry,
    "compatible": _check_compatible,
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def build_client(
    sdk: Any,
    provider: ProviderName,
    *,
    strict: bool = False,
    api_key: str | None = None,
    base_url: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Any:  # Any: an SDK client made from the module model.py passes in (no anthropic import here)
    """The SDK client of ``provider`` with the SDK's retries off (the caller retries).

    ``options`` are passed to the client as they are (e.g. ``credentials`` or ``access_token``
    for Vertex, ``aws_region`` for Bedrock). A platform that cannot be set up raises
    ProviderError with one line.
    """
    common: dict[str, Any] = {"max_retries": 0, "_strict_response_validation": strict}
    extra = {k: v for k, v in {"api_key": api_key, "base_url": base_url}.items() if v is not None}
    given = {**extra, **(options or {})}
    try:
        return _BUILDERS[provider](sdk, common, given)
    except (ValueError, sdk.AnthropicError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ProviderError(f"provider {provider}: {first}") from None


# Any: an SDK client made from the module passed in
def _anthropic(sdk: Any, common: dict[str, Any], given: dict[str, Any]) -> Any:
    return sdk.Anthropic(**common, **given)


# Any: an SDK client made from the module passed in
def _compatible(sdk: Any, common: dict[str, Any], given: dict[str, Any]) -> Any:
    key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    # Local servers often want no key; the SDK needs one to build a request.
    given = {"api_key": key or "unused", **given}
    return sdk.Anthropic(**common, **given)


# Any: an SDK client made from the module passed in
def _bedrock(sdk: Any, common: dict[str, Any], given: dict[str, Any]) -> Any:
    # Region and credentials: AWS_REGION, AWS_PROFILE and the rest of botocore's chain, or
    # AWS_BEARER_TOKEN_BEDROCK (read by the SDK).
    return sdk.AnthropicBedrock(**common, **given)


# Any: an SDK client made from the module passed in
def _vertex(sdk: Any, common: dict[str, Any], given: dict[str, Any]) -> Any:
    options = dict(given)
    options.pop("api_key", None)  # Vertex authenticates with Google credentials only
    project = os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID") or os.environ.get(
        "GOOGLE_CLOUD_PROJECT"
    )
    if project and "project_id" not in options:
        options["project_id"] = project
    return sdk.AnthropicVertex(**common, **options)


# Any: an SDK client made from the module passed in
def _foundry(sdk: Any, common: dict[str, Any], given: dict[str, Any]) -> Any:
    return sdk.AnthropicFoundry(**common, **given)


_BUILDERS = {
    "anthropic": _anthropic,
    "bedrock": _bedrock,
    "vertex": _vertex,
    "foundry": _foundry,
    "compatible": _compatible,
}
