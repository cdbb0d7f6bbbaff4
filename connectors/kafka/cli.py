"""``streamforest kafka run|produce|tail``: the worker, a JSONL producer and a readable topic tail.

Every option can also come from the environment as ``STREAMFOREST_<OPTION>`` (``--bootstrap-servers`` ->
``STREAMFOREST_BOOTSTRAP_SERVERS``; flags take ``1``/``true``/``yes``; a repeatable option takes values separated by
whitespace); the command line wins.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

import orjson

from streamforest.cli_options import add_connection_options, check_env, client_settings, env_defaults
from streamforest.engine.options import add_engine_options, engine_config
from streamforest.optional import require


def cmd_run(args: argparse.Namespace) -> int:
    check_env(args)
    require("kafka", "streamforest kafka run")
    from streamforest.connectors.kafka.config import Topics, WorkerConfig
    from streamforest.connectors.kafka.worker import Worker

    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(max(logging.WARNING, getattr(logging, args.log_level)))
    config = WorkerConfig(
        bootstrap_servers=args.bootstrap_servers, group_id=args.group_id,
        topics=Topics(input=args.input_topic, prefix=args.topic_prefix), guarantee=args.guarantee,
        commit_interval=args.commit_interval, commit_every=args.commit_every, state_interval=args.state_interval,
        state_chunk_bytes=args.state_chunk_bytes, create_topics=args.create_topics, partitions=args.partitions,
        exit_when_idle=args.exit_when_idle, instance_id=args.instance_id, member_file=args.member_file,
        stall_timeout=args.stall_timeout,
        session_timeout_ms=int(args.session_timeout * 1000), max_poll_interval_ms=int(args.max_poll_interval * 1000),
        client=client_settings(args))
    worker = Worker(config, engine_config(args))
    if args.metrics_port is not None:
        from prometheus_client import start_http_server

        from streamforest.connectors.kafka.metrics import zero_series

        zero_series(worker.metrics, worker.engine_metrics, config.topics)
        start_http_server(args.metrics_port, addr=args.metrics_host, registry=worker.metrics.registry)
    worker.run()
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    """Send JSONL messages (a file, or ``-`` for ``streamforest produce`` piped in) keyed by their stream."""
    check_env(args)
    require("kafka", "streamforest kafka produce")
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=args.bootstrap_servers, enable_idempotence=True, acks="all",
                             linger_ms=20, **client_settings(args))
    fh = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")
    n = 0
    try:
        for line in fh:
            line = line.rstrip(b"\r\n")
            if not line.strip():
                continue
            producer.send(args.topic, key=message_key(line), value=line)
            n += 1
        producer.flush()
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
        producer.close()
    print(f"sent {n} messages to {args.topic}", file=sys.stderr)
    return 0


def message_key(line: bytes) -> bytes | None:
    """The Kafka key of an input message: its stream id (``None`` when it has none: the worker dead-letters it).

    Examples
    --------
    >>> message_key(b'{"v": 1, "type": "samples", "stream": "s1", "samples": []}')
    b's1'
    >>> message_key(b"not json") is None
    True
    """
    try:
        stream = orjson.loads(line).get("stream")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return stream.encode("utf-8") if isinstance(stream, str) else None


def cmd_tail(args: argparse.Namespace) -> int:
    """Print a topic's committed records: ``partition:offset key [headers] value``."""
    check_env(args)
    require("kafka", "streamforest kafka tail")
    from kafka import KafkaConsumer, TopicPartition

    from streamforest.connectors.kafka import clients

    c = KafkaConsumer(bootstrap_servers=args.bootstrap_servers, isolation_level="read_committed",
                      enable_auto_commit=False, **client_settings(args))
    try:
        parts = c.partitions_for_topic(args.topic)
        if not parts:
            print(f"streamforest kafka tail: no topic {args.topic}", file=sys.stderr)
            return 1
        tps = [TopicPartition(args.topic, p) for p in sorted(parts)]
        c.assign(tps)
        if args.from_beginning:
            c.seek_to_beginning(*tps)
        out = sys.stdout
        last = time.monotonic()
        shown = 0
        poller = clients.QuietPoller(c)
        while args.idle_timeout is None or time.monotonic() - last < args.idle_timeout:
            for recs in poller.poll(0.2).values():
                last = time.monotonic()
                for r in recs:
                    key = r.key.decode("utf-8", "replace") if r.key is not None else "-"
                    value = "(tombstone)" if r.value is None else _text(r.value)
                    headers = " ".join(f"{k}={v.decode('utf-8', 'replace')}" for k, v in r.headers or [])
                    out.write(f"{r.partition}:{r.offset} {key} {('[' + headers + '] ') if headers else ''}{value}\n")
                    shown += 1
                    if args.max_records is not None and shown >= args.max_records:
                        return 0
            out.flush()
    finally:
        c.close()
    return 0


