#!/usr/bin/env bash
# A real single-node OpenSearch for tests, CI and the local stack.
#
#   scripts/opensearch.sh start    start it (idempotent); prints its URL on stdout
#   scripts/opensearch.sh stop     stop the node this script started on the port
#   scripts/opensearch.sh status   exit 0 when a healthy node answers on the port
#   scripts/opensearch.sh url      print the URL
#
# Everything comes from Maven Central (each download checked against its published .sha1, or
# a SHA-1 pinned below where Central publishes none) and is assembled once, read-only, under ${MEMVAULT_CACHE:-$HOME/.cache/memvault}/opensearch/:
#   - the integ-test-zip distribution (core + transport-netty4, no bundled JDK),
#   - lang-painless and analysis-common, published only as jars, turned into modules,
#   - the k-NN plugin (Lucene engine only: its nmslib/faiss native libraries are absent;
#     an index made with either engine stops the node at its first refresh).
# The node's config, data and logs live in ${MEMVAULT_OPENSEARCH_HOME}, by default
# $HOME/.memvault/opensearch-<port>. OpenSearch refuses to run as root, so as root it runs
# as the unprivileged system user ${MEMVAULT_OPENSEARCH_USER:-memvault-os}.
#
# Environment: MEMVAULT_CACHE, MEMVAULT_OPENSEARCH_HOME, MEMVAULT_OPENSEARCH_PORT (9200;
# the transport port is port+100), MEMVAULT_OPENSEARCH_HEAP (512m),
# MEMVAULT_OPENSEARCH_TIMEOUT (90 s), OPENSEARCH_JAVA_HOME (default: the java on PATH).
set -euo pipefail

