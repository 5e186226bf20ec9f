"""Tests of caldera.settings: where each value comes from (flag, environment, default), how strings
become typed values, the validation errors and their messages, and the command-line entry."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TypeVar

import pytest

from caldera.settings import (
    KNOWN_CONTROLLERS,
    WEBHOOK_PATHS,
    ControllersSettings,
    ProcessSettings,
    SchedulerSettings,
    SettingsError,
    WebhookSettings,
    add_arguments,
    from_command_line,
    parse_settings,
    split_names,
)

NO_ENV: dict[str, str] = {}
S = TypeVar("S", bound=ProcessSettings)


# --- precedence ---------------------------------------------------------------------------------


def test_defaults_when_nothing_is_given() -> None:
    """With no flag and no environment variable every field keeps its documented default."""
    settings = parse_settings(ControllersSettings, {}, NO_ENV)
    assert settings == ControllersSettings()
    assert settings.kube_qps == 50.0
    assert settings.workers == 5
    assert settings.controllers == ()
    assert settings.kubeconfig is None
    assert settings.leader_elect is True


def test_environment_overrides_the_default() -> None:
    """CALDERA_<FIELD> sets a field the flags leave out."""
    env = {"CALDERA_KUBE_QPS": "7.5", "CALDERA_WORKERS": "9"}
    settings = parse_settings(ControllersSettings, {}, env)
    assert settings.kube_qps == 7.5
    assert settings.workers == 9


def test_flag_overrides_the_environment() -> None:
    """A flag wins over the environment variable of the same field, which is then ignored."""
    env = {"CALDERA_KUBE_QPS": "7.5", "CALDERA_LOG_LEVEL": "debug"}
    settings = parse_settings(ControllersSettings, {"kube_qps": "3", "log_level": None}, env)
    assert settings.kube_qps == 3.0
    # A flag that was not given (None, as argparse leaves it) falls through to the environment.
    assert settings.log_level == "debug"


def test_argparse_namespace_is_accepted() -> None:
    """parse_settings takes argparse's Namespace as well as a mapping."""
    args = argparse.Namespace(workers="2", scheduler_name=None)
    settings = parse_settings(ControllersSettings, args, {"CALDERA_SCHEDULER_NAME": "caldera"})
    assert settings.workers == 2
    assert settings.scheduler_name == "caldera"


def test_non_string_values_are_taken_as_they_are() -> None:
    """Values given already typed (from code, not from a command line) are not converted."""
    settings = parse_settings(ControllersSettings, {"workers": 4, "leader_elect": False}, NO_ENV)
    assert settings.workers == 4
    assert settings.leader_elect is False


def test_environment_without_the_prefix_is_ignored() -> None:
    """Only CALDERA_-prefixed variables are read: KUBE_QPS or caldera_kube_qps change nothing."""
    env = {"KUBE_QPS": "1", "caldera_kube_qps": "1", "CALDERA_UNKNOWN_THING": "x"}
    assert parse_settings(ProcessSettings, {}, env) == ProcessSettings()


