// The dashboard's script (docs/DASHBOARD.md). It polls stats.json on the
// origin that served it and computes rates and percentiles from the
// difference between polls. Memory stays bounded for a page left open
// for days: at most KEEP polls are kept, and each table's rows are
// replaced, never appended to. The token lives in a variable only: never
// in the URL, a cookie or storage.
'use strict';
(function () {
  const POLL_MS = 1000;
  const KEEP = 120;
  const WINDOW = 10;
  const polls = [];
  let polled = 0;
  let token = '';
  const $ = (id) => document.getElementById(id);

  function cell(text, cls) {
    const td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }
  // Replaces the rows of `tbody` (one saying `empty` when there are none).
  function setRows(tbody, rows, empty) {
    if (rows.length === 0 && empty) {
      const td = cell(empty, 'dim');
      td.colSpan = 10;
      rows = [[td]];
    }
    const trs = rows.map((cells) => {
      const tr = document.createElement('tr');
      tr.replaceChildren(...cells.map((c) => (c instanceof Node ? c : cell(String(c)))));
      return tr;
    });
    tbody.replaceChildren(...trs);
  }
  function fixed(n, digits) {
    return Number.isFinite(n) ? n.toFixed(digits) : '-';
  }
  // Per second between poll `a` and poll `b` of what `f` reads.
  function rate(a, b, f) {
    if (!a || !b) return NaN;
    const seconds = (b.at_ms - a.at_ms) / 1000;
    return seconds > 0 ? Math.max(0, (f(b) || 0) - (f(a) || 0)) / seconds : NaN;
  }
  // The q-quantile, in ms, of the observations between two histograms
  // (non-cumulative buckets over `bounds` in seconds, then +Inf), with
  // linear interpolation inside a bucket, as Prometheus does.
  function quantile(q, bounds, older, newer) {
    if (!newer) return NaN;
    const delta = newer.buckets.map((n, i) => n - (older ? older.buckets[i] || 0 : 0));
    const total = delta.reduce((s, n) => s + n, 0);
    if (total <= 0) return NaN;
    const rank = q * total;
    let seen = 0;
    for (let i = 0; i < delta.length; i++) {
      if (seen + delta[i] >= rank && delta[i] > 0) {
        if (i >= bounds.length) return bounds[bounds.length - 1] * 1000;
        const low = i === 0 ? 0 : bounds[i - 1];
        return (low + (bounds[i] - low) * ((rank - seen) / delta[i])) * 1000;
      }
      seen += delta[i];
    }
    return NaN;
  }

  function render() {
    const now = polls[polls.length - 1];
    const prev = polls[polls.length - 2];
    const old = polls[Math.max(0, polls.length - 1 - WINDOW)];
    const bounds = now.latency_bounds;
    $('rps').textContent = fixed(rate(prev, now, (s) => s.requests.total), 1);
    $('total').textContent = String(now.requests.total);
    $('err-rate').textContent = fixed(rate(prev, now, (s) => s.requests.by_class['5xx']), 1);
    $('limited').textContent = String(now.requests.too_many_requests);
    const c = now.connections;
    $('conns').textContent = c.client_active + ' / ' + c.client_parked;
    const ups = Object.values(now.upstreams);
    const sum = (f) => ups.reduce((s, u) => s + (f(u) || 0), 0);
    $('upstream-conns').textContent = sum((u) => u.open_connections) + ' / ' + sum((u) => u.idle_connections);
    $('generation').textContent = String(now.generation);
    const r = now.reload;
    const err = r.last_error ? 'last error at ' + r.last_error.at + ': ' + r.last_error.message : 'last reload succeeded';
    $('reload').textContent = 'Configuration loaded at ' + r.loaded_at + '; ' + err + ' (reloads: ' + r.success + ' ok, ' + r.error + ' failed).';

    const routeOf = (s, name) => s && s.routes.find((x) => x.route === name);
    setRows($('routes'), now.routes.map((route) => {
      const before = routeOf(prev, route.route);
      const then = routeOf(old, route.route);
      const timed = route.latency ? null : 'no metrics handler';
      const p = (q) => timed || fixed(quantile(q, bounds, then && then.latency, route.latency), 2);
      return [route.route, fixed(rate(prev, now, (s) => (s === now ? route : before || route).requests), 1),
        route.by_class['2xx'], route.by_class['4xx'], cell(String(route.by_class['5xx']), route.by_class['5xx'] ? 'bad' : ''),
        p(0.5), p(0.99)];
    }));

    const upstreamOf = (s, name) => s && s.upstreams[name];
    setRows($('upstreams'), Object.entries(now.upstreams).map(([name, u]) => {
      const then = upstreamOf(old, name);
      const e = u.errors || {};
      return [name, u.balance, u.healthy_hosts + ' of ' + u.hosts.length,
        u.open_connections + ' / ' + u.idle_connections,
        fixed(quantile(0.5, bounds, then && then.latency, u.latency), 2),
        fixed(quantile(0.99, bounds, then && then.latency, u.latency), 2),
        e.connect + ' / ' + e.broken + ' / ' + e.timeout];
    }));
    const hosts = [];
    for (const [name, u] of Object.entries(now.upstreams)) {
      const before = upstreamOf(prev, name);
      u.hosts.forEach((h, i) => {
        const was = before && before.hosts[i] && before.hosts[i].address === h.address ? before.hosts[i] : null;
        const perS = was ? rate(prev, now, (s) => (s === now ? h : was).requests) : NaN;
        hosts.push([name, h.host, h.address, cell(h.state, h.state === 'healthy' ? 'ok' : 'bad'), h.weight,
          h.in_flight, fixed(h.latency_ewma_ms, 2), fixed(perS, 1), h.failures, h.ejections]);
      });
    }
    setRows($('hosts'), hosts);

    const kinds = (s) => {
      const out = { '5xx answers': s.requests.by_class['5xx'] };
      for (const [group, counts] of Object.entries(s.errors)) {
        if (typeof counts === 'number') out[group] = counts;
        else for (const [k, n] of Object.entries(counts)) out[group + ': ' + k] = n;
      }
      return out;
    };
    const nowKinds = kinds(now);
    const prevKinds = prev ? kinds(prev) : null;
    setRows($('errors'), Object.entries(nowKinds).filter(([, n]) => n > 0).map(([k, n]) =>
      [k, n, prevKinds ? fixed(rate(prev, now, (s) => (s === now ? n : prevKinds[k])), 1) : '-']), 'none since start');

    setRows($('stores'), Object.entries(now.rate_limit_stores).map(([name, s]) =>
      [name, cell(s.up ? 'up' : 'down', s.up ? 'ok' : 'bad'), s.allowed, s.limited, s.errors, s.fallbacks]), 'no rate_limit with store: redis');
    draw();
  }

  // Requests per second over the kept polls.
  function draw() {
    const canvas = $('chart');
    const g = canvas.getContext('2d');
    g.clearRect(0, 0, canvas.width, canvas.height);
    const points = [];
    for (let i = 1; i < polls.length; i++) points.push(rate(polls[i - 1], polls[i], (s) => s.requests.total) || 0);
    if (points.length < 2) return;
    const top = Math.max(1, ...points);
    g.strokeStyle = '#3a7bd5';
    g.lineWidth = 2;
    g.beginPath();
    points.forEach((v, i) => {
      const x = (i / (KEEP - 2)) * (canvas.width - 10) + 5;
      const y = canvas.height - 5 - (v / top) * (canvas.height - 25);
      if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
    });
    g.stroke();
    g.fillStyle = '#888';
    g.font = '12px system-ui, sans-serif';
    g.fillText('max ' + top.toFixed(1) + ' req/s', 8, 14);
  }

  function status(text, cls) {
    const s = $('status');
    s.textContent = text;
    s.className = 'status ' + cls;
  }

  async function poll() {
    try {
      const headers = token ? { Authorization: 'Bearer ' + token } : {};
      const answer = await fetch('stats.json', { headers, cache: 'no-store', credentials: 'omit' });
      if (answer.status === 401) {
        $('auth').hidden = false;
        $('auth-note').textContent = token ? 'that token was refused' : 'the admin listener needs its token';
        status('token needed', 'down');
      } else if (!answer.ok) {
        status('stats.json answered ' + answer.status, 'down');
      } else {
        polls.push(await answer.json());
        if (polls.length > KEEP) polls.shift();
        // Shown so that a test (and a curious operator) can see the
        // history stays bounded however long the page has run.
        polled += 1;
        $('kept').textContent = String(polls.length);
        $('polled').textContent = String(polled);
        status('live', 'live');
        render();
      }
    } catch (e) {
      status('proxy unreachable', 'down');
    }
    setTimeout(poll, POLL_MS);
  }

  $('auth').addEventListener('submit', (event) => {
    event.preventDefault();
    token = $('token').value;
    $('token').value = '';
    $('auth').hidden = true;
    polls.length = 0;
  });
  poll();
})();
