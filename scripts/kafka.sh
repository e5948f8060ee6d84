#!/usr/bin/env bash
# A real, single-node Apache Kafka (KRaft: broker and controller in one JVM)
# on loopback, from Maven Central's jars, for swerl's real-broker tests and
# for users who want the Kafka that swerl is checked against.
#
#   scripts/kafka.sh install          copy the jars into the cache (idempotent)
#   scripts/kafka.sh start DIR [PORT] start a broker whose config and data
#                                     live in DIR (formatted on first start);
#                                     prints its bootstrap address host:port
#   scripts/kafka.sh kill DIR         SIGKILL it (a crash: the data stays)
#   scripts/kafka.sh stop DIR         SIGTERM it, SIGKILL after 30 s
#   scripts/kafka.sh addr DIR         print the bootstrap address
#   scripts/kafka.sh home             print the jars folder
#   scripts/kafka.sh installed        exit 0 when the jars are installed
#
# Started again on the same DIR, the broker is the same cluster on the same
# ports with its data: that is how the outage tests restart it.
#
# The version is deploy/kafka/pom.xml's kafka.version unless
# SWERL_KAFKA_VERSION says otherwise; the jars are cached in
# ${SWERL_CACHE:-$HOME/.cache/swerl}/kafka-VERSION. SWERL_KAFKA_HEAP sets
# -Xmx (default 512m); SWERL_KAFKA_PARTITIONS sets num.partitions for
# auto-created topics (default 4, as the embedded broker); with
# SWERL_KAFKA_OWNER=PID the broker is SIGKILLed when process PID exits.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pom="$root/deploy/kafka/pom.xml"
version="${SWERL_KAFKA_VERSION:-$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")}"
home="${SWERL_CACHE:-$HOME/.cache/swerl}/kafka-$version"
jars="$home/jars"

die() { echo "kafka.sh: $*" >&2; exit 1; }

install() {
  if [ -f "$home/complete" ]; then return 0; fi
  command -v mvn >/dev/null || die "mvn is not installed (apt-get install -y maven)"
  command -v java >/dev/null || die "java is not installed (apt-get install -y openjdk-17-jre-headless)"
  echo "kafka.sh: installing Apache Kafka $version jars into $jars" >&2
  rm -rf "$jars" && mkdir -p "$home"
  local tmp; tmp="$(mktemp -d)"
  cp "$pom" "$tmp/pom.xml"
  (cd "$tmp" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -Dkafka.version="$version" \
     -DincludeScope=runtime -DoutputDirectory="$jars") >&2 || { rm -rf "$tmp"; die "mvn failed for Kafka $version"; }
  rm -rf "$tmp"
  [ -f "$jars/kafka_2.13-$version.jar" ] || die "no kafka_2.13-$version.jar in $jars"
  echo "$version" > "$home/complete"
}

# port_free PORT: nothing listens on 127.0.0.1:PORT.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a port below Linux's ephemeral range (32768 and up), so that no
# outgoing connection of a test running beside the broker is given it
# between this check and the broker's bind.
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 12000))
    if port_free "$p"; then echo "$p"; return 0; fi
  done
  die "no free port found"
}

alive() { [ -f "$1/pid" ] && kill -0 "$(cat "$1/pid")" 2>/dev/null; }

addr() {
  [ -f "$1/server.properties" ] || die "$1 holds no broker (no server.properties)"
  echo "127.0.0.1:$(sed -n 's/^# port=//p' "$1/server.properties")"
}

configure() { # DIR PORT
  local dir="$1" port="$2" cport
  cport="$(free_port)"
  while [ "$cport" = "$port" ]; do cport="$(free_port)"; done
  mkdir -p "$dir/data"
  cat > "$dir/server.properties" <<EOF
# port=$port
# version=Apache Kafka $version
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=${SWERL_KAFKA_PARTITIONS:-4}
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
message.max.bytes=4194304
# A broker killed and started again re-registers with the controller only
# once its old session has expired: 2 s instead of 9.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=2000
EOF
  cat > "$dir/log4j2.properties" <<EOF
appender.file.type=File
appender.file.name=file
appender.file.fileName=$dir/server.log
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=WARN
rootLogger.appenderRef.file.ref=file
logger.started.name=kafka.server.KafkaRaftServer
logger.started.level=INFO
EOF
}