# --- type conversion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True),
        ("true", True),
        ("TRUE", True),
        (" Yes ", True),
        ("on", True),
        ("0", False),
        ("false", False),
        ("False", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_boolean_strings(raw: str, expected: bool) -> None:
    """Booleans accept 1/0, true/false, yes/no, on/off in any case and with spaces around."""
    settings = parse_settings(ProcessSettings, {}, {"CALDERA_LEADER_ELECT": raw})
    assert settings.leader_elect is expected


@pytest.mark.parametrize("raw", ["maybe", "", "2", "t"])
def test_invalid_boolean_names_the_setting_and_the_accepted_values(raw: str) -> None:
    """Anything else is an error naming the field, the value and what a boolean looks like."""
    with pytest.raises(SettingsError) as info:
        parse_settings(ProcessSettings, {"leader_elect": raw}, NO_ENV)
    message = str(info.value)
    assert "leader_elect" in message
    assert repr(raw) in message
    assert "true or false" in message


def test_numbers_are_converted_to_the_field_type() -> None:
    """Float fields take decimals, int fields whole numbers; both become real numbers."""
    settings = parse_settings(
        ControllersSettings,
        {"lease_duration": "20.5", "kube_burst": "250", "metrics_port": "0"},
        NO_ENV,
    )
    assert settings.lease_duration == 20.5
    assert isinstance(settings.lease_duration, float)
    assert settings.kube_burst == 250
    assert isinstance(settings.kube_burst, int)
    assert settings.metrics_port == 0


@pytest.mark.parametrize(
    ("field", "raw", "type_name"),
    [
        ("kube_burst", "1.5", "int"),
        ("workers", "many", "int"),
        ("kube_qps", "fast", "float"),
        ("metrics_port", "", "int"),
    ],
)
def test_unparseable_number_names_the_setting_and_the_type(
    field: str, raw: str, type_name: str
) -> None:
    """A number that does not parse is a SettingsError naming the field, value and type."""
    with pytest.raises(SettingsError) as info:
        parse_settings(ControllersSettings, {field: raw}, NO_ENV)
    assert str(info.value) == f"{field}: {raw!r} is not a valid {type_name}"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("job,queue", ("job", "queue")),
        (" job , gc ", ("job", "gc")),
        ("job,,queue,", ("job", "queue")),
        ("gc", ("gc",)),
        ("", ()),
        (" , ", ()),
    ],
)
def test_tuples_come_from_comma_separated_lists(raw: str, expected: tuple[str, ...]) -> None:
    """A tuple field splits on commas, strips spaces and drops empty items."""
    settings = parse_settings(ControllersSettings, {}, {"CALDERA_CONTROLLERS": raw})
    assert settings.controllers == expected


def test_optional_string_is_none_when_empty() -> None:
    """An optional string given as "" means unset (None); any other value is kept."""
    assert parse_settings(ProcessSettings, {}, {"CALDERA_KUBECONFIG": ""}).kubeconfig is None
    given = parse_settings(ProcessSettings, {"context": "kind-e2e"}, {"CALDERA_KUBECONFIG": "/k"})
    assert given.kubeconfig == "/k"
    assert given.context == "kind-e2e"


def test_plain_strings_are_kept_verbatim() -> None:
    """A plain string field is not stripped or lowered: the value is the user's."""
    settings = parse_settings(ControllersSettings, {"leader_election_id": " My-Lease "}, NO_ENV)
    assert settings.leader_election_id == " My-Lease "


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("volcano", ("volcano",)),
        ("volcano,caldera", ("volcano", "caldera")),
        (" volcano , , caldera ,", ("volcano", "caldera")),
    ],
)
@pytest.mark.parametrize("cls", [ControllersSettings, WebhookSettings])
def test_scheduler_name_is_a_comma_separated_list(
    cls: type[ControllersSettings | WebhookSettings], raw: str, names: tuple[str, ...]
) -> None:
    """scheduler_name takes several names like Volcano's --scheduler-name; scheduler_names
    lists them in order without blanks (the first is the default for pods that name none)."""
    assert parse_settings(cls, {"scheduler_name": raw}, NO_ENV).scheduler_names == names


# --- validation ---------------------------------------------------------------------------------


def test_the_defaults_are_valid() -> None:
    """The defaults of both settings classes pass their own validation."""
    ProcessSettings().validate()
    ControllersSettings().validate()


