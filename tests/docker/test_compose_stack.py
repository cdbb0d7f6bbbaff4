"""The docker compose stack in ``docker/``, checked statically (no Docker engine runs here).

The compose file parses and its services fit together (topics, ports, mounts, provisioning); every
``streamforest`` command line in it and in the Dockerfile is one the CLI's parser accepts; every metric the
Grafana dashboard, the Prometheus rules and docs/kafka.md name is one a worker exports, and the dashboard shows
every documented metric.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from streamforest.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
IMAGE = "streamforest:dev"
CONTRACT_TOPICS = {  # suffix after the prefix -> cleanup.policy
    "predictions": "compact", "encodings": "compact", "feedback": "delete", "errors": "delete", "state": "compact",
}

_VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def _interpolate(value):
    """Compose's ``${NAME:-default}``; a variable without a default would make ``docker compose up`` depend on
    the caller's environment, so it is an error here."""
    if isinstance(value, dict):
        return {k: _interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v) for v in value]
    if not isinstance(value, str):
        return value

    def default(m: re.Match) -> str:
        if m.group(2) is None:
            raise AssertionError(f"${{{m.group(1)}}} has no default in docker/compose.yaml")
        return m.group(2)

    return _VAR.sub(default, value).replace("$$", "$")


def compose() -> dict:
    return _interpolate(yaml.safe_load((DOCKER / "compose.yaml").read_text()))


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a shell line: split at pipes, ``&&``, ``;``, braces; redirections dropped."""
    lex = shlex.shlex(script, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    commands: list[list[str]] = []
    current: list[str] = []
    tokens = iter(lex)
    for tok in tokens:
        if tok in {"{", "}"} or set(tok) <= set("|&;()"):
            if current:
                commands.append(current)
            current = []
        elif set(tok) <= set("<>"):
            next(tokens, None)  # the redirection's target
        else:
            current.append(tok)
    if current:
        commands.append(current)
    return commands


def service_commands(service: dict) -> list[list[str]]:
    command = service.get("command") or []
    if isinstance(command, str):
        return shell_commands(command)
    if command and Path(command[0]).name in {"sh", "bash"}:
        return shell_commands(command[-1])
    return [list(command)] if command else []


def dockerfile_commands() -> list[list[str]]:
    text = (DOCKER / "Dockerfile").read_text().replace("\\\n", " ")
    runs = [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("RUN ")]
    return [c for run in runs for c in shell_commands(run)]


def streamforest_argvs() -> list[tuple[str, list[str]]]:
    """Every ``streamforest ...`` invocation of the stack, as (where, argv after the program name)."""
    out = []
    for name, service in compose()["services"].items():
        for cmd in service_commands(service):
            if cmd[0] == "streamforest":
                out.append((name, cmd[1:]))
    out += [("Dockerfile", cmd[1:]) for cmd in dockerfile_commands() if cmd[0] == "streamforest"]
    return out


def option(argv: list[str], name: str) -> str:
    """The value of ``--name`` in an argv (``--name=v`` or ``--name v``)."""
    for i, tok in enumerate(argv):
        if tok == name:
            return argv[i + 1]
        if tok.startswith(name + "="):
            return tok.split("=", 1)[1]
    raise AssertionError(f"{name} not given in {argv}")


def worker_argv() -> list[str]:
    return next(argv for where, argv in streamforest_argvs() if where == "worker" and argv[:2] == ["kafka", "run"])


# ----------------------------------------------------------------------------- the compose file


def test_compose_file_parses_into_the_stack():
    doc = compose()
    services = doc["services"]
    assert set(services) == {"kafka", "topic-init", "worker", "producer", "prometheus", "grafana"}
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert "controller" in kafka["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft: no ZooKeeper
    assert "zookeeper" not in (DOCKER / "compose.yaml").read_text().lower()
    assert services["worker"]["deploy"]["replicas"] == 2
    for name in ("worker", "producer"):
        build = services[name]["build"]
        assert services[name]["image"] == IMAGE
        assert (DOCKER / build["context"] / build["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    for name in ("worker", "producer"):
        assert services[name]["depends_on"]["topic-init"]["condition"] == "service_completed_successfully"
    assert services["topic-init"]["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_every_bind_mount_exists():
    for name, service in compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DOCKER / source).exists(), f"{name}: mounts {source}, which does not exist"
            else:
                assert source in compose()["volumes"], f"{name}: named volume {source} is not declared"


def test_interpolation_requires_defaults():
    assert _interpolate({"a": ["${X:-4}", "$$HOME"]}) == {"a": ["4", "$HOME"]}
    with pytest.raises(AssertionError, match="no default"):
        _interpolate("${X}")


def test_shell_commands_split_pipes_and_groups():
    script = "{ streamforest produce A --x 1 && streamforest produce B ; } | streamforest kafka produce - > /dev/null"
    assert shell_commands(script) == [["streamforest", "produce", "A", "--x", "1"], ["streamforest", "produce", "B"],
                                      ["streamforest", "kafka", "produce", "-"]]


# ----------------------------------------------------------------------------- commands the CLI accepts


def test_the_stack_runs_streamforest_where_it_should():
    where = [w for w, _ in streamforest_argvs()]
    assert {"worker", "producer", "Dockerfile"} <= set(where)
    argvs = [argv[:2] for _, argv in streamforest_argvs()]
    assert ["kafka", "run"] in argvs and ["kafka", "produce"] in argvs


@pytest.mark.parametrize(("where", "argv"), streamforest_argvs(),
                         ids=[f"{w}:{' '.join(a[:2])}:{i}" for i, (w, a) in enumerate(streamforest_argvs())])
def test_command_is_accepted_by_the_cli(where, argv, capsys):
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: `streamforest {' '.join(argv)}` is refused by the CLI: {capsys.readouterr().err}")
    assert callable(args.func)


def test_producer_streams_bundled_datasets_that_exist():
    from streamforest.datasets import bundled_dir, read_manifest

    names = {row["name"] for row in read_manifest(bundled_dir())}
    produced = [argv[1] for where, argv in streamforest_argvs() if argv[0] == "produce"]
    assert produced and set(produced) <= names


# ----------------------------------------------------------------------------- topics


def _created_topics() -> tuple[dict[str, str], dict[str, str]]:
    """The topics docker/create-topics.sh creates, with the topic-init service's environment, -> cleanup.policy."""
    script = (DOCKER / "create-topics.sh").read_text().replace("\\\n", " ")
    env = dict(re.findall(r'^(\w+)="\$\{\w+:-([^}]*)\}"', script, flags=re.M))
    env.update({k: str(v) for k, v in compose()["services"]["topic-init"]["environment"].items()})
    topics = {}
    for line in script.splitlines():
        cmd = shell_commands(line)
        if cmd and cmd[0][0] == "create" and len(cmd[0]) > 2:  # not the function definition
            name = re.sub(r"\$(\w+)", lambda m: env[m.group(1)], cmd[0][1])
            topics[name] = cmd[0][2]
    return topics, env