# java_opts DIR: the JVM's options (heap, log config, class path).
java_opts() {
  jopts=("-Xmx${SWERL_KAFKA_HEAP:-512m}" -Xms64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    "-Dlog4j2.configurationFile=$1/log4j2.properties" "-Dkafka.logs.dir=$1" -cp "$jars/*")
}

start() { # DIR [PORT]
  local dir="${1:?start DIR [PORT]}" port="${2:-}"
  dir="$(mkdir -p "$dir" && cd "$dir" && pwd)"
  [ -f "$home/complete" ] || die "Kafka $version is not installed: run scripts/kafka.sh install"
  if alive "$dir"; then addr "$dir"; return 0; fi
  if [ ! -f "$dir/server.properties" ]; then
    configure "$dir" "${port:-$(free_port)}"
  fi
  if [ ! -f "$dir/data/meta.properties" ]; then
    # A cluster id is 16 random bytes in URL-safe base64, unpadded.
    local id; id="$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    java_opts "$dir"
    java "${jopts[@]}" kafka.tools.StorageTool format --cluster-id="$id" -c "$dir/server.properties" --ignore-formatted \
      >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "formatting $dir failed"; }
  fi
  local a; a="$(addr "$dir")"
  port_free "${a##*:}" || die "port ${a##*:} of $dir is taken by another process"
  # setsid: the broker outlives this script and ignores the caller's ^C;
  # the shell writes its own pid, which exec hands to the JVM.
  java_opts "$dir"
  rm -f "$dir/pid"
  # shellcheck disable=SC2016 # expanded by the inner shell
  setsid bash -c 'echo $$ > "$0/pid"; exec "$@"' "$dir" java "${jopts[@]}" kafka.Kafka "$dir/server.properties" \
    >"$dir/stdout.log" 2>&1 </dev/null &
  local waited=0
  until [ -s "$dir/pid" ]; do sleep 0.05; waited=$((waited + 1)); [ $waited -lt 200 ] || die "the broker in $dir did not start"; done
  if [ -n "${SWERL_KAFKA_OWNER:-}" ]; then
    # The broker dies with its owner: a test binary that crashes leaves no
    # broker behind.
    local bpid; bpid="$(cat "$dir/pid")"
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid bash -c 'while kill -0 "$0" 2>/dev/null && kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -9 "$1" 2>/dev/null' \
      "$SWERL_KAFKA_OWNER" "$bpid" >/dev/null 2>&1 </dev/null &
  fi
  local deadline=$((SECONDS + ${SWERL_KAFKA_START_TIMEOUT:-120}))
  until ! port_free "${a##*:}"; do
    if ! alive "$dir"; then
      tail -n 30 "$dir/stdout.log" "$dir/server.log" >&2 2>/dev/null || true
      die "the broker in $dir exited during start"
    fi
    [ $SECONDS -lt $deadline ] || { kill -9 "$(cat "$dir/pid")" 2>/dev/null; die "the broker in $dir did not listen on $a within ${SWERL_KAFKA_START_TIMEOUT:-120}s"; }
    sleep 0.2
  done
  echo "$a"
}

signal() { # DIR SIG WAIT_S
  local dir="$1" sig="$2" wait_s="$3" pid
  alive "$dir" || return 0
  pid="$(cat "$dir/pid")"
  kill "-$sig" "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + wait_s))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then kill -9 "$pid" 2>/dev/null || true; fi
    sleep 0.1
  done
  rm -f "$dir/pid"
}

cmd="${1:-}"; shift || true
case "$cmd" in
  install) install ;;
  start) start "$@" ;;
  kill) signal "${1:?kill DIR}" KILL 10 ;;
  stop) signal "${1:?stop DIR}" TERM 30 ;;
  addr) addr "${1:?addr DIR}" ;;
  home) echo "$jars" ;;
  installed) [ -f "$home/complete" ] ;;
  *) die "usage: kafka.sh install | start DIR [PORT] | kill DIR | stop DIR | addr DIR | home | installed" ;;
esac
