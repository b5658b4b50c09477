# Shared by the bench scripts: source it, do not run it.

# The petstore list, byte for byte as `sluice serve petstore` answers it.
PETS='[{"id":1,"name":"catten","tag":"cat"},{"id":2,"name":"doggy","tag":"dog"}]'

# write_nginx_conf DIR PORT BODY TYPE [LISTEN_FLAGS]: one worker answering
# every request with `return 200 BODY` as TYPE; no access log; keep-alive
# without a request limit, so nginx is measured at its best. LISTEN_FLAGS
# go on the listen line (`http2`: h2c with prior knowledge).
write_nginx_conf() {
  local dir=$1 port=$2 body=$3 type=$4 flags=${5:+$5 }
  cat >"$dir/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $dir/nginx-error.log warn;
pid $dir/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port ${flags}backlog=8192;
    location / { default_type $type; return 200 '$body'; }
  }
}
NGINX
}

# wait_port PORT: until something accepts on 127.0.0.1:PORT (5 s at most).
wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on port $1" >&2
  exit 1
}

# median: the median of the numbers on stdin.
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# load_average: the 1, 5 and 15 minute load averages (is the machine shared?).
load_average() { cut -d' ' -f1-3 /proc/loadavg; }

# cpu_ticks PID: user + system CPU time of a process, in clock ticks (1/100 s).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# rss_kib PID FIELD: a memory figure of a process in KiB (VmRSS now, VmHWM peak).
rss_kib() { awk -v k="$2" '$1==k":" {print $2}' "/proc/$1/status" 2>/dev/null || echo "?"; }

# to_us: wrk's latencies on stdin (`850.00us`, `2.46ms`, `1.20s`) as microseconds.
to_us() { awk '{v=$1; if (v ~ /ms$/) {sub("ms","",v); v*=1000} else if (v ~ /us$/) {sub("us","",v)} else if (v ~ /s$/) {sub("s","",v); v*=1000000}; print v}'; }

# proxy_bench_setup TOOL...: what each proxy bench needs first:
# - the tools (exit 2 naming the packages to install) and a release build;
# - the open-file limit raised to its maximum;
# - PROXY_CPU/OTHER_CPU: with 2+ CPUs the proxy alone on CPU 1, the rest on CPU 0;
# - OUT and WORK made; on exit PROXY_PID and BACKEND_PID are stopped and
#   WORK and every path added to CLEANUP_PATHS removed.
# Needs ROOT, OUT and SLUICE set.
proxy_bench_setup() {
  local tool package
  for tool in "$@"; do
    case $tool in
      nginx) package=nginx-light ;; taskset) package=util-linux ;; h2load) package=nghttp2-client ;;
      perf) package=linux-perf ;; /usr/bin/time) package=time ;; *) package=$tool ;;
    esac
    command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install -y $package" >&2; exit 2; }
  done
  [[ -x $SLUICE ]] || (cd "$ROOT" && cargo build --release --locked -p sluice)
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  if (( $(nproc) >= 2 )); then PROXY_CPU="taskset -c 1"; OTHER_CPU="taskset -c 0"; else PROXY_CPU=""; OTHER_CPU=""; fi
  mkdir -p "$OUT"
  WORK=$(mktemp -d)
  BACKEND_PID=""
  PROXY_PID=""
  CLEANUP_PATHS=("$WORK")
  trap proxy_bench_cleanup EXIT
}

# stop_proxy: stops the proxy started as PROXY_PID and waits for it.
stop_proxy() { kill "$PROXY_PID" 2>/dev/null || true; wait "$PROXY_PID" 2>/dev/null || true; PROXY_PID=""; }

proxy_bench_cleanup() {
  [[ -n $PROXY_PID ]] && kill "$PROXY_PID" 2>/dev/null || true
  [[ -n $BACKEND_PID ]] && kill "$BACKEND_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "${CLEANUP_PATHS[@]}"
}

# start_pets_backend: an nginx-light worker on OTHER_CPU answering every
# request with the petstore list on BACKEND_PORT; sets BACKEND_PID.
start_pets_backend() {
  mkdir -p "$WORK/backend"
  write_nginx_conf "$WORK/backend" "$BACKEND_PORT" "$PETS" application/json
  $OTHER_CPU nginx -c "$WORK/backend/nginx.conf" -p "$WORK/backend" &
  BACKEND_PID=$!
  wait_port "$BACKEND_PORT"
}

# start_caddy SITE_BODY: Caddy on PORT (TLS from $WORK/certs, made by
# `sluice cert`) with h1, h2 and h3, one Go thread, on PROXY_CPU; the
# site's directives are SITE_BODY. Sets PROXY_PID.
start_caddy() {
  cat >"$WORK/Caddyfile" <<CADDY
{
	admin off
	auto_https off
	persist_config off
	grace_period 1s
	log {
		level WARN
	}
	servers {
		protocols h1 h2 h3
	}
}
https://:$PORT {
	bind 127.0.0.1
	tls $WORK/certs/server.pem $WORK/certs/server.key.pem
$1
}
CADDY
  XDG_CONFIG_HOME=$WORK XDG_DATA_HOME=$WORK GOMAXPROCS=1 \
    $PROXY_CPU "$CADDY" run --config "$WORK/Caddyfile" --adapter caddyfile >"$WORK/caddy.log" 2>&1 &
  PROXY_PID=$!
  wait_port "$PORT"
}