@pytest.mark.parametrize(
    ("given", "names", "advice"),
    [
        ({"kube_qps": "0"}, ["kube_qps"], "must be a number > 0"),
        ({"kube_qps": "-1"}, ["kube_qps"], "must be a number > 0"),
        ({"kube_qps": "nan"}, ["kube_qps"], "must be a number > 0"),
        ({"pvc_create_qps": "0"}, ["pvc_create_qps"], "must be a number > 0"),
        ({"resync_period": "-1"}, ["resync_period"], "0 (off) or more"),
        ({"shutdown_grace_period": "-5"}, ["shutdown_grace_period"], "0 or more"),
        ({"startup_timeout": "-1"}, ["startup_timeout"], "0 or more"),
        ({"kube_burst": "0"}, ["kube_burst"], ">= 1"),
        ({"metrics_port": "65536"}, ["metrics_port", "65536"], "is not a TCP port"),
        ({"metrics_port": "-1"}, ["metrics_port", "-1"], "is not a TCP port"),
        ({"log_format": "xml"}, ["log_format", "'xml'"], "use json, console or auto"),
        ({"log_level": "verbose"}, ["log_level", "'verbose'"], "debug, info, warning or error"),
        (
            {"retry_period": "10"},
            ["retry_period", "renew_deadline", "lease_duration"],
            "retry_period < renew_deadline < lease_duration",
        ),
        (
            {"renew_deadline": "15"},
            ["renew_deadline", "lease_duration"],
            "(got 2.0, 15.0, 15.0)",
        ),
        (
            {"lease_duration": "5"},
            ["lease_duration"],
            "retry_period < renew_deadline < lease_duration",
        ),
        ({"workers": "0"}, ["workers"], "at least 1"),
        ({"scheduler_name": " , "}, ["scheduler_name"], "at least one scheduler"),
        (
            {"controllers": "job,cron,bogus"},
            ["cron, bogus"],
            "choose from " + ",".join(KNOWN_CONTROLLERS),
        ),
    ],
)
def test_validation_error_names_the_setting_and_what_to_do(
    given: dict[str, str], names: list[str], advice: str
) -> None:
    """Each invalid value is a SettingsError (a ValueError) whose message names the setting
    (and the bad value where there is one) and says what would be accepted."""
    with pytest.raises(SettingsError) as info:
        parse_settings(ControllersSettings, given, NO_ENV)
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    for name in names:
        assert name in message
    assert advice in message


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"port": "70000"}, "port 70000 is not a TCP port"),
        (
            {"enabled_admission": "/jobs/mutate,/jobs/nope"},
            "unknown admission path /jobs/nope: choose from " + ",".join(WEBHOOK_PATHS),
        ),
        ({"scheduler_name": ","}, "scheduler_name must name at least one scheduler"),
        ({"client_max_size": "65535"}, "client_max_size must be at least 65536 bytes"),
        ({"max_queue_depth": "0"}, "max_queue_depth must be at least 1"),
        ({"max_connections": "0"}, "max_connections must be at least 1"),
        ({"max_large_in_flight": "0"}, "max_large_in_flight must be at least 1"),
        ({"header_timeout": "0"}, "header_timeout must be a number of seconds > 0"),
        ({"shutdown_delay": "-1"}, "shutdown_delay must be 0 or more seconds"),
        (
            {"cert_reload_interval": "0"},
            "cert_reload_interval and cache_sync_timeout must be > 0",
        ),
        (
            {"cache_sync_timeout": "-1"},
            "cert_reload_interval and cache_sync_timeout must be > 0",
        ),
        ({"log_format": "xml"}, "log_format 'xml': use json, console or auto"),
    ],
)
def test_webhook_validation_errors(given: dict[str, str], message: str) -> None:
    """WebhookSettings adds its own checks to the common ones, each naming the setting."""
    with pytest.raises(SettingsError) as info:
        parse_settings(WebhookSettings, given, NO_ENV)
    assert str(info.value) == message


def test_webhook_defaults() -> None:
    """The webhook serves every admission path by default, needs no leader election, and
    accepts reviews up to 5 MiB (the API server's 3 MiB body plus a stored old object)."""
    settings = parse_settings(WebhookSettings, {}, NO_ENV)
    assert settings.enabled_admission == WEBHOOK_PATHS
    assert settings.leader_elect is False
    assert settings.client_max_size == 5 * 1024 * 1024
    subset = parse_settings(WebhookSettings, {"enabled_admission": "/pods/validate"}, NO_ENV)
    assert subset.enabled_admission == ("/pods/validate",)


