"""The monitoring of ``docker/`` against real parts: a Prometheus server (Debian's ``prometheus`` package) scrapes a
worker running on a noida-db broker with ``docker/prometheus``'s scrape settings (the compose service's DNS
discovery replaced by the worker's 127.0.0.1 address), loads its alert rules, and answers every query of the
Grafana dashboard with data. A panel whose query returns nothing is a defect of the metric or of the query.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import orjson
import pytest
import yaml

from streamforest.connectors.kafka.testing import wait_committed
from streamforest.engine.produce import produce_messages

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "connectors" / "kafka"))
from kafka_harness import Broker, WorkerProcess, create_topics, produce

DOCKER = Path(__file__).resolve().parents[2] / "docker"
INSTALL = "apt-get install -y prometheus (Debian's package; .ci/run installs it where missing)"
#: Grafana's ``$__rate_interval`` for a range short enough to ask for the finest steps: four scrape intervals.
RATE_INTERVAL_SCRAPES = 4

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def scrape_config(worker_port: int, rules: Path) -> tuple[dict, float]:
    """``docker/prometheus/prometheus.yml`` with the worker at ``127.0.0.1:worker_port`` and the rule files read
    from ``rules``; and its scrape interval in seconds."""
    config = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    for job in config["scrape_configs"]:
        (sd,) = job.pop("dns_sd_configs")
        assert sd["port"] > 0
        job["static_configs"] = [{"targets": [f"127.0.0.1:{worker_port}"]}]
    config["rule_files"] = [str(rules / Path(f).name) for f in config["rule_files"]]
    interval = config["global"]["scrape_interval"]
    assert interval.endswith("s") and interval[:-1].isdigit(), interval
    return config, float(interval[:-1])


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every dashboard in ``docker/grafana/dashboards``."""
    queries = []
    for path in sorted((DOCKER / "grafana" / "dashboards").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            queries += [(panel["title"], t["expr"]) for t in panel.get("targets", [])]
    return queries


class Prometheus:
    """A Prometheus server on a free 127.0.0.1 port with a configuration file, its data in ``directory``."""

    def __init__(self, config: dict, directory: Path) -> None:
        exe = shutil.which("prometheus")
        if exe is None:
            pytest.fail(f"prometheus is not installed: {INSTALL}")
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{_free_port()}"
        self.log = open(directory / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [exe, f"--config.file={directory / 'prometheus.yml'}", f"--storage.tsdb.path={directory / 'data'}",
             f"--web.listen-address={self.url.removeprefix('http://')}"], stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, f"prometheus exited: {self.text_log()}"
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            assert time.monotonic() < deadline, f"prometheus not ready in 30 s: {self.text_log()}"
            time.sleep(0.2)

    def text_log(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()[-3000:]

    def api(self, path: str, **params: str) -> dict:
        answer = _get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        assert answer["status"] == "success", answer
        return answer["data"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def test_every_dashboard_query_returns_data_from_a_real_prometheus(tmp_path):
    broker = Broker(tmp_path / "noida" / "data")
    (tmp_path / "noida").mkdir()
    broker.start()
    metrics_port = _free_port()
    config, interval = scrape_config(metrics_port, DOCKER / "prometheus")
    prometheus = Prometheus(config, tmp_path)
    worker = None
    try:
        prefix = "mon"
        topic = create_topics(broker.bootstrap, prefix)
        worker = WorkerProcess(broker.bootstrap, prefix, "--metrics-port", str(metrics_port),
                               "--commit-interval", "0.5")
        # Records are produced once Prometheus has scraped the worker: the rates then see them arrive.
        deadline = time.monotonic() + 120
        while not prometheus.api("query", query='up == 1')["result"]:
            assert worker.proc.poll() is None, worker.log()
            assert time.monotonic() < deadline, f"the worker was never scraped: {prometheus.text_log()}"
            time.sleep(0.5)
        started = time.time()
        msgs, _, _ = produce_messages("banknote-authentication", "target", "bank", seed=0)
        lines = [orjson.dumps(m) for m in msgs]
        lines.insert(2, b'{"v": 1, "type": "feature", "stream": "bank", "name": 7}')  # a dead letter
        produce(broker.bootstrap, topic, lines)

        def alive() -> None:
            assert worker.proc.poll() is None, f"the worker exited:\n{worker.log()}"

        wait_committed(broker.bootstrap, prefix, topic, timeout=120, check=alive)
        # Two more scrapes: the last records, and the state snapshot written once the partition is quiet.
        time.sleep(3 * interval)
        rules = prometheus.api("rules")["groups"]
        assert rules and all(r["health"] == "ok" for g in rules for r in g["rules"]), rules
        rate_interval = f"{int(RATE_INTERVAL_SCRAPES * interval)}s"
        empty, flat = [], []
        for title, expr in dashboard_queries():
            query = expr.replace("$__rate_interval", rate_interval)
            result = prometheus.api("query_range", query=query, start=f"{started - interval:.3f}",
                                    end=f"{time.time():.3f}", step=f"{interval:g}")["result"]
            values = [float(v) for series in result for _, v in series["values"]]
            if not any(v == v for v in values):  # no series, or only NaN (a quantile of nothing)
                empty.append(f"{title}: {expr}")
            elif "records_in" in expr or "records_out" in expr or "records_produced" in expr:
                if not any(v > 0 for v in values):
                    flat.append(f"{title}: {expr}")
        assert not empty, "dashboard queries with no data:\n" + "\n".join(empty)
        assert not flat, "record rates that stayed 0 while records flowed:\n" + "\n".join(flat)
    finally:
        if worker is not None:
            worker.kill()
        prometheus.stop()
        broker.stop()
