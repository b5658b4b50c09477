'use strict';
// node: seeds/001's Node server on the http module (no dependencies), with
// the bytes `sluice serve` answers: GET / is the hello world (`sluice serve
// static --size 12`) and GET /v1/pets the petstore list.
//
//   node server.js --port 8080 [--host 127.0.0.1] [--workers 1]
//
// One process by default, as the seed ran it; --workers N forks N with the
// cluster module, which shares one listening socket among them.

const cluster = require('node:cluster');
const http = require('node:http');
const { parseArgs } = require('node:util');

const HELLO = Buffer.from('abcdefghijkl');
const PETS = [
  { id: 1, name: 'catten', tag: 'cat' },
  { id: 2, name: 'doggy', tag: 'dog' },
];

function handle(req, res) {
  if (req.method === 'GET' && req.url === '/') {
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': HELLO.length });
    res.end(HELLO);
  } else if (req.method === 'GET' && req.url === '/v1/pets') {
    const body = JSON.stringify(PETS);
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
    res.end(body);
  } else {
    res.writeHead(404, { 'Content-Length': 0 });
    res.end();
  }
}

const { values } = parseArgs({
  options: {
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '8080' },
    workers: { type: 'string', default: '1' },
  },
});
const workers = Number.parseInt(values.workers, 10);
const port = Number.parseInt(values.port, 10);

if (workers > 1 && cluster.isPrimary) {
  for (let i = 0; i < workers; i++) {
    cluster.fork();
  }
  cluster.on('exit', (worker, code) => {
    console.error(`worker ${worker.process.pid} exited (${code}); stopping`);
    process.exit(1);
  });
} else {
  http.createServer(handle).listen(port, values.host, () => {
    console.log(`node listening on ${values.host}:${port} (pid ${process.pid})`);
  });
}