@pytest.mark.parametrize("level", ["DEBUG", "Info", "warning", "ERROR"])
def test_log_level_is_case_insensitive(level: str) -> None:
    """log_level accepts the four levels in any case (configure_logging upper-cases it)."""
    assert parse_settings(ProcessSettings, {"log_level": level}, NO_ENV).log_level == level


@pytest.mark.parametrize("fmt", ["auto", "json", "console"])
def test_log_formats(fmt: str) -> None:
    """The three log formats are accepted."""
    assert parse_settings(ProcessSettings, {"log_format": fmt}, NO_ENV).log_format == fmt


def test_every_known_controller_is_accepted() -> None:
    """The full list of known controllers validates, in any order."""
    raw = ",".join(reversed(KNOWN_CONTROLLERS))
    settings = parse_settings(ControllersSettings, {"controllers": raw}, NO_ENV)
    assert set(settings.controllers) == set(KNOWN_CONTROLLERS)


def test_validation_also_applies_to_environment_values() -> None:
    """A bad value from the environment is rejected just like a bad flag."""
    with pytest.raises(SettingsError, match="workers must be at least 1"):
        parse_settings(ControllersSettings, {}, {"CALDERA_WORKERS": "0"})


def test_settings_are_frozen() -> None:
    """Settings cannot be changed after parsing (they are shared by every component)."""
    settings = ProcessSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.kube_qps = 1.0  # type: ignore[misc]


# --- the command line ---------------------------------------------------------------------------


def test_from_command_line_reads_flags_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flags use dashes (--kube-qps); the process environment fills what the flags leave out."""
    monkeypatch.setenv("CALDERA_WORKERS", "3")
    monkeypatch.setenv("CALDERA_KUBE_QPS", "99")
    settings = from_command_line(
        ControllersSettings,
        [
            "--kube-qps",
            "12.5",
            "--controllers=job,gc",
            "--leader-elect=false",
            "--metrics-port",
            "9090",
        ],
        "caldera controllers",
    )
    assert settings.kube_qps == 12.5
    assert settings.controllers == ("job", "gc")
    assert settings.leader_elect is False
    assert settings.metrics_port == 9090
    assert settings.workers == 3


def test_from_command_line_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line path raises the same SettingsError for an invalid combination."""
    monkeypatch.delenv("CALDERA_RENEW_DEADLINE", raising=False)
    with pytest.raises(SettingsError, match="retry_period < renew_deadline"):
        from_command_line(ProcessSettings, ["--retry-period", "20"], "caldera")


def test_from_command_line_rejects_unknown_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown flag is argparse's usage error (exit status 2), naming the flag."""
    with pytest.raises(SystemExit) as info:
        from_command_line(ProcessSettings, ["--no-such-flag", "1"], "caldera")
    assert info.value.code == 2
    assert "--no-such-flag" in capsys.readouterr().err


