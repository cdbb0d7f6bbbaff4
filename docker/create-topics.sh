#!/bin/sh
# One-shot topic creation for the streamforest worker, run in the apache/kafka image (idempotent).
# Every topic gets the input topic's partition count: a partition's engine state lives in the changelog under
# the same partition number, and the outputs keep the input's parallelism.
set -eu

BOOTSTRAP="${BOOTSTRAP_SERVERS:-kafka:9092}"
INPUT="${INPUT_TOPIC:-streamforest.input}"
PREFIX="${TOPIC_PREFIX:-streamforest}"
PARTITIONS="${PARTITIONS:-4}"
REPLICATION="${REPLICATION_FACTOR:-1}"
TOPICS=/opt/kafka/bin/kafka-topics.sh

create() {  # create TOPIC CLEANUP_POLICY [--config k=v ...]
    name=$1
    policy=$2
    shift 2
    "$TOPICS" --bootstrap-server "$BOOTSTRAP" --create --if-not-exists --topic "$name" \
        --partitions "$PARTITIONS" --replication-factor "$REPLICATION" --config "cleanup.policy=$policy" "$@"
}

create "$INPUT" delete
# Latest record per stream/sample key wins; a dropped stream leaves tombstones.
create "$PREFIX.predictions" compact
create "$PREFIX.encodings" compact
create "$PREFIX.feedback" delete
create "$PREFIX.errors" delete
# The changelog: the latest snapshot per partition must survive, older ones may go soon.
create "$PREFIX.state" compact --config min.cleanable.dirty.ratio=0.1 --config segment.ms=600000

"$TOPICS" --bootstrap-server "$BOOTSTRAP" --describe --topic "$INPUT"