def test_topic_init_creates_the_contract_topics():
    topics, env = _created_topics()
    worker = worker_argv()
    prefix, input_topic = option(worker, "--topic-prefix"), option(worker, "--input-topic")
    expected = {f"{prefix}.{suffix}": policy for suffix, policy in CONTRACT_TOPICS.items()}
    expected[input_topic] = "delete"
    assert topics == expected
    assert int(env["PARTITIONS"]) >= 2, "two workers need at least two partitions to share"
    producer_topics = {option(argv, "--topic") for _, argv in streamforest_argvs() if argv[:2] == ["kafka", "produce"]}
    assert producer_topics == {input_topic}


def test_bootstrap_servers_point_at_the_broker():
    listeners = compose()["services"]["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    internal = re.search(r"PLAINTEXT://([\w.-]+:\d+)", listeners).group(1)
    assert internal == "kafka:9092"
    for where, argv in streamforest_argvs():
        if argv[0] == "kafka":
            assert option(argv, "--bootstrap-servers") == internal, where
    assert _created_topics()[1]["BOOTSTRAP_SERVERS"] == internal


# ----------------------------------------------------------------------------- Prometheus and Grafana


def prometheus_config() -> dict:
    return yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())


def test_prometheus_scrapes_every_worker_replica():
    worker = worker_argv()
    (job,) = prometheus_config()["scrape_configs"]
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == ["worker"] and sd["type"] == "A"
    assert sd["port"] == int(option(worker, "--metrics-port"))
    assert option(worker, "--metrics-host") == "0.0.0.0"  # reachable from the prometheus container
    mount = next(v for v in compose()["services"]["prometheus"]["volumes"] if v.startswith("./prometheus:"))
    target = mount.split(":")[1]
    for rule_file in prometheus_config()["rule_files"]:
        assert rule_file.startswith(target + "/")
        assert (DOCKER / "prometheus" / rule_file[len(target) + 1:]).exists()


