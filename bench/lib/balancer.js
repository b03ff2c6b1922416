// A round-robin HTTP balancer on 127.0.0.1, as a team puts in front of its replicas: each request
// goes to the next target in turn, whatever connection it came on (no sticky sessions), over
// keep-alive connections to the targets as a real balancer keeps them. It prints its port at once
// (replicas must be told its URL before they start), then takes its targets as one comma-separated
// line on stdin and prints `targets N`; until then it answers 503.
import http from 'node:http';

let targets = [];
let next = 0;
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const server = http.createServer((req, res) => {
  if (!targets.length) return void res.writeHead(503).end('no target yet');
  const target = targets[next++ % targets.length];
  const out = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  out.on('error', () => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  req.pipe(out);
});

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  input += d;
  const end = input.indexOf('\n');
  if (end < 0 || targets.length) return;
  targets = input
    .slice(0, end)
    .split(',')
    .filter(Boolean)
    .map((t) => new URL(t));
  if (targets.some((t) => t.hostname !== '127.0.0.1')) {
    console.error('loopback targets only');
    process.exit(2);
  }
  console.log(`targets ${targets.length}`);
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