def test_help_shows_each_flag_with_its_environment_variable_and_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--help lists every field as a flag, with its help text, its variable and its default."""
    with pytest.raises(SystemExit) as info:
        from_command_line(ControllersSettings, ["--help"], "caldera controllers")
    assert info.value.code == 0
    # argparse wraps lines; compare with the whitespace collapsed.
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: caldera controllers")
    for f in dataclasses.fields(ControllersSettings):
        assert "--" + f.name.replace("_", "-") in out
        assert "CALDERA_" + f.name.upper() in out
    assert "default 50.0" in out
    assert "default 'job,queue'" not in out  # the controllers default is empty, shown as ''
    assert "env CALDERA_CONTROLLERS; default ''" in out


def test_add_arguments_leaves_unset_flags_none() -> None:
    """Every flag defaults to None so that parse_settings can tell "not given" from a value."""
    parser = argparse.ArgumentParser()
    add_arguments(parser, ControllersSettings)
    namespace: dict[str, Any] = vars(parser.parse_args([]))
    assert set(namespace) == {f.name for f in dataclasses.fields(ControllersSettings)}
    assert all(value is None for value in namespace.values())


# --- Volcano's flag forms -----------------------------------------------------------------------


def _command_line(cls: type[S], argv: list[str], monkeypatch: pytest.MonkeyPatch) -> S:
    for f in dataclasses.fields(cls):
        monkeypatch.delenv("CALDERA_" + f.name.upper(), raising=False)
    return from_command_line(cls, argv, "caldera")


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("1", 1.0), ("0.25", 0.25), ("1s", 1.0), ("500ms", 0.5), ("1m30s", 90.0), ("1.5h", 5400.0)],
)
def test_schedule_period_takes_seconds_or_a_go_duration(
    raw: str, seconds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--schedule-period takes Caldera's seconds and Volcano's Go duration (its chart passes
    ``--schedule-period=1s``), on the command line and in the environment."""
    flag = _command_line(SchedulerSettings, [f"--schedule-period={raw}"], monkeypatch)
    assert flag.schedule_period == seconds
    env = parse_settings(SchedulerSettings, {}, {"CALDERA_SCHEDULE_PERIOD": raw})
    assert env.schedule_period == seconds


@pytest.mark.parametrize("cls", [ControllersSettings, SchedulerSettings, WebhookSettings])
def test_every_seconds_setting_takes_a_go_duration(cls: type[ProcessSettings]) -> None:
    """Every setting measured in seconds accepts a Go duration; the others do not pretend to."""
    seconds_fields = [f.name for f in dataclasses.fields(cls) if f.metadata.get("seconds")]
    assert {"lease_duration", "renew_deadline", "retry_period", "shutdown_grace_period"} <= set(
        seconds_fields
    )
    for name in seconds_fields:
        # 1h is large enough to keep retry_period < renew_deadline < lease_duration valid only
        # for lease_duration; give the three together.
        given = {"lease_duration": "1h", "renew_deadline": "50s", "retry_period": "500ms"}
        given.setdefault(name, "3s")
        settings = parse_settings(cls, given, NO_ENV)
        expected = {"lease_duration": 3600.0, "renew_deadline": 50.0, "retry_period": 0.5}
        assert getattr(settings, name) == expected.get(name, 3.0)


@pytest.mark.parametrize("raw", ["1x", "s", "fast", "1 s", ""])
def test_a_bad_duration_names_the_setting_and_both_forms(raw: str) -> None:
    """A value that is neither seconds nor a Go duration is refused with the setting's name."""
    with pytest.raises(SettingsError) as info:
        parse_settings(SchedulerSettings, {"schedule_period": raw}, NO_ENV)
    message = str(info.value)
    assert "schedule_period" in message
    assert repr(raw) in message
    assert "Go duration" in message


def test_volcano_flag_names_are_aliases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flags Volcano's chart passes set the same Caldera settings: --kube-api-qps/-burst,
    component-base's --leader-elect-* flags and the deprecated --lock-object-namespace."""
    settings = _command_line(
        SchedulerSettings,
        [
            "--kube-api-qps=300",
            "--kube-api-burst=400",
            "--leader-elect-resource-namespace=volcano-system",
            "--leader-elect-resource-name=volcano",
            "--leader-elect-lease-duration=30s",
            "--leader-elect-renew-deadline=20s",
            "--leader-elect-retry-period=4s",
            "--schedule-period=2s",
        ],
        monkeypatch,
    )
    assert (settings.kube_qps, settings.kube_burst) == (300.0, 400)
    assert settings.leader_election_namespace == "volcano-system"
    assert settings.leader_election_id == "volcano"
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (
        30.0,
        20.0,
        4.0,
    )
    old = _command_line(ControllersSettings, ["--lock-object-namespace=ops"], monkeypatch)
    assert old.leader_election_namespace == "ops"
    webhook = _command_line(
        WebhookSettings,
        ["--tls-private-key-file=/k.pem", "--enable-root-queue-protection=false"],
        monkeypatch,
    )
    assert webhook.tls_key_file == "/k.pem"
    assert webhook.root_queue_protection is False