def test_grafana_provisions_the_datasource_and_the_dashboard():
    grafana = compose()["services"]["grafana"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"])
    provisioning = DOCKER / next(src for src, dst in mounts.items() if dst == "/etc/grafana/provisioning")
    (ds,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"]
    assert ds["url"] == "http://prometheus:9090" and "9090:9090" in compose()["services"]["prometheus"]["ports"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "streamforest.yaml").read_text())["providers"]
    dashboards = DOCKER / next(src for src, dst in mounts.items() if dst == provider["options"]["path"])
    dashboard = json.loads((dashboards / "streamforest.json").read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels
    for p in panels:
        assert p["datasource"]["uid"] == ds["uid"], p["title"]
        assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]


# ----------------------------------------------------------------------------- metric names

_PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                    "offset", "inf", "nan"}


def promql_metrics(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords, labels and ranges left out)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][\w:]*", expr):
        if expr[m.end():].lstrip().startswith("(") or m.group().lower() in _PROMQL_KEYWORDS:
            continue
        names.add(m.group())
    return names


def test_promql_metrics_finds_metric_names_only():
    expr = ('histogram_quantile(0.95, sum by (le, kind) (rate(a_seconds_bucket{kind="x"}[$__rate_interval]))) '
            '/ on (kind) group_left sum(b_total) > bool 2 or vector(0) unless c')
    assert promql_metrics(expr) == {"a_seconds_bucket", "b_total", "c"}


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((DOCKER / "grafana" / "dashboards" / "streamforest.json").read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def prometheus_exprs() -> list[str]:
    exprs = []
    for rule_file in prometheus_config()["rule_files"]:
        rules = yaml.safe_load((DOCKER / "prometheus" / Path(rule_file).name).read_text())
        exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    for job in prometheus_config()["scrape_configs"]:
        for relabel in job.get("metric_relabel_configs", []):
            assert relabel["regex"].startswith("streamforest_")  # only the worker's own series are kept
    return exprs


def family(series: str) -> str:
    return re.sub(r"_(bucket|sum|count)$", "", series)


def documented_metrics() -> set[str]:
    """The metric names of docs/kafka.md's metrics table (first column)."""
    text = (REPO / "docs" / "kafka.md").read_text()
    return set(re.findall(r"^\| `(streamforest_\w+)", text, flags=re.M))


def test_dashboard_shows_every_documented_metric_and_no_other():
    used = {family(n) for e in dashboard_exprs() for n in promql_metrics(e)}
    documented = documented_metrics()
    assert len(documented) >= 20
    assert used == documented


def exported_series() -> set[str]:
    """The series names a worker process serves: the engine's and the Kafka worker's metrics on one registry."""
    from prometheus_client import CollectorRegistry

    from streamforest.connectors.kafka.metrics import WorkerMetrics
    from streamforest.engine.metrics import EngineMetrics

    registry = CollectorRegistry()
    EngineMetrics(registry)
    WorkerMetrics(registry)
    names = set()
    for metric in registry.collect():
        if metric.type == "counter":
            names.add(metric.name + "_total")
        elif metric.type == "histogram":
            names |= {metric.name + suffix for suffix in ("_bucket", "_sum", "_count")}
        elif metric.type == "summary":
            names |= {metric.name, metric.name + "_sum", metric.name + "_count"}
        else:
            names.add(metric.name)
    return names


def test_every_metric_the_dashboard_and_prometheus_name_is_exported():
    used = {n for e in dashboard_exprs() + prometheus_exprs() for n in promql_metrics(e)}
    exported = exported_series()
    assert used - exported == set()
    assert {family(n) for n in exported} >= documented_metrics()
