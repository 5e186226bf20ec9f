"""`caldera webhook` settings and start-up errors."""

from __future__ import annotations

import pytest

from caldera.settings import WEBHOOK_PATHS, SettingsError, WebhookSettings, parse_settings
from cli.main import main


def test_defaults() -> None:
    """Every path on, Volcano's scheduler name, 5 MiB bodies, no leader election."""
    settings = parse_settings(WebhookSettings, {}, {})
    assert settings.enabled_admission == WEBHOOK_PATHS
    assert settings.scheduler_names == ("volcano",)
    assert settings.client_max_size == 5 * 1024 * 1024
    assert settings.leader_elect is False


def test_flags_and_environment() -> None:
    """Comma-separated scheduler names and paths, from flags or CALDERA_* variables."""
    settings = parse_settings(
        WebhookSettings,
        {"scheduler_name": "caldera, volcano", "enabled_admission": "/jobs/validate"},
        {"CALDERA_PORT": "9443"},
    )
    assert settings.scheduler_names == ("caldera", "volcano")
    assert settings.enabled_admission == ("/jobs/validate",)
    assert settings.port == 9443


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"enabled_admission": "/jobs/explode"}, "unknown admission path /jobs/explode"),
        ({"scheduler_name": " , "}, "scheduler_name must name at least one scheduler"),
        ({"port": "70000"}, "port 70000 is not a TCP port"),
        ({"client_max_size": "10"}, "client_max_size must be at least 65536 bytes"),
    ],
)
def test_bad_settings(values: dict[str, str], message: str) -> None:
    """A bad setting stops the process with one line naming it."""
    with pytest.raises(SettingsError, match=message):
        parse_settings(WebhookSettings, values, {})


def test_missing_certificate_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A missing certificate ends the process with exit code 1 and one line, before connecting."""
    code = main(["webhook", "--tls-cert-file=/nonexistent/tls.crt", "--log-format=json"])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("caldera: error: cannot load the serving certificate")
