"""One settings object for the whole appliance.

Every deployment variable (docs/operations.md#environment-variables) plus the appliance's own (``OPENKB_HOME``, secret key, limits).
A variable left unset means "embedded": the supervisor runs that component itself under
``$OPENKB_HOME``. ``describe()`` is what ``openkb config show`` prints, secrets masked.
"""

from __future__ import annotations

import os
import secrets
import socket
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from openkb.errors import ConfigError

SECRET_FIELDS = {"s3_secret_key", "milvus_token", "smtp_password", "secret_key", "database_url"}

# Set by `openkb up` / `openkb serve` (and inherited by their children) to the address the API
# listens on, so links follow `--port` when APP_BASE_URL is unset. Internal: not a setting.
SERVED_URL_ENV = "OPENKB_SERVED_URL"
DEFAULT_BASE_URL = "http://127.0.0.1:8000"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", case_sensitive=False)

    # --- deployment (docs/operations.md) ----------------------------------------------
    database_url: str | None = Field(None, description="PostgreSQL URL; unset = embedded pgserver")
    redis_url: str | None = Field(None, description="Redis URL for huey; unset = SQLite huey file")
    s3_endpoint: str | None = Field(None, description="S3/MinIO endpoint; unset = local blob folder")
    s3_bucket: str | None = Field(None, description="S3 bucket for assets")
    s3_access_key: str | None = None
    s3_secret_key: str | None = None
    s3_region: str = "us-east-1"
    milvus_uri: str | None = Field(None, description="Milvus 2.6 URI; unset = Milvus Lite server")
    milvus_token: str | None = None
    milvus_database: str = "default"
    milvus_active_alias: str = "openkb_chunks_active"
    smtp_host: str | None = Field(None, description="SMTP host; unset = outbox folder")
    smtp_port: int = 587
    smtp_user: str | None = None
    smtp_password: str | None = None
    smtp_from: str = "OpenKB <no-reply@openkb.local>"
    app_base_url: str = Field(
        "",
        description="public URL in links (mail, invitations, shares, Dify citations); unset = the address "
        "`openkb up`/`serve` listens on (see app_base_url_source)",
    )

    # --- appliance ----------------------------------------------------------------------
    openkb_home: Path = Field(default_factory=lambda: Path("~/.openkb").expanduser())
    openkb_env: Literal["development", "production", "test"] = "development"
    openkb_secret_key: str | None = Field(None, description="unset = generated into OPENKB_HOME")
    openkb_embedder_url: str | None = Field(
        None, description="OpenAI-compatible /v1 base URL used by Milvus TEXTEMBEDDING; unset = embedded"
    )
    openkb_embedder_model: str = "use-multilingual-v3"
    openkb_log_level: str = "INFO"
    openkb_pdf_converter: Literal["auto", "builtin", "mineru"] = Field(
        "auto",
        description="PDF converter of imports (docs/importing.md#mineru): auto = MinerU when installed with "
        "local models, else the built-in pdfplumber one",
    )
    openkb_mineru_bin: str | None = Field(None, description="MinerU's `mineru` executable; unset = found on PATH")
    openkb_mineru_timeout_seconds: int = Field(600, ge=1, description="longest MinerU run for one PDF")

    # --- limits (spec/issue figures) ------------------------------------------------------
    max_markdown_chars: int = 5_000_000
    max_title_chars: int = 1_000
    max_name_chars: int = 1_000
    max_metadata_bytes: int = 64 * 1024
    max_folder_depth: int = 10
    max_duplicate_documents: int = 1_000
    max_upload_bytes: int = 50 * 1024 * 1024
    asset_retention_days: int = Field(
        30,
        ge=0,
        description="days an asset without a document (its page purged, an import's source, an upload never "
        "attached) is kept before the worker prunes it (docs/data-model.md#assets); 0 = keep them",
    )
    max_export_bytes: int = Field(
        4 * 1024 * 1024 * 1024, ge=1, description="largest export (pages and assets before compression; docs/export.md)"
    )
    max_json_body_bytes: int | None = Field(
        None,
        description="cap on any non-upload request body (413 PAYLOAD_TOO_LARGE); unset = derived from "
        "MAX_MARKDOWN_CHARS (see json_body_limit)",
    )
    session_ttl_hours: int = 24 * 14
    oauth_access_token_ttl_seconds: int = Field(
        3600, ge=60, description="lifetime of an OAuth access token for /mcp (docs/oauth.md); clients refresh it"
    )
    oauth_refresh_token_ttl_days: int = Field(
        30, ge=1, description="lifetime of an OAuth refresh token; each refresh rotates it and starts a new period"
    )
    openkb_dify_rate_limit_per_minute: int = Field(
        1200, description="calls per minute per Dify key before 429 (Dify retries 429, keep it an overload signal)"
    )

    # --- MCP (docs/mcp.md): caps on what one tool call may return ---------------------------
    mcp_max_top_k: int = Field(20, ge=1, le=100, description="largest kb_search top_k an MCP client may ask for")
    mcp_snippet_chars: int = Field(500, ge=50, description="characters of chunk text in each kb_search result")
    mcp_max_response_chars: int = Field(
        50_000,
        ge=1_000,
        description="cap on the text one MCP tool call or resource read returns (Markdown pages, "
        "search results); the rest is reachable with offset/cursor",
    )
    mcp_page_size: int = Field(50, ge=1, description="default page of the kb_list_* tools")
    mcp_max_page_size: int = Field(200, ge=1, description="largest page a kb_list_* call may ask for")
    openkb_mcp_enabled: bool = Field(
        True, description="serve /mcp (docs/mcp.md); false = the endpoint answers 404 and no MCP client connects"
    )
    openkb_dify_enabled: bool = Field(
        True, description="serve the Dify external-knowledge API (docs/dify.md); false = /retrieval answers 404"
    )
    mcp_allowed_hosts: str = Field(
        "",
        description="extra Host headers /mcp accepts (comma-separated host[:port]); APP_BASE_URL's host and "
        "loopback are always accepted, others get 421",
    )

    _app_base_url_source: str = PrivateAttr("environment")

    @field_validator("openkb_home", mode="before")
    @classmethod
    def _expand_home(cls, v: Any) -> Any:
        if isinstance(v, str):
            return Path(v).expanduser()
        if isinstance(v, Path):
            return v.expanduser()
        return v

    @model_validator(mode="after")
    def _derive_app_base_url(self) -> Settings:
        """APP_BASE_URL unset: the address actually served, so `openkb up --port 18000` links to
        :18000, not the default :8000 (docs/operations.md). The trap: the link builders run in
        different processes. The API and worker learn the address from ``OPENKB_SERVED_URL``
        (set by ``up``/``serve`` before settings are read, inherited by children); a CLI command
        such as ``openkb dify info`` reads the live ``openkb up``'s run record of this home."""
        if self.app_base_url.strip():
            self._app_base_url_source = "environment"
            return self
        served = os.environ.get(SERVED_URL_ENV, "").strip()
        if served:
            url, source = served, "derived: the address this process serves (APP_BASE_URL unset)"
        else:
            from openkb.runtime.home import Home, read_record

            rec = read_record(Home(self.openkb_home), "up") or {}
            if rec.get("url"):
                url = public_url(str(rec["url"]))
                source = f"derived: the running `openkb up` (pid {rec.get('pid')}) in OPENKB_HOME (APP_BASE_URL unset)"
            else:
                url = DEFAULT_BASE_URL
                source = (
                    "default: APP_BASE_URL unset and no `openkb up` running in OPENKB_HOME; "
                    "links follow --host/--port once it runs"
                )
        self.app_base_url = url
        self._app_base_url_source = source
        return self

    @property
    def app_base_url_source(self) -> str:
        """Where ``app_base_url`` came from (``openkb config show`` prints it)."""
        return self._app_base_url_source

    # --- derived ------------------------------------------------------------------------
    @property
    def secret_key(self) -> str:
        if self.openkb_secret_key:
            return self.openkb_secret_key
        if self.openkb_env == "production":
            raise ConfigError(
                "OPENKB_SECRET_KEY must be set when OPENKB_ENV=production "
                "(replicas must share it); generate one with `python -c 'import secrets;print(secrets.token_urlsafe(48))'`"
            )
        return ensure_secret_file(self.openkb_home)

    @property
    def json_body_limit(self) -> int:
        """``MAX_JSON_BODY_BYTES``, else room for a Markdown body at ``max_markdown_chars`` even when
        the client escapes every character (``ensure_ascii`` JSON turns CJK text into ``\\uXXXX``:
        6 bytes a character), plus 2 MiB for the other fields. 5,000,000 characters -> 32,097,152
        bytes. Uploads have their own ``max_upload_bytes``."""
        if self.max_json_body_bytes:
            return self.max_json_body_bytes
        return self.max_markdown_chars * 6 + 2 * 1024 * 1024

    @property
    def embedder_url(self) -> str | None:
        """``OPENKB_EMBEDDER_URL=off`` means no embedding service at all (BM25-only search)."""
        if self.openkb_embedder_url in (None, "", "off", "none"):
            return None
        return self.openkb_embedder_url

    def embedded(self, component: str) -> bool:
        return {
            "postgresql": self.database_url is None,
            "milvus": self.milvus_uri is None,
            "queue": self.redis_url is None,
            "blobs": self.s3_endpoint is None,
            "mail": self.smtp_host is None,
            "embedder": self.openkb_embedder_url is None,
        }[component]

    def validate_urls(self) -> None:
        """Catch malformed URLs up front, naming the variable and the fix."""
        if self.database_url is not None:
            u = urlparse(self.database_url)
            if u.scheme not in ("postgresql", "postgres", "postgresql+psycopg") or not (
                u.hostname or "host=" in (u.query or "")
            ):
                raise ConfigError(
                    f"DATABASE_URL is malformed ({mask_url(self.database_url)}): expected "
                    "postgresql://user:password@host:5432/dbname, or unset it for the embedded database"
                )
        if self.milvus_uri is not None:
            u = urlparse(self.milvus_uri)
            if u.scheme not in ("http", "https", "tcp", "grpc", "unix") or not u.hostname:
                raise ConfigError(
                    f"MILVUS_URI is malformed ({self.milvus_uri}): expected http://host:19530, "
                    "or unset it for the embedded Milvus Lite"
                )
        if self.redis_url is not None:
            u = urlparse(self.redis_url)
            if u.scheme not in ("redis", "rediss", "unix"):
                raise ConfigError(f"REDIS_URL is malformed ({mask_url(self.redis_url)}): expected redis://host:6379/0")
        if self.s3_endpoint is not None and not self.s3_bucket:
            raise ConfigError("S3_ENDPOINT is set but S3_BUCKET is not: set S3_BUCKET to the asset bucket")
        u = urlparse(self.app_base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ConfigError(f"APP_BASE_URL is malformed ({self.app_base_url}): expected https://kb.example.com")

    def describe(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        comp_of = {
            "database_url": "postgresql",
            "redis_url": "queue",
            "s3_endpoint": "blobs",
            "s3_bucket": "blobs",
            "s3_access_key": "blobs",
            "s3_secret_key": "blobs",
            "milvus_uri": "milvus",
            "milvus_token": "milvus",
            "milvus_database": "milvus",
            "milvus_active_alias": "milvus",
            "smtp_host": "mail",
            "smtp_user": "mail",
            "smtp_password": "mail",
            "smtp_port": "mail",
            "smtp_from": "mail",
            "openkb_embedder_url": "embedder",
            "openkb_embedder_model": "embedder",
        }
        for name in type(self).model_fields:
            value = getattr(self, name)
            comp = comp_of.get(name)
            mode = ("embedded" if self.embedded(comp) else "external") if comp else "-"
            shown: Any = value
            if name in SECRET_FIELDS and value:
                shown = mask_url(value) if "://" in str(value) else "********"
            if name == "openkb_secret_key":
                shown = "********" if value else f"(generated in {self.openkb_home}/secret_key)"
            if isinstance(shown, Path):
                shown = str(shown)
            if shown is None:
                shown = {
                    "database_url": f"(embedded pgserver in {self.openkb_home}/pg)",
                    "redis_url": f"(embedded SQLite huey in {self.openkb_home}/queue.db)",
                    "s3_endpoint": f"(local blob folder {self.openkb_home}/blobs)",
                    "milvus_uri": f"(embedded Milvus Lite server, data in {self.openkb_home}/milvus)",
                    "smtp_host": f"(outbox folder {self.openkb_home}/outbox)",
                    "openkb_embedder_url": "(embedded embedder started by the supervisor)",
                }.get(name, None)
            if name == "app_base_url":
                source = self.app_base_url_source
            else:
                source = "environment" if name in self.model_fields_set else "default"
            rows.append({"name": name.upper(), "value": shown, "mode": mode, "source": source})
        return rows


def served_url(host: str, port: int) -> str:
    """The public URL of an API listening on ``host:port``: what links use when APP_BASE_URL is
    unset. A wildcard bind (0.0.0.0, ::) is not an address anyone can open, so it becomes this
    machine's host name; set APP_BASE_URL when that is not what clients reach."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.gethostname() or "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def public_url(listen_url: str) -> str:
    """``served_url`` of a URL like ``http://0.0.0.0:8000`` (the ``up`` run record's)."""
    u = urlparse(listen_url)
    if u.hostname is None or u.port is None:
        return listen_url
    return served_url(u.hostname, u.port)


def mask_url(url: str) -> str:
    u = urlparse(url)
    if u.password:
        return url.replace(f":{u.password}@", ":****@")
    return url


def ensure_secret_file(home: Path) -> str:
    path = home / "secret_key"
    if path.exists():
        return path.read_text().strip()
    home.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(48)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key)
    return key


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def reset_settings_cache() -> None:
    get_settings.cache_clear()
