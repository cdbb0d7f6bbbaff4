"""What a worker needs to know: brokers, group, topics, guarantee, intervals, client security settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GUARANTEES = ("exactly-once", "at-least-once")
OUTPUTS = ("predictions", "encodings", "feedback", "errors")
#: Record type -> output topic suffix.
TOPIC_OF_TYPE = {"prediction": "predictions", "encoding": "encodings", "feedback": "feedback", "error": "errors"}
#: Per-sample outputs live on compacted topics (the latest record per ``stream/id`` wins).
COMPACTED = ("predictions", "encodings", "state")
#: Dead letters carry the original bytes up to this many; longer ones are cut and say so in a header.
DEAD_LETTER_CAP = 65_536
#: The broker's default limit on one record batch (Kafka's ``message.max.bytes``).
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
#: State snapshots are cut into chunks of at most this many bytes, well under the message size limit.
DEFAULT_STATE_CHUNK_BYTES = 512 * 1024
#: kafka-python settings passed through unchanged (security and client tuning).
CLIENT_SETTINGS = ("security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
                   "sasl_kerberos_service_name", "sasl_oauth_token_provider", "ssl_cafile", "ssl_certfile",
                   "ssl_keyfile", "ssl_password", "ssl_check_hostname", "ssl_crlfile", "client_id")


@dataclass
class Topics:
    """Topic names: the input and ``<prefix>.predictions|encodings|feedback|errors|state``.

    Examples
    --------
    >>> Topics(prefix="sf").output("prediction")
    'sf.predictions'
    >>> Topics().state
    'streamforest.state'
    """

    input: str = "streamforest.input"
    prefix: str = "streamforest"

    def output(self, record_type: str) -> str:
        return f"{self.prefix}.{TOPIC_OF_TYPE[record_type]}"

    @property
    def state(self) -> str:
        return f"{self.prefix}.state"

    @property
    def errors(self) -> str:
        return f"{self.prefix}.errors"

    def all_outputs(self) -> list[str]:
        return [f"{self.prefix}.{o}" for o in OUTPUTS]


@dataclass
class WorkerConfig:
    """How a worker connects, commits and checkpoints.

    Parameters
    ----------
    bootstrap_servers
        ``host:port[,host:port...]`` of the brokers.
    group_id
        The consumer group: workers of one group share the input partitions.
    topics
        Input topic and output prefix.
    guarantee
        ``"exactly-once"`` (outputs, state and offsets in one transaction per partition) or ``"at-least-once"``
        (idempotent producer, flush, then commit offsets).
    commit_interval, commit_every
        A checkpoint every ``commit_interval`` seconds or ``commit_every`` messages, whichever comes first. The
        interval kept is at most half ``stall_timeout`` (:attr:`checkpoint_seconds`).
    state_interval
        The changed streams' state is written to the changelog once the engine has worked this many seconds on
        the partition since the last snapshot, when the partition has read all its input and stayed quiet for a
        commit interval, and always on revoke and shutdown: a restarted partition replays the input from the
        snapshot (republishing nothing already committed), so this bounds the replay.
    create_topics
        Create missing topics (input partitions for outputs and changelog; compaction where it belongs).
    exit_when_idle
        Stop cleanly after this many seconds with nothing consumed (``None``: run until signalled).
    session_timeout_ms, max_poll_interval_ms
        How long the group waits for a silent worker's heartbeat, and for its next poll (also how long a join may
        take: the rebalance timeout), before it gives the worker's partitions away.
    stall_timeout
        Seconds the worker waits on its group before it defends itself: when it has been joining or rebalancing
        that long (a JoinGroup the coordinator never answers), or when an input partition with records to read has
        been in nobody's hands that long (its committed offset stands still: a dead member the coordinator does not
        expire), it logs it, counts it (``streamforest_kafka_group_stalls_total``), hands its partitions over,
        removes such a partition's holder from the group (and itself, when static), closes its consumer and joins
        the group again with a new one (the same ``instance_id``). After stalls in a row it waits longer (doubled per
        stall, at most 4 times) and stays out of the group longer before joining again (docs/kafka.md). Keep it
        above the session timeout and above the longest one input message takes, or a slow member looks stalled.
    instance_id
        Static group membership (KIP-345): a worker restarted with the same id takes its place in the group at
        once, without waiting for the session of its crashed predecessor to expire (a pod name is a good id).
    member_file
        A dynamic member (no ``instance_id``) writes the member id the coordinator gave it to this file, and a
        worker started with the file removes that member from the group (LeaveGroup v3 by member id) before it
        joins: a coordinator that never expires a SIGKILLed dynamic member (noida-db) otherwise keeps the dead
        predecessor in the group. One file per worker, kept across its restarts (a volume of its container).
    client
        Extra kafka-python settings for every client (``security_protocol``, SASL, SSL files...).
    """

    bootstrap_servers: str = "localhost:9092"
    group_id: str = "streamforest"
    topics: Topics = field(default_factory=Topics)
    guarantee: str = "exactly-once"
    commit_interval: float = 1.0
    commit_every: int = 1000
    state_interval: float = 3.0
    state_chunk_bytes: int = DEFAULT_STATE_CHUNK_BYTES
    create_topics: bool = False
    partitions: int = 4
    exit_when_idle: float | None = None
    max_poll_records: int = 100
    session_timeout_ms: int = 10_000
    max_poll_interval_ms: int = 600_000
    stall_timeout: float = 60.0
    instance_id: str | None = None
    member_file: str | None = None
    compression_type: str | None = "lz4"
    client: dict[str, Any] = field(default_factory=dict)

    @property
    def checkpoint_seconds(self) -> float:
        """The commit interval the worker keeps: ``commit_interval``, at most half ``stall_timeout``. The other
        members of the group take a partition whose committed offset has stood still that long, with records past
        it, for a dead member's; a live member that committed less often would be removed from its group."""
        return min(self.commit_interval, self.stall_timeout / 2)

    def __post_init__(self) -> None:
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"guarantee must be one of {GUARANTEES}, got {self.guarantee!r}")
        if not self.commit_interval > 0:
            raise ValueError(f"commit_interval must be > 0 seconds, got {self.commit_interval!r}")
        if self.commit_every < 1:
            raise ValueError(f"commit_every must be >= 1, got {self.commit_every!r}")
        if self.state_interval < 0:
            raise ValueError(f"state_interval must be >= 0 seconds, got {self.state_interval!r}")
        if not 1024 <= self.state_chunk_bytes < DEFAULT_MAX_MESSAGE_BYTES:
            raise ValueError(f"state_chunk_bytes must be in [1024, {DEFAULT_MAX_MESSAGE_BYTES}), "
                             f"got {self.state_chunk_bytes!r}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions!r}")
        if not 0 < self.session_timeout_ms <= self.max_poll_interval_ms:
            raise ValueError(f"need 0 < session_timeout_ms <= max_poll_interval_ms, got {self.session_timeout_ms!r} "
                             f"and {self.max_poll_interval_ms!r}")
        if not self.stall_timeout * 1000 > self.session_timeout_ms:
            raise ValueError(f"stall_timeout must exceed the session timeout ({self.session_timeout_ms / 1000:g} s): a "
                             f"dead member is only expired after it; got {self.stall_timeout!r}")
        if self.exit_when_idle is not None and self.exit_when_idle <= 0:
            raise ValueError(f"exit_when_idle must be > 0 seconds, got {self.exit_when_idle!r}")
        unknown = sorted(set(self.client) - set(CLIENT_SETTINGS))
        if unknown:
            raise ValueError(f"unknown client settings {unknown} (known: {list(CLIENT_SETTINGS)})")

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == "exactly-once"

    def transactional_id(self, partition: int) -> str:
        """One transactional id per input partition: whoever takes the partition over fences the previous owner
        and aborts its open transaction at once (no waiting for a transaction timeout)."""
        return f"{self.group_id}.{self.topics.input}.{partition}"