def _text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(value)} bytes, binary>"


def register(subparsers: Any) -> None:
    """Add the ``kafka`` command group to ``streamforest``'s subparsers."""
    group = subparsers.add_parser("kafka", help="run the engine as a Kafka application; produce to and tail topics",
                                  description="The engine as a Kafka consumer-group application. Every option can "
                                              "also be set as STREAMFOREST_<OPTION> in the environment.")
    sub = group.add_subparsers(dest="kafka_command", required=True)

    p = sub.add_parser("run", help="consume the input topic, learn, produce predictions/encodings/feedback/errors",
                       description="Consume the input topic in a consumer group (one engine per partition), "
                                   "produce the records to <prefix>.predictions|encodings|feedback|errors, checkpoint "
                                   "each partition's state to the compacted <prefix>.state. SIGTERM/SIGINT: finish "
                                   "the message in hand, commit, leave the group.")
    add_connection_options(p)
    p.add_argument("--group-id", default="streamforest", help="consumer group of the workers")
    p.add_argument("--input-topic", default="streamforest.input")
    p.add_argument("--topic-prefix", default="streamforest", help="outputs and changelog are <prefix>.<name>")
    p.add_argument("--guarantee", choices=("exactly-once", "at-least-once"), default="exactly-once")
    p.add_argument("--commit-interval", type=float, default=1.0, help="seconds between commits")
    p.add_argument("--commit-every", type=int, default=1000, help="messages between commits (whichever first)")
    p.add_argument("--state-interval", type=float, default=3.0,
                   help="snapshot the changed streams' state after this many seconds of engine work on a partition "
                        "(bounds the replay after a crash; also once a partition has read all its input and stayed "
                        "quiet for a commit interval, and always on revoke and shutdown)")
    p.add_argument("--state-chunk-bytes", type=int, default=512 * 1024,
                   help="state snapshots are cut in records of at most this size (under the broker's limit)")
    p.add_argument("--create-topics", action="store_true",
                   help="create missing topics (outputs and changelog with the input's partitions; compaction "
                        "for predictions, encodings and state)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of topics created when the input is too")
    p.add_argument("--instance-id", help="static group membership: a restarted worker with the same id takes its "
                                         "place at once (e.g. the pod name); ids must differ between workers")
    p.add_argument("--member-file", metavar="PATH",
                   help="dynamic membership: keep the worker's member id in this file, and remove the member it "
                        "names from the group when the worker starts (a crashed predecessor; one file per worker, "
                        "kept across restarts)")
    p.add_argument("--session-timeout", type=float, default=10.0,
                   help="seconds without heartbeat before the group gives a dead worker's partitions away")
    p.add_argument("--max-poll-interval", type=float, default=600.0,
                   help="seconds between polls before the group gives the worker's partitions away; also how long "
                        "a join may wait (the rebalance timeout): above the longest a poll's messages take")
    p.add_argument("--stall-timeout", type=float, default=60.0,
                   help="seconds joining or rebalancing, or with an input partition in nobody's hands, before the "
                        "worker removes that partition's holder, leaves the group and joins it again with a new "
                        "consumer (above the session timeout and the longest one message takes)")
    p.add_argument("--exit-when-idle", type=float, metavar="SECONDS",
                   help="stop cleanly after this long with nothing consumed (joining or rebalancing not counted)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    p.add_argument("--metrics-host", default="127.0.0.1", help="address the metrics server binds to")
    p.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="INFO")
    add_engine_options(p)
    env_defaults(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("produce", help="send JSONL messages to the input topic, keyed by stream",
                       description="Send one message per line of FILE (or stdin: pipe `streamforest produce` in) "
                                   "to the topic, keyed by its stream id.")
    p.add_argument("file", help="JSONL file, or - for stdin")
    add_connection_options(p)
    p.add_argument("--topic", default="streamforest.input")
    env_defaults(p)
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("tail", help="print a topic's committed records readably",
                       description="Print the committed records of a topic: partition:offset key [headers] value.")
    p.add_argument("topic")
    add_connection_options(p)
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest record (default: the end)")
    p.add_argument("--idle-timeout", type=float, help="stop after this many seconds without records")
    p.add_argument("--max-records", type=int, help="stop after printing this many records")
    env_defaults(p)
    p.set_defaults(func=cmd_tail)
