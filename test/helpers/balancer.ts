/**
 * A round-robin HTTP balancer on 127.0.0.1, as a team would put in front of its replicas: each
 * request goes to the next replica in turn, whatever connection it came on (no sticky sessions).
 * Bodies stream both ways; a replica that does not answer gets the client a 502.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Balancer {
  url: string;
  port: number;
  /** where requests go, in turn; may be set after the balancer listens (replicas need its URL first) */
  targets: string[];
  /** how many requests each target got */
  served: Map<string, number>;
  /** the target of each request, in the order they came */
  history: string[];
  close(): Promise<void>;
}

export async function startBalancer(targets: string[] = []): Promise<Balancer> {
  let next = 0;
  const served = new Map<string, number>();
  const history: string[] = [];
  const agent = new http.Agent({ keepAlive: false });
  const server = http.createServer((req, res) => {
    const list = balancer.targets;
    if (!list.length) {
      res.writeHead(503).end('no replica');
      return;
    }
    const target = new URL(list[next++ % list.length]);
    served.set(target.origin, (served.get(target.origin) ?? 0) + 1);
    history.push(target.origin);
    const upstream = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'text/plain' });
      res.end(`balancer: ${target.origin} failed: ${err.message}`);
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const balancer: Balancer = {
    url: `http://127.0.0.1:${port}`,
    port,
    targets,
    served,
    history,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
        agent.destroy();
      }),
  };
  return balancer;
}
