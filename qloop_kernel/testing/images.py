"""The API's check of a base64 image source: valid base64 of an image of the stated media type.

"Vision > Base64-encoded image example": the media types are image/jpeg, image/png, image/gif and
image/webp. The messages are the API's 400 answers for a bad ``image.source.base64`` (they are
appended to the block's path).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def sniff_media_type(raw: bytes) -> str | None:
    """The image format of ``raw`` by its magic bytes, or None when it is none of the four."""
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_problem(media_type: Any, data: Any) -> str | None:
    """What is wrong with a base64 image source (a path suffix and message), or None."""
    if media_type not in MEDIA_TYPES:
        return ".media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
    if not isinstance(data, str):
        return ".data: Input should be a valid string"
    if not data:
        return ": image cannot be empty"
    try:
        raw = base64.b64decode(data.encode(), validate=True)
    except (binascii.Error, ValueError):
        return ": invalid base64 data"
    actual = sniff_media_type(raw)
    if actual is None:
        return ": Could not process image"
    if actual != media_type:
        return (
            f": The image was specified using the {media_type} media type, but the image "
            f"appears to be a {actual} image"
        )
    return None
