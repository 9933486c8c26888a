"""A scrape job's credentials and TLS, as Prometheus's scrape config writes them. Secrets are
``SecretStr``: every dump of the settings (audit log, example config, errors) shows stars."""

from __future__ import annotations

from pydantic import Field, SecretStr, model_validator

from collector.scrape_auth import ScrapeAuth
from infermeter.settings_base import Strict


class BasicAuth(Strict):
    username: str = Field(min_length=1, description="the user name sent with every scrape")
    password: SecretStr | None = Field(None, description="prefer password_file")
    password_file: str | None = Field(None, description="read at each scrape when it changed")

    @model_validator(mode="after")
    def _one_password(self) -> BasicAuth:
        if self.password is not None and self.password_file is not None:
            raise ValueError("basic_auth: give password or password_file, not both")
        return self


class Authorization(Strict):
    type: str = Field("Bearer", pattern=r"^[A-Za-z][A-Za-z0-9._-]*$", description="the header's scheme")
    credentials: SecretStr | None = Field(None, description="prefer credentials_file")
    credentials_file: str | None = Field(None, description="read at each scrape when it changed")

    @model_validator(mode="after")
    def _one_secret(self) -> Authorization:
        if (self.credentials is None) == (self.credentials_file is None):
            raise ValueError("authorization: give exactly one of credentials and credentials_file")
        return self


class TlsConfig(Strict):
    ca_file: str | None = Field(None, description="CA certificates to verify the target with (default: the system's)")
    cert_file: str | None = Field(None, description="client certificate (PEM) for mutual TLS")
    key_file: str | None = Field(None, description="the client certificate's key (PEM)")
    server_name: str | None = Field(None, description="the name to verify the target's certificate against")
    insecure_skip_verify: bool = Field(False, description="do not verify the target's certificate (tests only)")

    @model_validator(mode="after")
    def _pair(self) -> TlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("tls_config: cert_file and key_file go together")
        return self


def scrape_auth(basic: BasicAuth | None, authorization: Authorization | None, tls: TlsConfig | None,
                url_user: str | None = None, url_password: str | None = None) -> ScrapeAuth | None:
    """The runtime form; credentials written into the URL count as basic_auth."""
    fields: dict[str, object] = {}
    if basic is not None:
        fields.update(username=basic.username, password=basic.password.get_secret_value() if basic.password else None,
                      password_file=basic.password_file)
    elif url_user is not None:
        fields.update(username=url_user, password=url_password)
    if authorization is not None:
        fields.update(auth_type=authorization.type, credentials_file=authorization.credentials_file,
                      credentials=authorization.credentials.get_secret_value() if authorization.credentials else None)
    if tls is not None:
        fields.update(tls.model_dump())
    return ScrapeAuth(**fields) if fields else None  # type: ignore[arg-type]
