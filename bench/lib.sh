# Shared by the bench scripts: source it, do not run it.

# The petstore list, byte for byte as `sluice serve petstore` answers it.
PETS='[{"id":1,"name":"catten","tag":"cat"},{"id":2,"name":"doggy","tag":"dog"}]'

# write_nginx_conf DIR PORT BODY TYPE: one worker answering every request
# with `return 200 BODY` as TYPE; no access log; keep-alive without a
# request limit, so nginx is measured at its best.
write_nginx_conf() {
  local dir=$1 port=$2 body=$3 type=$4
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
    listen 127.0.0.1:$port backlog=8192;
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

# cpu_ticks PID: user + system CPU time of a process, in clock ticks (1/100 s).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# rss_kib PID FIELD: a memory figure of a process in KiB (VmRSS now, VmHWM peak).
rss_kib() { awk -v k="$2" '$1==k":" {print $2}' "/proc/$1/status" 2>/dev/null || echo "?"; }

# to_us: wrk's latencies on stdin (`850.00us`, `2.46ms`, `1.20s`) as microseconds.
to_us() { awk '{v=$1; if (v ~ /ms$/) {sub("ms","",v); v*=1000} else if (v ~ /us$/) {sub("us","",v)} else if (v ~ /s$/) {sub("s","",v); v*=1000000}; print v}'; }