def test_the_caldera_flag_and_its_volcano_alias_are_one_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given both, the later one wins, as with one flag given twice (argparse's rule)."""
    settings = _command_line(
        ControllersSettings, ["--kube-qps=10", "--kube-api-qps=20"], monkeypatch
    )
    assert settings.kube_qps == 20.0


@pytest.mark.parametrize("cls", [ControllersSettings, SchedulerSettings, WebhookSettings])
def test_scheduler_name_may_be_repeated_as_in_volcano(
    cls: type[ProcessSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Volcano's --scheduler-name is a string array given once per name; repeated flags add up
    (argparse would otherwise keep only the last), and comma lists still work."""
    settings = _command_line(
        cls, ["--scheduler-name=volcano", "--scheduler-name=batch,gpu"], monkeypatch
    )
    assert split_names(dataclasses.asdict(settings)["scheduler_name"]) == (
        "volcano",
        "batch",
        "gpu",
    )


def test_volcano_flags_caldera_does_not_have_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Flags without a Caldera meaning (--enable-metrics: metrics are always served) are a
    usage error naming the flag, not silently ignored."""
    with pytest.raises(SystemExit) as info:
        from_command_line(SchedulerSettings, ["--enable-metrics=true"], "caldera scheduler")
    assert info.value.code == 2
    assert "--enable-metrics" in capsys.readouterr().err


def test_help_names_the_volcano_aliases(capsys: pytest.CaptureFixture[str]) -> None:
    """--help shows each alias beside the Caldera flag and says which take a Go duration."""
    with pytest.raises(SystemExit):
        from_command_line(SchedulerSettings, ["--help"], "caldera scheduler")
    out = " ".join(capsys.readouterr().out.split())
    assert "--kube-qps KUBE_QPS, --kube-api-qps KUBE_QPS" in out
    assert "seconds or a Go duration" in out
    assert "may be repeated" in out


@pytest.mark.parametrize(
    ("raw", "chosen"),
    [
        ("", tuple(c for c in KNOWN_CONTROLLERS if c != "sharding")),  # sharding is off
        ("job,gc", ("job", "gc")),
        ("gc,job", ("job", "gc")),  # in Caldera's order
        ("*", KNOWN_CONTROLLERS),
        ("*,-sharding-controller", KNOWN_CONTROLLERS[:-1]),  # Volcano's default
        (
            "*,-job-controller,-pg-controller",
            (
                "queue",
                "command",
                "gc",
                "cronjob",
                "jobflow",
                "jobtemplate",
                "hypernode",
                "sharding",
            ),
        ),
        ("sharding-controller", ("sharding",)),
        ("jobflow-controller,jobtemplate-controller", ("jobflow", "jobtemplate")),
        ("job-controller,queue-controller,cronjob-controller", ("job", "queue", "cronjob")),
        ("job,-hyperNode-controller", ("job",)),
    ],
)
def test_controllers_in_volcanos_form(raw: str, chosen: tuple[str, ...]) -> None:
    """--controllers takes Caldera's names and Volcano's form: '*', -name, and Volcano's
    controller names; leaving out a controller only Volcano has is fine."""
    settings = parse_settings(ControllersSettings, {"controllers": raw}, NO_ENV)
    assert settings.chosen_controllers == chosen


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("colocation-config-controller", "unknown controller colocation-config-controller"),
        ("*,-nope", "unknown controller -nope"),
        ("-job-controller", "leaves no controller to run"),
    ],
)
def test_controllers_volcano_form_errors(raw: str, message: str) -> None:
    """A controller Caldera lacks, a misspelt name, or a list that leaves nothing to run (as
    in Volcano, -name alone starts from no controller) is refused with the reason."""
    with pytest.raises(SettingsError, match=message):
        parse_settings(ControllersSettings, {"controllers": raw}, NO_ENV)
