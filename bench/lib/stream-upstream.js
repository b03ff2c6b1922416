// An MCP-shaped upstream for the streams benchmark, run as its own process on 127.0.0.1: every
// GET is an event stream it keeps open (as an MCP server's GET stream is), POSTs answer at once,
// and GET /count says how many streams and connections it holds. Prints its port on stdout.
import http from 'node:http';

const open = new Set();
const server = http.createServer((req, res) => {
  if (req.url === '/count') {
    server.getConnections((_err, connections) => {
      const body = JSON.stringify({ open: open.size, connections: connections - 1 });
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
      res.end(body);
    });
    return;
  }
  if (req.method !== 'GET') {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"jsonrpc":"2.0","id":1,"result":{}}');
    });
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  res.write(': open\n\n');
  open.add(res);
  res.on('close', () => open.delete(res));
});
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
