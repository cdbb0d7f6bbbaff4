"""The propositionalization loop's transport over Kafka: its messages to a worker's input topic, the worker's
records back from the output topics.

:class:`KafkaTransport` is the third transport of :class:`~streamforest.relational.drivers.EngineClient` (beside
the in-process engine and ``streamforest run`` over JSON lines): the same ``send``/``receive``/``close``, so the
loop runs the same code whatever carries its messages. The engine is a ``streamforest kafka run`` worker started
separately (:func:`worker_command` says with which options it gives the in-process driver's results).

A run shares the topics with other runs and with whatever else the worker serves, so a transport

* names its streams ``<run_id>:<stream>`` on the wire (``run_id`` unique per run; a random one by default) and
  gives the loop back its own names: the loop's outputs are those of the in-process driver;
* reads the output topics (``read_committed``) from their ends at the time it opened, and keeps only the records
  of the streams it sent messages for (feedback and predictions by their ``stream`` field, dead letters by their
  key, which is the input message's): an earlier run's records, or another run's, are never taken for its own;
* drops the streams it created and did not drop when it closes (the in-process engine and the ``streamforest run``
  child process forget them by ending; a worker keeps serving).

Large messages are cut under the producer's request limit: a ``feature`` in parts (``part``/``parts``, the
protocol's own), a ``samples`` message in several (the same thing while the stream's forest has not started,
which is when the loop declares samples).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import shlex
import uuid
from typing import Any

import orjson

from streamforest.cli_options import check_env, client_settings
from streamforest.connectors.kafka.cli import message_key
from streamforest.connectors.kafka.config import Topics, WorkerConfig
from streamforest.optional import require

log = logging.getLogger("streamforest.kafka")

#: Input messages longer than this are cut (well under the producer's ``max_request_size`` and Kafka's default
#: 1 MB ``message.max.bytes``).
MESSAGE_BYTES = 256 * 1024
#: A run id is the prefix of the run's stream ids (at most 256 characters with the loop's own name).
MAX_RUN_ID = 64


class KafkaTransport:
    """The loop's messages to a ``streamforest kafka run`` worker, its records back.

    Parameters
    ----------
    bootstrap_servers
        ``host:port[,host:port...]`` of the brokers.
    topics
        The worker's input topic and output prefix (``--input-topic``, ``--topic-prefix``).
    run_id
        Prefix of this run's stream ids on the wire (``<run_id>:<stream>``); unique per run (a random one by
        default). The records of streams this transport did not send messages for are ignored.
    client
        kafka-python settings of every client (security, SASL, SSL files: ``WorkerConfig.client``).
    timeout
        Seconds to wait for the broker to acknowledge a message.

    Examples
    --------
    A message of 757 bytes cut under 300 bytes (the real limit is :data:`MESSAGE_BYTES`), without a broker:

    >>> t = KafkaTransport.__new__(KafkaTransport)
    >>> t.prefix = "r1:"
    >>> pieces = t._wire({"v": 1, "type": "feature", "stream": "s", "name": "x", "ids": list(range(100)),
    ...                   "values": [0.5] * 100}, 300)
    >>> [(m["stream"], m["part"], m["parts"], len(m["ids"])) for m in pieces][:2]
    [('r1:s', 0, 6, 17), ('r1:s', 1, 6, 16)]
    >>> sum(len(m["values"]) for m in pieces), max(len(orjson.dumps(m)) for m in pieces) <= 300
    (100, True)
    """

    def __init__(self, bootstrap_servers: str, topics: Topics | None = None, run_id: str | None = None,
                 client: dict[str, Any] | None = None, timeout: float = 60.0) -> None:
        run_id = uuid.uuid4().hex[:12] if run_id is None else run_id
        if not isinstance(run_id, str) or not 0 < len(run_id) <= MAX_RUN_ID or ":" in run_id:
            raise ValueError(f"run_id must be 1..{MAX_RUN_ID} characters without ':', got {run_id!r}")
        require("kafka", "the relational loop over Kafka")
        from kafka import TopicPartition

        from streamforest.connectors.kafka import clients

        self.run_id = run_id
        self.prefix = f"{run_id}:"
        self.config = WorkerConfig(bootstrap_servers=bootstrap_servers, topics=topics or Topics(),
                                   client=dict(client or {}))
        self.topics = self.config.topics
        self.timeout = timeout
        #: Wire names of the streams this run sent messages for (whose records it reads), and those not dropped.
        self.streams: set[str] = set()
        self.live: list[str] = []
        self.producer: Any = None
        self.consumer = clients.reader(self.config)
        self.poller = clients.QuietPoller(self.consumer)
        try:
            self._input_partitions = self._partitions(self.topics.input)
            outputs = [self.topics.output(kind) for kind in ("feedback", "prediction", "error")]
            tps = [TopicPartition(t, p) for t in outputs for p in self._partitions(t)]
            self.consumer.assign(tps)
            # From the ends as they are now: whatever is there belongs to earlier runs.
            for tp, end in self.consumer.end_offsets(tps).items():
                self.consumer.seek(tp, end)
            self.producer = clients.producer(self.config)
        except BaseException:
            self.consumer.close()
            raise

    def _partitions(self, topic: str) -> set[int]:
        parts = self.consumer.partitions_for_topic(topic)
        if not parts:
            raise ValueError(f"topic {topic} does not exist on {self.config.bootstrap_servers}: start the worker "
                             f"first (streamforest kafka run --input-topic {self.topics.input} --topic-prefix "
                             f"{self.topics.prefix} --create-topics ...)")
        return parts

    # ------------------------------------------------------------------ Transport

    def send(self, message: dict[str, Any]) -> None:
        """Produce one message of the loop (keyed by its stream, as ``streamforest kafka produce`` keys them)."""
        from kafka.errors import KafkaError

        wire = self.prefix + message["stream"]
        if wire not in self.streams:
            self.streams.add(wire)
            self.live.append(wire)
        if message["type"] == "control" and message.get("op") == "drop" and wire in self.live:
            self.live.remove(wire)
        try:
            futures = [self.producer.send(self.topics.input, key=message_key(raw), value=raw)
                       for raw in map(orjson.dumps, self._wire(message, MESSAGE_BYTES))]
            for f in futures:
                f.get(timeout=self.timeout)
        except KafkaError as exc:
            raise RuntimeError(f"could not produce to {self.topics.input}: {exc!r}") from exc

    def receive(self, timeout: float) -> list[dict[str, Any]]:
        """This run's records committed since the last call (waits up to ``timeout`` s for some)."""
        out = []
        for recs in self.poller.poll(timeout).values():
            for r in recs:
                rec = self._record(r)
                if rec is not None:
                    out.append(rec)
        return out

    def close(self) -> None:
        """Drop the streams this run left on the worker; release the clients. A drop that cannot be sent is
        logged, not raised: the run's results are complete by then."""
        if self.producer is None:
            return
        try:
            for wire in list(self.live):
                self.send({"v": 1, "type": "control", "stream": wire[len(self.prefix):], "op": "drop"})
        except RuntimeError as exc:
            log.warning("could not drop streams %s on the worker (they stay in its state): %s", self.live, exc)
        finally:
            self.producer.close(timeout=self.timeout)
            self.consumer.close()
            self.producer = None

    def __enter__(self) -> KafkaTransport:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ wire format

    def _wire(self, message: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """The message under its wire stream name, cut in pieces of at most ``limit`` bytes where it can be."""
        msg = {**message, "stream": self.prefix + message["stream"]}
        size = len(orjson.dumps(msg))
        if size <= limit or msg["type"] not in ("feature", "samples") or msg.get("parts", 1) != 1:
            return [msg]
        field = "ids" if msg["type"] == "feature" else "samples"
        n = len(msg[field])
        k = min(n, 2 * math.ceil(size / limit))  # twice the even share: rows differ in length
        bounds = [round(i * n / k) for i in range(k + 1)]
        if msg["type"] == "feature":
            pieces = [{**msg, "ids": msg["ids"][a:b], "values": msg["values"][a:b], "part": i, "parts": k}
                      for i, (a, b) in enumerate(itertools.pairwise(bounds))]
        else:
            pieces = [{**msg, "samples": msg["samples"][a:b]} for a, b in itertools.pairwise(bounds)]
        big = max(len(orjson.dumps(p)) for p in pieces)
        if big > limit:
            raise ValueError(f"{msg['type']} message of stream {message['stream']!r} cut in {k} pieces still has "
                             f"one of {big} bytes (over {limit}): rows too uneven in length")
        return pieces

    def _record(self, r: Any) -> dict[str, Any] | None:
        """A record of the output topics as the engine made it, under the loop's stream name; None when it is not
        this run's (or a tombstone)."""
        if r.topic == self.topics.errors:
            wire = r.key.decode("utf-8", "replace") if r.key is not None else ""
            if wire not in self.streams:
                return None
            headers = {k: v.decode("utf-8", "replace") for k, v in r.headers or []}
            stream = wire[len(self.prefix):]
            return {"v": 1, "type": "error", "key": stream, "stream": stream,
                    "source": f"{headers.get('__streams.errors.topic')}:{headers.get('__streams.errors.partition')}:"
                              f"{headers.get('__streams.errors.offset')}",
                    "reason": headers.get("__streams.errors.message", "(no reason given)")}
        if r.value is None:
            return None  # the tombstone of a dropped stream's sample
        try:
            rec = orjson.loads(r.value)
        except orjson.JSONDecodeError:
            return None  # not a worker's record: nobody's stream of this run
        wire = rec.get("stream") if isinstance(rec, dict) else None
        if wire not in self.streams:
            return None
        rec["stream"] = wire[len(self.prefix):]
        if isinstance(rec.get("key"), str) and rec["key"].startswith(self.prefix):
            rec["key"] = rec["key"][len(self.prefix):]
        return rec


def worker_command(bootstrap_servers: str, topics: Topics, engine_config: dict[str, Any]) -> list[str]:
    """The ``streamforest kafka run`` command line of a worker whose engine is ``engine_config`` (the loop's
    :func:`~streamforest.relational.loop.engine_config`): with it, the loop over Kafka decides as in-process.

    Examples
    --------
    >>> " ".join(worker_command("localhost:9092", Topics(), {"forest": {"trees_per_generation": 30,
    ...          "random_state": 3}, "publish": "unlabelled", "encoding": "none"}))  # doctest: +NORMALIZE_WHITESPACE
    'streamforest kafka run --bootstrap-servers localhost:9092 --input-topic streamforest.input
     --topic-prefix streamforest --create-topics --seed 3 --forest-param trees_per_generation=30
     --publish unlabelled --encoding none'
    """
    from streamforest.relational.drivers import engine_options

    return ["streamforest", "kafka", "run", "--bootstrap-servers", bootstrap_servers, "--input-topic", topics.input,
            "--topic-prefix", topics.prefix, "--create-topics", *engine_options(engine_config)]


def transports(args: argparse.Namespace, config: dict[str, Any], final: dict[str, Any],
               progress: Any) -> tuple[KafkaTransport, KafkaTransport]:
    """The exploration and final-stream transports of ``streamforest relational run --transport kafka`` from its
    options; ``progress`` (a callable or ``None``) is told the ``streamforest kafka run`` command of each worker
    (:func:`worker_command`) with which the loop decides as in-process."""
    check_env(args)
    if not args.bootstrap_servers:
        raise ValueError("--transport kafka needs --bootstrap-servers")
    topics = Topics(input=args.input_topic, prefix=args.topic_prefix)
    final_topics = Topics(input=args.final_input_topic or topics.input,
                          prefix=args.final_topic_prefix or args.topic_prefix)
    run_id = args.run_id or uuid.uuid4().hex[:12]
    client = client_settings(args)
    if progress is not None:
        progress(f"relational over Kafka, run {run_id}: exploration worker: "
                 f"{shlex.join(worker_command(args.bootstrap_servers, topics, config))}")
        if final_topics != topics:
            progress(f"final-stream worker: {shlex.join(worker_command(args.bootstrap_servers, final_topics, final))}")
    transport = KafkaTransport(args.bootstrap_servers, topics, run_id, client)
    try:
        return transport, KafkaTransport(args.bootstrap_servers, final_topics, run_id, client)
    except BaseException:
        transport.close()
        raise
