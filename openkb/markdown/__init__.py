"""OpenKB's Markdown dialect: exactly what Milkdown Crepe 7.22.1 parses and saves.

One registry (``registry.EDITOR_FEATURES``) says what the editor supports; the validator,
normalizer and extractors all read it, so a construct the editor cannot keep is refused at
every door (save, import, index) instead of being silently rewritten by one of them.
"""

from .extract import Heading, Link, links, outline, plain_text, render_html
from .normalize import normalize
from .registry import EDITOR_FEATURES, EditorFeature, enabled_features, feature
from .validate import DialectIssue, ensure_valid, prepare_import, validate, validate_and_normalize

__all__ = [
    "EDITOR_FEATURES",
    "DialectIssue",
    "EditorFeature",
    "Heading",
    "Link",
    "enabled_features",
    "ensure_valid",
    "feature",
    "links",
    "normalize",
    "outline",
    "plain_text",
    "prepare_import",
    "render_html",
    "validate",
    "validate_and_normalize",
]
