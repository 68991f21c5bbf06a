"""The API's error shape and the HTTP status that goes with each error type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_STATUS_BY_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_TYPE_BY_STATUS = {status: error_type for error_type, status in _STATUS_BY_TYPE.items()}

_DEFAULT_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "billing_error": "Your credit balance is too low to access the Anthropic API.",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "The requested resource could not be found.",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of requests has exceeded your rate limit.",
    "api_error": "Internal server error",
    "timeout_error": "Request timed out",
    "overloaded_error": "Overloaded",
}


def error_type_for_status(status: int) -> str:
    """Return the API error type the API uses for an HTTP status."""
    if status in _TYPE_BY_STATUS:
        return _TYPE_BY_STATUS[status]
    return "api_error" if status >= 500 else "invalid_request_error"


def status_for_error_type(error_type: str) -> int:
    """Return the HTTP status the API answers with for an error type (500 when unknown)."""
    return _STATUS_BY_TYPE.get(error_type, 500)


def default_message(error_type: str) -> str:
    """Return a message like the API's for an error type."""
    return _DEFAULT_MESSAGES.get(error_type, "Error")


def error_body(
    error_type: str,
    message: str,
    request_id: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Return an error in the API's shape: ``{"type": "error", "error": {...}, "request_id"}``."""
    error: dict[str, Any] = {"type": error_type, "message": message}
    if details is not None:
        error["details"] = dict(details)
    body: dict[str, Any] = {"type": "error", "error": error}
    if request_id is not None:
        body["request_id"] = request_id
    return body