OS_VERSION=2.19.6
KNN_VERSION=2.19.6.0
ANTLR_VERSION=4.13.1 # from the lang-painless 2.19.6 POM
ASM_VERSION=9.7      # idem
MAVEN=${MEMVAULT_MAVEN_REPO:-https://repo1.maven.org/maven2}

CACHE=${MEMVAULT_CACHE:-$HOME/.cache/memvault}/opensearch
DOWNLOADS=$CACHE/downloads
INSTALL=$CACHE/opensearch-$OS_VERSION-assembled
PORT=${MEMVAULT_OPENSEARCH_PORT:-9200}
TRANSPORT_PORT=$((PORT + 100))
INSTANCE=${MEMVAULT_OPENSEARCH_HOME:-$HOME/.memvault/opensearch-$PORT}
HEAP=${MEMVAULT_OPENSEARCH_HEAP:-512m}
TIMEOUT=${MEMVAULT_OPENSEARCH_TIMEOUT:-90}
RUN_USER=${MEMVAULT_OPENSEARCH_USER:-memvault-os}
URL=http://127.0.0.1:$PORT
PIDFILE=$INSTANCE/opensearch.pid

log() { printf 'opensearch: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# ---------------------------------------------------------------- downloads

# maven_path GROUP ARTIFACT VERSION EXT -> the artifact's path in a Maven repository
maven_path() {
	local group=${1//.//}
	printf '%s/%s/%s/%s-%s.%s' "$group" "$2" "$3" "$2" "$3" "$4"
}

# SHA-1s for artifacts that Maven Central serves without a .sha1 (checked 2026-11: the
# k-NN 2.19.6.0 zip has no .sha1, .asc or .pom next to it).
declare -A PINNED_SHA1=(
	[opensearch-knn-$KNN_VERSION.zip]=3f9fcc3784f9a731912e651d4926626695132eaf
)

# expected_sha1 REL FILE -> the SHA-1 that FILE (REL in the repository) must have
expected_sha1() {
	local rel=$1 file=$2 pinned=${PINNED_SHA1[${2##*/}]:-} published
	if [[ ! -s $file.sha1 ]]; then
		if curl -fsSL --retry 3 -o "$file.sha1.part" "$MAVEN/$rel.sha1" 2>/dev/null; then
			mv "$file.sha1.part" "$file.sha1"
		elif [[ -n $pinned ]]; then
			rm -f "$file.sha1.part"
			printf '%s\n' "$pinned"
			return
		else
			rm -f "$file.sha1.part"
			die "cannot download $MAVEN/$rel.sha1"
		fi
	fi
	published=$(awk '{print tolower($1); exit}' "$file.sha1")
	[[ $published =~ ^[0-9a-f]{40}$ ]] || die "bad checksum file $file.sha1"
	[[ -z $pinned || $pinned == "$published" ]] ||
		die "$rel: published SHA-1 $published differs from the pinned $pinned"
	printf '%s\n' "$published"
}

# fetch GROUP ARTIFACT VERSION EXT -> prints the cached file, downloading it if needed
fetch() {
	local rel file expected actual
	rel=$(maven_path "$@")
	file=$DOWNLOADS/${rel##*/}
	mkdir -p "$DOWNLOADS"
	expected=$(expected_sha1 "$rel" "$file")
	if [[ -s $file ]] && [[ $(sha1sum "$file" | cut -d' ' -f1) == "$expected" ]]; then
		printf '%s\n' "$file"
		return
	fi
	log "downloading $MAVEN/$rel"
	curl -fsSL --retry 3 -o "$file.part" "$MAVEN/$rel" || die "cannot download $MAVEN/$rel"
	actual=$(sha1sum "$file.part" | cut -d' ' -f1)
	[[ $actual == "$expected" ]] || {
		rm -f "$file.part"
		die "SHA-1 mismatch for $rel: expected $expected, got $actual"
	}
	mv "$file.part" "$file"
	printf '%s\n' "$file"
}

# ---------------------------------------------------------------- java

java_home() {
	local java
	if [[ -n ${OPENSEARCH_JAVA_HOME:-} ]]; then
		printf '%s\n' "$OPENSEARCH_JAVA_HOME"
	elif [[ -n ${JAVA_HOME:-} && -x ${JAVA_HOME:-}/bin/java ]]; then
		printf '%s\n' "$JAVA_HOME"
	else
		java=$(command -v java) || die "no java on PATH (OpenSearch $OS_VERSION needs Java 11+; 17 recommended)"
		java=$(readlink -f "$java")
		dirname "$(dirname "$java")"
	fi
}

# ---------------------------------------------------------------- assembly

# module_descriptor NAME CLASSNAME DESCRIPTION EXTENDED
module_descriptor() {
	cat <<EOF
# assembled by memvault scripts/opensearch.sh from the jar on Maven Central
description=$3
version=$OS_VERSION
name=$1
classname=$2
java.version=11
opensearch.version=$OS_VERSION
custom.foldername=
extended.plugins=$4
has.native.controller=false
EOF
}

assembled() { [[ -x $INSTALL/bin/opensearch && -f $INSTALL/.assembled ]]; }

assemble() {
	assembled && return
	command -v unzip >/dev/null || die "unzip is required"
	# Nodes on other ports may be assembling too: one at a time, then look again.
	exec 8>"$CACHE/.lock-assemble"
	flock 8
	if assembled; then
		exec 8>&-
		return
	fi
	rm -rf "$CACHE"/.assemble.* # left by a run that was killed outright
	local dist knn tmp home common jhome
	dist=$(fetch org.opensearch.distribution.integ-test-zip opensearch "$OS_VERSION" zip)
	knn=$(fetch org.opensearch.plugin opensearch-knn "$KNN_VERSION" zip)
	local jar painless=()
	jar=$(fetch org.opensearch.plugin lang-painless "$OS_VERSION" jar)
	painless+=("$jar")
	jar=$(fetch org.opensearch.plugin opensearch-scripting-painless-spi "$OS_VERSION" jar)
	painless+=("$jar")
	jar=$(fetch org.antlr antlr4-runtime "$ANTLR_VERSION" jar)
	painless+=("$jar")
	for jar in asm asm-analysis asm-commons asm-tree asm-util; do
		jar=$(fetch org.ow2.asm "$jar" "$ASM_VERSION" jar)
		painless+=("$jar")
	done
	common=$(fetch org.opensearch.plugin analysis-common "$OS_VERSION" jar)

	log "assembling OpenSearch $OS_VERSION into $INSTALL"
	tmp=$(mktemp -d "$CACHE/.assemble.XXXXXX")
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '$tmp'" EXIT
	unzip -q "$dist" -d "$tmp"
	home=$tmp/opensearch-$OS_VERSION
	[[ -x $home/bin/opensearch ]] || die "unexpected layout in $dist"

	mkdir -p "$home/modules/lang-painless" "$home/modules/analysis-common"
	cp "${painless[@]}" "$home/modules/lang-painless/"
	module_descriptor lang-painless org.opensearch.painless.PainlessPlugin \
		"An easy, safe and fast scripting language for OpenSearch" "" \
		>"$home/modules/lang-painless/plugin-descriptor.properties"
	cat >"$home/modules/lang-painless/plugin-security.policy" <<'EOF'
grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";
  // needed to find the classloader to load allowlisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
EOF
	cp "$common" "$home/modules/analysis-common/"
	module_descriptor analysis-common org.opensearch.analysis.common.CommonAnalysisPlugin \
		"Adds \"built in\" analyzers to OpenSearch." lang-painless \
		>"$home/modules/analysis-common/plugin-descriptor.properties"

	jhome=$(java_home)
	OPENSEARCH_JAVA_HOME=$jhome OPENSEARCH_PATH_CONF=$home/config \
		"$home/bin/opensearch-plugin" install --batch "file://$knn" >"$tmp/plugin-install.log" 2>&1 || {
		cat "$tmp/plugin-install.log" >&2
		die "installing the k-NN plugin failed"
	}
	# The integ-test zip ships an empty logs/ directory; the node logs into its own instance.
	rm -rf "$home/logs"
	chmod -R a+rX,go-w "$home"
	touch "$home/.assembled"

	rm -rf "$INSTALL"
	mv "$home" "$INSTALL"
	rm -rf "$tmp"
	trap - EXIT
	exec 8>&-
}

# ---------------------------------------------------------------- instance

# As root: the unprivileged user to run as, created if needed. Otherwise empty.
run_user() {
	[[ $(id -u) -eq 0 ]] || return 0
	if ! id -u "$RUN_USER" >/dev/null 2>&1; then
		if command -v useradd >/dev/null; then
			useradd --system --user-group --no-create-home --home-dir /nonexistent \
				--shell /usr/sbin/nologin "$RUN_USER"
		else
			adduser -S -D -H -s /sbin/nologin "$RUN_USER"
		fi
	fi
	printf '%s\n' "$RUN_USER"
}

# Let USER reach PATH when an ancestor directory bars it (/root is often mode 700): add
# only the search bit, only where USER cannot pass, walking down from /.
allow_traverse() {
	local user=$1 dir="" part parts
	IFS=/ read -ra parts <<<"${2#/}"
	for part in "${parts[@]:0:${#parts[@]}-1}"; do
		dir=$dir/$part
		if ! runuser -u "$user" -- test -x "$dir" 2>/dev/null; then
			log "granting search permission (o+x) on $dir so that $user can reach $2"
			chmod o+x "$dir"
		fi
	done
}

write_config() {
	local conf=$INSTANCE/config
	mkdir -p "$conf/jvm.options.d" "$INSTANCE/data" "$INSTANCE/logs" "$INSTANCE/tmp"
	cp "$INSTALL/config/log4j2.properties" "$conf/"
	# Relative paths in jvm.options resolve against the install: point them into the instance.
	sed -e "s|^-Xms.*|-Xms$HEAP|" -e "s|^-Xmx.*|-Xmx$HEAP|" \
		-e "s|HeapDumpPath=data|HeapDumpPath=$INSTANCE/data|" \
		-e "s|ErrorFile=logs/|ErrorFile=$INSTANCE/logs/|" \
		-e "s|file=logs/gc.log|file=$INSTANCE/logs/gc.log|" \
		"$INSTALL/config/jvm.options" >"$conf/jvm.options"
	cat >"$conf/opensearch.yml" <<EOF
# written by memvault scripts/opensearch.sh on every start
cluster.name: memvault-local
node.name: memvault-local-$PORT
network.host: 127.0.0.1
http.port: $PORT
transport.port: $TRANSPORT_PORT
discovery.type: single-node
path.data: $INSTANCE/data
path.logs: $INSTANCE/logs
# one node: replicas could never be assigned, so new indices would stay yellow
cluster.default_number_of_replicas: 0
# a nearly full disk must not turn the test indices read-only
cluster.routing.allocation.disk.threshold_enabled: false
EOF
}

# ---------------------------------------------------------------- process

healthy() {
	curl -fsS --max-time 5 "$URL/_cluster/health?wait_for_status=yellow&timeout=2s" >/dev/null 2>&1
}

running_pid() {
	local pid
	[[ -s $PIDFILE ]] || return 1
	pid=$(<"$PIDFILE")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	# A stale pid file may name a recycled pid: it must be an OpenSearch node.
	if [[ -r /proc/$pid/cmdline ]]; then
		[[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == *org.opensearch.bootstrap.OpenSearch* ]] || return 1
	fi
	printf '%s\n' "$pid"
}

show_log_tail() {
	local f
	for f in "$INSTANCE/logs/console.log" "$INSTANCE/logs/memvault-local.log"; do
		[[ -s $f ]] || continue
		log "last lines of $f:"
		tail -n 40 "$f" >&2
	done
}

cmd_start() {
	local jhome user pid t0 cmd
	mkdir -p "$CACHE"
	# One start at a time per port (e.g. parallel test workers); the others then find it up.
	exec 9>"$CACHE/.lock-$PORT"
	flock 9
	if healthy; then
		printf '%s\n' "$URL"
		return
	fi
	if pid=$(running_pid); then
		log "the node started from $INSTANCE (pid $pid) is running but not healthy yet"
	else
		assemble
		jhome=$(java_home)
		[[ -x $jhome/bin/java ]] || die "no java at $jhome/bin/java"
		user=$(run_user)
		mkdir -p "$INSTANCE"
		write_config
		rm -f "$PIDFILE" "$INSTANCE/logs/console.log"
		cmd=(env OPENSEARCH_JAVA_HOME="$jhome" OPENSEARCH_PATH_CONF="$INSTANCE/config"
			OPENSEARCH_TMPDIR="$INSTANCE/tmp" OPENSEARCH_JAVA_OPTS="-Xms$HEAP -Xmx$HEAP"
			"$INSTALL/bin/opensearch" -q -p "$PIDFILE")
		if [[ -n $user ]]; then
			chown -R "$user:" "$INSTANCE"
			allow_traverse "$user" "$INSTALL/bin/opensearch"
			allow_traverse "$user" "$INSTANCE/config"
			cmd=(runuser -u "$user" -- "${cmd[@]}")
		fi
		log "starting OpenSearch $OS_VERSION on $URL (home $INSTANCE)"
		# In the background, in its own session (a Ctrl-C aimed at the caller must not reach
		# it), from / (never the repository), without our lock (fd 9) or the caller's pipes.
		# The launcher (java itself, or runuser waiting on it) lives as long as the node.
		(cd / && exec setsid "${cmd[@]}" </dev/null >"$INSTANCE/logs/console.log" 2>&1 8>&- 9>&-) &
		pid=$!
	fi
	t0=$SECONDS
	printf 'opensearch: waiting for %s ' "$URL" >&2
	while ! healthy; do
		if ! kill -0 "$pid" 2>/dev/null; then
			printf '\n' >&2
			show_log_tail
			die "OpenSearch exited during startup"
		fi
		if ((SECONDS - t0 >= TIMEOUT)); then
			printf '\n' >&2
			show_log_tail
			die "OpenSearch not healthy after ${TIMEOUT}s (still running; '$0 stop' stops it)"
		fi
		printf '.' >&2
		sleep 1
	done
	printf ' up\n' >&2
	printf '%s\n' "$URL"
}

cmd_stop() {
	local pid i
	if ! pid=$(running_pid); then
		rm -f "$PIDFILE"
		if healthy; then
			log "a node answers on $URL but was not started from $INSTANCE; leaving it alone"
		else
			log "not running"
		fi
		return
	fi
	log "stopping pid $pid"
	kill -TERM "$pid"
	for ((i = 0; i < 60; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid still alive after 30s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$PIDFILE"
	log "stopped"
}

cmd_status() {
	if healthy; then
		curl -fsS --max-time 5 "$URL/_cluster/health"
		printf '\n'
	else
		log "no healthy node on $URL"
		return 1
	fi
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
url) printf '%s\n' "$URL" ;;
*)
	printf 'usage: %s start|stop|status|url\n' "$0" >&2
	exit 2
	;;
esac
